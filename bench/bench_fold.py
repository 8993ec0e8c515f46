"""What the fold stage does to the .nb files, as JSON: ops, bytes (graph vs weights), INT8/FP32 ratio, task metric.

    ./run python bench/bench_fold.py [--examples det rec cls digits] [--precisions fp32 int8] [--data DIR]
        [--search-algos avg]

For each example, builds arm64 FP32 and INT8 twice in one run: with `[build] fold = false`
(the program as X2Paddle or the export wrote it) and with folding. Reports for each
build: the program's op count after the fold stage (the ops opt and PaddleSlim see),
the `.nb` file's bytes split by its header into graph (the flatbuffers program) and
weights, the INT8/FP32 size ratio, and the task metric of every tier. Tier C is not
run (`--no-emulation`): size and host accuracy are what folding changes; the tier-C
check of folded models is in the tests. `--search-algos` narrows the INT8 algorithms
the examples search (rec searches avg and hist: ~10 minutes a build). PP-OCR data
come from `python -m edgekit.examples.ppocr.make_data DIR` (rendered into a temporary
folder when --data is not given). Figures only: nothing is asserted.
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


def _build(flags: dict, config: Path | None, root: Path) -> dict:
    from edgekit.build.config import resolve
    from edgekit.build.pipeline import build

    cfg = resolve(config, {"target": "arm64", "out_dir": root, "cache_dir": "off", "emulation_enabled": False, **flags})
    start = time.monotonic()
    manifest = build(cfg).bundle.manifest.to_json()
    folding = manifest.get("folding") or {}
    model = manifest["model"]
    return {"seconds": round(time.monotonic() - start, 1), "accuracy": manifest["parity"]["accuracy"],
            "ops_after_fold_stage": (folding.get("ops") or {}).get("after"),
            "ops_before_fold_stage": (folding.get("ops") or {}).get("before"),
            "conv_chains_folded": folding.get("conv_chains_folded", 0), "activations": folding.get("activations", {}),
            "fold_check": folding.get("check"),
            "nb": {"bytes": model["bytes"], "graph_bytes": model["program_bytes"], "weights_bytes": model["params_bytes"]},
            "int8_layers_in_float": len((manifest.get("quantization") or {}).get("float_layers") or [])}


def _flags(example: str, precision: str, data: Path | None, algos: list[str] | None) -> tuple[Path | None, dict]:
    config, flags = example_flags(example, precision, data)
    if algos and precision == "int8":
        flags["search_algos"] = tuple(algos)
    return config, flags


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", nargs="+", default=["det", "rec", "cls"], choices=["digits", "det", "rec", "cls"])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "int8"], choices=["fp32", "int8"])
    parser.add_argument("--data", type=Path, help="PP-OCR data from make_data (default: rendered into a temp folder)")
    parser.add_argument("--search-algos", nargs="+", help="INT8 calibration algorithms to search (default: the example's)")
    args = parser.parse_args()
    logging.disable(logging.INFO)
    os.environ.setdefault("GLOG_minloglevel", "2")
    report: dict = {"target": "arm64", "python": sys.version.split()[0], "examples": {}}
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-fold-") as scratch:
        root = Path(scratch)
        data = ocr_data(args.data, args.examples, root)
        for example in args.examples:
            rows: dict = {}
            for fold in (False, True):
                key = "folded" if fold else "unfolded"
                for precision in args.precisions:
                    config, flags = _flags(example, precision, data, args.search_algos)
                    row = _build(dict(flags, fold=fold), config, root / example / key / precision)
                    rows.setdefault(key, {})[precision] = row
                    print(f"{example} {key} {precision}: {row['nb']}, ops {row['ops_after_fold_stage']}, "
                          f"{json.dumps(row['accuracy'])} ({row['seconds']} s)", file=sys.stderr, flush=True)
                if {"fp32", "int8"} <= set(rows[key]):
                    rows[key]["int8_over_fp32"] = round(rows[key]["int8"]["nb"]["bytes"] / rows[key]["fp32"]["nb"]["bytes"], 4)
            for precision in args.precisions:
                rows.setdefault("folded_over_unfolded", {})[precision] = round(
                    rows["folded"][precision]["nb"]["bytes"] / rows["unfolded"][precision]["nb"]["bytes"], 4)
            report["examples"][example] = rows
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
