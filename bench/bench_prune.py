"""Pruned vs unpruned INT8 builds of the bundled example, as JSON.

    ./run python bench/bench_prune.py [--epochs 6]

Builds the digits example for arm64 int8 twice into a temporary folder: as is, and
pruned to 50 % of its FLOPs (L1 criterion) with the example's fine-tune hook. Prints
parameters, FLOPs, `.nb` bytes split into graph and weights, top-1 at every stage,
and seconds. Figures only.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path


def _nb(bundle) -> dict:
    m = bundle.manifest.model
    return {"bytes": m.bytes, "graph_bytes": m.program_bytes, "weight_bytes": m.params_bytes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=6)
    args = parser.parse_args()
    logging.disable(logging.INFO)
    from edgekit.build.config import resolve
    from edgekit.build.pipeline import build

    with tempfile.TemporaryDirectory(prefix="edgekit-bench-") as root:
        common = {"target": "arm64", "precision": "int8", "cache_dir": "off"}
        start = time.monotonic()
        plain = build(resolve(None, {**common, "out_dir": Path(root) / "plain"}))
        plain_s = time.monotonic() - start
        start = time.monotonic()
        pruned = build(resolve(None, {**common, "out_dir": Path(root) / "pruned", "prune": "flops:50%",
                                      "finetune": "edgekit.examples.digits.finetune:finetune", "epochs": args.epochs}))
        pruned_s = time.monotonic() - start
        report = pruned.bundle.manifest.to_json()["pruning"]      # the audit record: kept as written
        result = {
            "model": "digits (bundled example)", "target": "arm64 int8", "python": sys.version.split()[0],
            "unpruned_int8": {"nb": _nb(plain.bundle), "top1": dict(plain.bundle.manifest.parity.accuracy),
                              "seconds": round(plain_s, 2)},
            "pruned_int8": {"nb": _nb(pruned.bundle), "top1": dict(pruned.bundle.manifest.parity.accuracy),
                            "seconds": round(pruned_s, 2), "stage_seconds": pruned.timings},
            "pruning": {k: report.get(k) for k in ("flops", "params", "metric", "nb_bytes", "nb_parts", "layers")},
        }
        result["ratios"] = {
            "pruned_over_unpruned_int8_nb_bytes": round(result["pruned_int8"]["nb"]["bytes"] / result["unpruned_int8"]["nb"]["bytes"], 4),
            "pruned_over_unpruned_int8_weight_bytes": round(result["pruned_int8"]["nb"]["weight_bytes"]
                                                            / result["unpruned_int8"]["nb"]["weight_bytes"], 4),
        }
    print(json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
