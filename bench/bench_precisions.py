"""Size, accuracy and build time of each bundled example for every precision, as JSON.

    ./run python bench/bench_precisions.py [--examples digits rec det cls] [--data DIR]

For each example, builds for arm64 as fp32, int8 with the best of several calibration
algorithms and no fallback, int8 with the per-layer float fallback, int8-weight and
int16-weight, each with an empty calibration cache, and prints `.nb` bytes (graph /
weights), the task metric of the reference and of the host simulation (digits: top-1;
OCR rec: exact match; det: hmean; cls: direction accuracy), the layers kept in float,
the calibrations run and the build seconds. Figures only: nothing is asserted.

- digits (the bundled classifier): the fallback row uses the KL algorithm, which loses
  about 2 points alone, with a 0.5-point budget.
- PP-OCRv4 rec / det and the direction classifier (the `rapidocr_onnxruntime` wheel's
  ONNX models on data rendered by `edgekit.examples.ppocr.make_data`): the fallback row
  uses `avg`, the budget is the example's `[parity]` gate (rec: 2 exact-match points).
  The rec fallback calibrates once per step (~25 s each on 2 cores): expect tens of minutes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "edgekit" / "examples"
BEST_ALGOS = ("avg", "abs_max", "hist", "mse")

DIGITS_CASES = {
    "fp32": {"precision": "fp32"},
    "int8 (best algorithm, no fallback)": {"precision": "int8", "search_algos": BEST_ALGOS, "fallback": False},
    # KL alone loses ~2 points on this model: the fallback has to keep a layer in float
    "int8 KL (fallback, budget 0.5 points)": {"precision": "int8", "search_algos": ("KL",), "max_drop": 0.5},
    "int8-weight": {"precision": "int8-weight"},
    "int16-weight": {"precision": "int16-weight"},
}

OCR_CASES = {
    "fp32": {"precision": "fp32"},
    "int8 (best algorithm, no fallback)": {"precision": "int8", "search_algos": BEST_ALGOS, "fallback": False},
    "int8 avg (fallback, the example's budget)": {"precision": "int8", "search_algos": ("avg",)},
    "int8-weight": {"precision": "int8-weight"},
    "int16-weight": {"precision": "int16-weight"},
}


def _row(result, seconds: float) -> dict:
    m = result.bundle.manifest.to_json()
    search = m.get("quantization", {}).get("search", {})
    return {
        "seconds": round(seconds, 2),
        "nb_bytes": m["model"]["bytes"], "graph_bytes": m["model"]["program_bytes"],
        "weight_bytes": m["model"]["params_bytes"], "metric": (m.get("task") or {}).get("primary"),
        "accuracy": m["parity"]["accuracy"],
        "chosen_algo": search.get("algo"), "float_layers": search.get("float_layers"),
        "calibrations": search.get("calibrations"),
        "candidates": [{k: c.get(k) for k in ("algo", "purpose", "float_layers", "holds", "task", "cosine")}
                       for c in search.get("candidates", []) if c.get("purpose") != "sensitivity"],
        "sensitivity_candidates": sum(1 for c in search.get("candidates", []) if c.get("purpose") == "sensitivity"),
    }


def _run(cases: dict, base: dict, config: Path | None, root: Path) -> dict:
    from edgekit.build.config import resolve
    from edgekit.core.errors import EdgekitError
    from edgekit.build.pipeline import build

    rows = {}
    for name, flags in cases.items():
        slug = name.split()[0] + ("-fallback" if "fallback," in name else "")
        cfg = resolve(config, {"target": "arm64", "out_dir": root / slug, "cache_dir": str(root / "cache" / slug),
                               **base, **flags})
        start = time.monotonic()
        try:
            rows[name] = _row(build(cfg), time.monotonic() - start)
        except EdgekitError as exc:       # a missed budget is a figure too
            rows[name] = {"failed": exc.message, "report": getattr(exc, "report_lines", []),
                          "seconds": round(time.monotonic() - start, 2)}
        print(f"{name}: {json.dumps(rows[name].get('accuracy', rows[name].get('failed')))} "
              f"in {rows[name]['seconds']} s", file=sys.stderr, flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", nargs="+", default=["digits", "rec", "det", "cls"],
                        choices=["digits", "rec", "det", "cls"])
    parser.add_argument("--data", type=Path, help="PP-OCR data from make_data (default: rendered into a temporary folder)")
    args = parser.parse_args()
    logging.disable(logging.INFO)
    os.environ.setdefault("GLOG_minloglevel", "2")

    report: dict = {"target": "arm64", "python": sys.version.split()[0], "examples": {}}
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-") as scratch:
        root = Path(scratch)
        for example in args.examples:
            start = time.monotonic()
            if example == "digits":
                rows = _run(DIGITS_CASES, {}, None, root / example)
                report["examples"]["digits (bundled classifier)"] = {"precisions": rows}
                continue
            from edgekit.examples.ppocr import make_data, models

            data = args.data.absolute() if args.data else root / "ocr-data"
            if not (data / f"{example}_eval.npz").is_file():
                make_data.make_data(data)
            base = {"model": str(models.model_path(example)), "evaluation": data / f"{example}_eval.npz",
                    "calibration": data / f"{example}_calib.npz"}
            rows = _run(OCR_CASES, base, EXAMPLES_DIR / "ppocr" / f"{example}.toml", root / example)
            report["examples"][f"ppocr {example} ({models.MODELS[example].file})"] = {
                "precisions": rows, "seconds": round(time.monotonic() - start, 2)}
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
