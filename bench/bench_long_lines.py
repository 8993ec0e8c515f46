"""Exact match on short and long text lines: the fixed 48x320 recogniser input vs variable width (issue 23).

    ./run python bench/bench_long_lines.py [--lines 40] [--arm 4] [--int8] [--work DIR]

Builds the PP-OCRv4 rec example twice for arm64 (FP32 by default, `--int8` for INT8 with
the example's search): `rec.toml` on the source ONNX (fixed width 320) and
`rec_dynamic.toml` on the same ONNX (the import makes its reshapes width-free; width 320..1280). Renders
lines with DejaVu Sans (Pillow's FreeType; /usr/share/fonts/truetype/dejavu), `--lines`
short (< 20 characters) and as many long (>= 40), reads them through `edgekit.consumers.predict`
(the bundles' own preprocess.json) on the x86 twin, and the first `--arm` short and long lines
through model.nb under qemu (EDGEKIT_LITE_ARM). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from edgekit.examples.ppocr.lines import render, texts

ROOT = Path(__file__).resolve().parents[1]


def build(work: Path, int8: bool) -> dict[str, Path]:
    """The fixed and the dynamic rec bundle (built once per --work folder)."""
    from edgekit.examples.ppocr import make_data, models

    precision = "int8" if int8 else "fp32"
    data = work / "data"
    if not (data / "rec_eval.npz").exists():
        make_data.make_data(data, seed=0, counts=make_data.Counts(det_calib=1, det_eval=1, rec_calib=64, rec_eval=40,
                                                                  cls_calib=1, cls_eval=1))
    example = ROOT / "edgekit" / "examples" / "ppocr"
    found = {}
    for mode, toml, onnx_path, name in (("fixed", "rec.toml", models.model_path("rec"), "ppocrv4-rec"),
                                        ("dynamic", "rec_dynamic.toml", models.model_path("rec"),
                                         "ppocrv4-rec-dynamic")):
        bundle = work / "out" / name / f"arm64-{precision}"
        if not bundle.exists():
            from edgekit.core.proc import run as run_process

            args = [str(Path(sys.executable).parent / "edgekit"), "build", "-c", str(example / toml), "-m", str(onnx_path),
                    "--eval", str(data / "rec_eval.npz"), "--quant", precision, "--target", "arm64",
                    "--out", str(work / "out"), "--quiet", "--no-emulation"]
            if int8:
                args += ["--calib", str(data / "rec_calib.npz")]
            done = run_process(args, timeout=3600, what=f"edgekit build {toml}")
            if done.returncode != 0:
                raise SystemExit(f"edgekit build {toml} failed:\n{done.stderr[-3000:]}")
        found[mode] = bundle
    return found


def score(model, crops, truth) -> dict:
    from edgekit.tasks.ocr import recognition_scores

    start = time.perf_counter()
    read = [r["text"] for r in model.predict_many(crops)]
    scores = recognition_scores(read, truth)
    return dict(scores, lines=len(truth), seconds=round(time.perf_counter() - start, 2),
                misread=[{"truth": t, "read": r} for t, r in zip(truth, read) if "".join(t.split()) != "".join(r.split())][:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=40, help="short lines, and as many long ones")
    parser.add_argument("--arm", type=int, default=0, help="short and long lines of each bundle also read under qemu")
    parser.add_argument("--int8", action="store_true", help="INT8 bundles (the twin is FP32: --arm shows INT8)")
    parser.add_argument("--work", type=Path, default=None, help="keep builds here (reused when present)")
    args = parser.parse_args()
    from edgekit.consumers.predict import BundleModel, Engines, EngineKind

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-long-lines-"))
    bundles = build(work, args.int8)
    rng = np.random.default_rng(23)
    sets = {"short (< 20 chars)": texts(rng, args.lines, 8, 19), "long (>= 40 chars)": texts(rng, args.lines, 40, 64)}
    crops = {name: [render(rng, t) for t in lines] for name, lines in sets.items()}
    result = {"font": "DejaVu Sans / Serif / Sans Mono, 24-36 px (Pillow FreeType)", "work": str(work),
              "precision": "int8" if args.int8 else "fp32", "twin": {}, "arm": {}}
    for mode, bundle in bundles.items():
        model = BundleModel.load(bundle)
        widths = sorted({model.tensor(c).shape[2] for c in crops["long (>= 40 chars)"]})
        result["twin"][mode] = {name: score(model, crops[name], sets[name]) for name in sets}
        result["twin"][mode]["long tensor widths"] = [widths[0], widths[-1]]
    if args.arm:
        from edgekit.contracts.settings import EmulationConfig

        settings = EmulationConfig(runtime=Path(os.environ["EDGEKIT_LITE_ARM"])) if os.environ.get("EDGEKIT_LITE_ARM") \
            else None
        if settings is None:
            result["arm"] = {"skipped": "EDGEKIT_LITE_ARM is unset"}
        else:
            for mode, bundle in bundles.items():
                model = BundleModel.load(bundle, engines=Engines(EngineKind.arm, settings, timeout=3600))
                result["arm"][mode] = {name: score(model, crops[name][:args.arm], sets[name][:args.arm]) for name in sets}
                result["arm"][mode]["engine"] = model.engine.describe()
    print(json.dumps(result, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
