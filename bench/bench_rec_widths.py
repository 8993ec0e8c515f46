"""A dynamic-width recogniser read two ways: each line at its own width (as `edgekit ocr` and the apps run a crop)
and every line padded on the right to the widest of the folder (as an image folder becomes evaluation and
calibration data today: `edgekit.model.data`, one batch).

    EDGEKIT_LITE_ARM=... ./run python bench/bench_rec_widths.py --bundle REC_BUNDLE [--bundle ...] --data FOLDER
        [--engine twin|arm]

FOLDER: line images (*.png, in name order) and their truth.json (edgekit-truth/1, e.g. the conformance suite's
`rec_crops`: `edgekit.examples.zoo.rec_crops`). Each bundle runs on `--engine` (default: edgekit's choice, i.e. the
ARM `.nb` under qemu for an INT8 bundle when a runtime is configured; one emulator launch per width). Prints one
JSON object: per bundle, exact lines both ways, the engine, the widths, and every line some reading got wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np


def padded(tensors: list[np.ndarray], pad_value: float, axis: int) -> np.ndarray:
    widest = max(t.shape[axis] for t in tensors)
    out = []
    for t in tensors:
        pad = [(0, 0)] * t.ndim
        pad[axis] = (0, widest - t.shape[axis])
        out.append(np.pad(t, pad, constant_values=np.float32(pad_value)))
    return np.stack(out)


def width_axis(model) -> int:
    """The width axis of one preprocessed line (C, H, W or H, W, C)."""
    return 2 if model.spec.layout == "NCHW" else 1


def text_of(result) -> str:
    return result["text"] if isinstance(result, dict) else str(result)


def read(model, images: list[np.ndarray]) -> dict[str, list[str]]:
    """The model's texts for `images`: each at its own width, and all padded to the widest."""
    tensors = [model.tensor(image) for image in images]
    own = [text_of(r) for r in model.predict_many(images)]
    batch = padded(tensors, model.spec.pad_value, width_axis(model))
    together = [text_of(r) for r in model.task.postprocess(model.run_batch(batch))]
    return {"own_width": own, "padded_to_widest": together}


def main() -> int:
    import cv2

    from edgekit.consumers.predict import BundleModel, Engines, parse_engine
    from edgekit.contracts.settings import EmulationConfig

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", action="append", required=True, type=Path, help="a recogniser bundle (repeatable)")
    parser.add_argument("--data", required=True, type=Path, help="line images + truth.json")
    parser.add_argument("--engine", choices=("twin", "arm"), default=None)
    args = parser.parse_args()

    truth = json.loads((args.data / "truth.json").read_text(encoding="utf-8"))["truth"]
    files = sorted(args.data.glob("*.png"))
    if len(files) != len(truth):
        raise SystemExit(f"{args.data}: {len(files)} images, {len(truth)} truth lines")
    images = [cv2.imread(str(p), cv2.IMREAD_COLOR) for p in files]
    runtime = os.environ.get("EDGEKIT_LITE_ARM")
    engines = Engines(parse_engine(args.engine), EmulationConfig(runtime=Path(runtime)) if runtime else None)
    result = {"data": str(args.data), "lines": len(truth), "bundles": {}}
    for bundle in args.bundle:
        model = BundleModel.load(bundle, engines=engines)
        start = time.monotonic()
        readings = read(model, images)
        widths = [model.tensor(image).shape[width_axis(model)] for image in images]
        wrong = [{"line": files[i].name, "truth": truth[i], **{k: v[i] for k, v in readings.items()}}
                 for i in range(len(truth)) if any(v[i] != truth[i] for v in readings.values())]
        result["bundles"][str(bundle)] = {
            "engine": model.engine.describe() if model.engine is not None else None,
            "exact": {k: sum(a == b for a, b in zip(v, truth)) for k, v in readings.items()},
            "widths": {"median": int(np.median(widths)), "widest": int(max(widths))},
            "wrong": wrong, "seconds": round(time.monotonic() - start, 1)}
    print(json.dumps(result, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
