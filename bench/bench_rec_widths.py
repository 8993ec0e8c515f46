"""A dynamic-width recogniser read two ways: each line at its own width (as `edgekit ocr` and the apps run a crop)
and every line padded on the right to the widest of the folder (as an image folder becomes evaluation and
calibration data today: `edgekit.model.data`, one batch).

    EDGEKIT_LITE_ARM=... ./run python bench/bench_rec_widths.py --bundle REC_BUNDLE [--bundle ...] --data FOLDER
        [--engine twin|arm]

FOLDER: line images (read as `edgekit build --eval` reads a folder) and their truth.json (edgekit-truth/1, e.g. the conformance suite's
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


def text_of(result) -> str:
    return result["text"] if isinstance(result, dict) else str(result)


def read(model, folder: Path) -> tuple[list[str], dict[str, list[str]], list[int]]:
    """The folder's line files (in the order edgekit reads them), the model's texts for them each at its own width
    and padded to the widest as `load_images` pads a folder, and each line's own tensor width."""
    from edgekit.consumers.predict import read_image
    from edgekit.model.data import load_images

    samples = load_images(folder, model.spec, model.feed)
    own = [text_of(r) for r in model.predict_many([read_image(folder / name) for name in samples.files])]
    together = [text_of(r) for r in model.task.postprocess(model.run_batch(samples.inputs[model.feed]))]
    return list(samples.files), {"own_width": own, "padded_to_widest": together}, list(samples.lines.widths)


def main() -> int:
    from edgekit.consumers.predict import BundleModel, Engines, parse_engine
    from edgekit.contracts.settings import EmulationConfig

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", action="append", required=True, type=Path, help="a recogniser bundle (repeatable)")
    parser.add_argument("--data", required=True, type=Path, help="line images + truth.json")
    parser.add_argument("--engine", choices=("twin", "arm"), default=None)
    args = parser.parse_args()

    truth = json.loads((args.data / "truth.json").read_text(encoding="utf-8"))["truth"]
    runtime = os.environ.get("EDGEKIT_LITE_ARM")
    engines = Engines(parse_engine(args.engine), EmulationConfig(runtime=Path(runtime)) if runtime else None)
    result = {"data": str(args.data), "lines": len(truth), "bundles": {}}
    for bundle in args.bundle:
        model = BundleModel.load(bundle, engines=engines)
        start = time.monotonic()
        files, readings, widths = read(model, args.data)
        if len(files) != len(truth):
            raise SystemExit(f"{args.data}: {len(files)} images, {len(truth)} truth lines")
        wrong = [{"line": files[i], "truth": truth[i], **{k: v[i] for k, v in readings.items()}}
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
