"""A PaddleX 3 detector (PIR, multiclass_nms3 inside) against the same network as a Paddle 2 PaddleDetection export, as
JSON: the NMS decision, mAP@0.5 per tier against the source framework's own rows, tier A/C figures, `.nb` bytes.

    ./run python bench/bench_paddlex3_detector.py [--samples 36] [--precisions fp32 int8] [--emulation]

Both folders hold the detector example with PaddleDetection's three inputs and `multiclass_nms3`, built with
`edgekit build -m DIR` from their own inference.yml (no [preprocess] or [task]) for arm64:
- **pir**: `edgekit.examples.detector.paddlex3` (Paddle 3's `jit.save`, PIR `inference.json`, PaddleX's yml), judged
  against Paddle 3's own inference of the three-input program;
- **paddle2**: `inference.pdmodel` saved by Paddle 2.6's `jit.save` (the layout `test_detection_paddledet.py` uses),
  judged against Paddle 2.6.
Evaluation: the example's square eval scenes (96x96 images; the yml's Resize stretches, so their letterbox truth holds);
calibration: the example's 32 calibration scenes. `--emulation` runs tier C (EDGEKIT_LITE_ARM must be set): the NMS
op is then kept when tiers A and C give the source's rows, else cut. Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import EXAMPLES_DIR

DETECTOR = EXAMPLES_DIR / "detector"


def square_scenes(out: Path, count: int) -> Path:
    import cv2

    from edgekit.tasks import write_truth
    from edgekit.tasks.truth import read_truth

    source = DETECTOR / "data" / "eval"
    stored = read_truth(source / "truth.json")
    files = sorted(source.glob("*.png"))
    picks = [i for i, f in enumerate(files) if cv2.imread(str(f)).shape[:2] == (96, 96)][:count]
    out.mkdir(parents=True)
    for i in picks:
        shutil.copyfile(files[i], out / files[i].name)
    write_truth(out / "truth.json", stored.task, [stored.values[i] for i in picks])
    return out


def paddle2_folder(out: Path, yml: str) -> Path:
    import paddle
    from paddle.static import InputSpec

    from edgekit.examples.detector import with_nms

    paddle.disable_static()
    model = with_nms.create_paddledet()
    model.set_state_dict(paddle.load(str(DETECTOR / "detector.pdparams")))
    model.eval()
    specs = [InputSpec([-1, 3, 96, 96], "float32", "image"), InputSpec([-1, 2], "float32", "im_shape"),
             InputSpec([-1, 2], "float32", "scale_factor")]
    paddle.jit.save(paddle.jit.to_static(model, input_spec=specs), str(out / "inference"))
    (out / "inference.yml").write_text(yml, encoding="utf-8")
    return out


def build(folder: Path, scenes: Path, precision: str, root: Path, emulation: bool) -> dict:
    from edgekit.build.config import resolve
    from edgekit.build.pipeline import build as run_build

    flags = {"model": str(folder), "precision": precision, "target": "arm64", "out_dir": root, "cache_dir": "off",
             "emulation_enabled": emulation, "evaluation": scenes, "name": f"{folder.name}-{precision}"}
    if precision == "int8":
        flags["calibration"] = DETECTOR / "data" / "calib"
    cfg = resolve(None, flags)
    start = time.monotonic()
    result = run_build(cfg)
    m = result.bundle.manifest.to_json()
    nms = m["model"]["nms"]
    checks = [{k: c[k] for k in ("tier", "output", "metric", "value") if k in c} for c in m["parity"]["checks"]
              if c["tier"] in ("A", "C")]
    source = (m.get("paddle3") or {}).get("task_metric", {}).get("paddle3")
    return {"seconds": round(time.monotonic() - start, 1), "nb_bytes": m["model"]["bytes"],
            "geometry": m["model"]["geometry"]["bound"], "inputs": [i["name"] for i in m["model"]["inputs"]],
            "nms": {"kept": nms["kept"], "reason": nms["reason"], "measured": nms["measured"],
                    "cut": nms.get("cut"), "paddle3_reference": nms.get("paddle3_reference")},
            "translation_check": (m.get("paddle3") or {}).get("check"), "paddle3_own_map50": source,
            "map50": {k: v["map50"] for k, v in m["parity"]["metrics"].items()}, "checks": checks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=36, help="square eval scenes (36 exist)")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "int8"], choices=["fp32", "int8"])
    parser.add_argument("--routes", nargs="+", default=["pir", "paddle2"], choices=["pir", "paddle2"])
    parser.add_argument("--emulation", action="store_true", help="run tier C too (needs EDGEKIT_LITE_ARM)")
    args = parser.parse_args()
    if args.emulation and not os.environ.get("EDGEKIT_LITE_ARM"):
        parser.error("--emulation needs EDGEKIT_LITE_ARM (an ARM Paddle-Lite runtime)")
    logging.disable(logging.INFO)
    os.environ.setdefault("GLOG_minloglevel", "2")
    from edgekit.examples.detector import paddlex3

    figures: dict = {"samples": args.samples, "emulation": args.emulation, "routes": {}}
    with tempfile.TemporaryDirectory(prefix="bench-paddlex3-") as tmp:
        root = Path(tmp)
        scenes = square_scenes(root / "scenes", args.samples)
        folders = {}
        if "pir" in args.routes:
            folders["pir"] = paddlex3.make(root / "pir")
        if "paddle2" in args.routes:
            (root / "paddle2").mkdir()
            folders["paddle2"] = paddle2_folder(root / "paddle2", paddlex3.inference_yml())
        for route, folder in folders.items():
            for precision in args.precisions:
                figures["routes"].setdefault(route, {})[precision] = build(folder, scenes, precision, root / "out",
                                                                           args.emulation)
    json.dump(figures, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
