"""PIR route vs legacy route on the same trained networks, as JSON: .nb bytes and op count, task metric per tier.

    ./run python bench/bench_paddle3.py [--examples det rec cls] [--precisions fp32 int8] [--data DIR]
        [--search-algos hist] [--emulation]

For each PP-OCR example, the network is built twice for arm64 in one run:
- **legacy**: the rapidocr ONNX model through X2Paddle (a legacy ProgramDesc), as the example builds today;
- **pir**: the same network as PaddleOCR 3.x ships it, a PIR `inference.json` written by Paddle 3
  (`edgekit.examples.ppocr.paddle3`), built with `-m DIR`: translated to a legacy program by edgekit,
  every tier measured against Paddle 3's own inference of the `.json`.
Both take the example's toml. Reported per build: the `.nb` bytes (graph vs weights), the ops in the
`.nb`, the task metric of every tier, tier A's max abs (against ONNX Runtime's / Paddle 3's reference),
the translation's own check, and seconds; then pir/legacy ratios of bytes and ops. `--emulation` runs
tier C (EDGEKIT_LITE_ARM must be set). Figures only: nothing is asserted.
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

from common import example_flags, ocr_data


def _build(flags: dict, config: Path, root: Path, emulation: bool) -> dict:
    from edgekit.build.config import resolve
    from edgekit.lite.nbfile import kernels
    from edgekit.build.pipeline import build

    cfg = resolve(config, {"target": "arm64", "out_dir": root, "cache_dir": "off", "emulation_enabled": emulation, **flags})
    start = time.monotonic()
    result = build(cfg)
    manifest = result.bundle.manifest.to_json()
    model = manifest["model"]
    tier_a = {c["metric"]: c["value"] for c in manifest["parity"]["checks"] if c["tier"] == "A"}
    nb_ops = [k for k in kernels(result.bundle.path / "model.nb") if k.op not in ("feed", "fetch")]
    return {"seconds": round(time.monotonic() - start, 1), "accuracy": manifest["parity"]["accuracy"],
            "nb": {"bytes": model["bytes"], "graph_bytes": model["program_bytes"], "weights_bytes": model["params_bytes"],
                   "ops": len(nb_ops)},
            "tier_a": tier_a, "translation_check": (manifest.get("paddle3") or {}).get("check"),
            "algo": (manifest.get("quantization") or {}).get("algo")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", nargs="+", default=["det", "rec", "cls"], choices=["det", "rec", "cls"])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "int8"], choices=["fp32", "int8"])
    parser.add_argument("--data", type=Path, help="PP-OCR data from make_data (default: rendered into a temp folder)")
    parser.add_argument("--search-algos", nargs="+", help="INT8 calibration algorithms to search (default: the example's)")
    parser.add_argument("--emulation", action="store_true", help="run tier C too (needs EDGEKIT_LITE_ARM)")
    args = parser.parse_args()
    logging.disable(logging.INFO)
    os.environ.setdefault("GLOG_minloglevel", "2")
    from edgekit.examples.ppocr import paddle3

    report: dict = {"target": "arm64", "python": sys.version.split()[0], "examples": {}}
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-paddle3-") as scratch:
        root = Path(scratch)
        data = ocr_data(args.data, args.examples, root)
        pir = paddle3.make(root / "pir-models", args.examples)
        for example in args.examples:
            rows: dict = {}
            for route in ("legacy", "pir"):
                for precision in args.precisions:
                    config, flags = example_flags(example, precision, data)
                    if route == "pir":
                        flags["model"] = str(pir[example])
                    if args.search_algos and precision == "int8":
                        flags["search_algos"] = tuple(args.search_algos)
                    row = _build(flags, config, root / example / route / precision, args.emulation)
                    rows.setdefault(route, {})[precision] = row
                    print(f"{example} {route} {precision}: {row['nb']}, {json.dumps(row['accuracy'])} ({row['seconds']} s)",
                          file=sys.stderr, flush=True)
            rows["pir_over_legacy"] = {p: {"bytes": round(rows["pir"][p]["nb"]["bytes"] / rows["legacy"][p]["nb"]["bytes"], 4),
                                           "ops": round(rows["pir"][p]["nb"]["ops"] / rows["legacy"][p]["nb"]["ops"], 4)}
                                       for p in args.precisions}
            report["examples"][example] = rows
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
