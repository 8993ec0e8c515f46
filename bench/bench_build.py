"""Per-stage times and sizes of the bundled example, as JSON.

    ./run python bench/bench_build.py [--repeat 3]

Builds the digits example for arm64 in fp32 and int8 into a temporary folder
(`--repeat` times each; times are the median) and prints stage durations, `.nb`
sizes split into graph and weights, the int8/fp32 size ratios, and top-1
accuracies. Figures only: nothing is asserted here.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.INFO)

    from edgekit.build.config import resolve
    from edgekit.build.pipeline import build

    results = {}
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-") as out:
        for precision in ("fp32", "int8"):
            cfg = resolve(None, {"target": "arm64", "precision": precision, "out_dir": Path(out)})
            runs = [build(cfg) for _ in range(args.repeat)]
            stages = {name: round(statistics.median(r.timings[name] for r in runs), 3) for name in runs[0].timings}
            m = runs[-1].bundle.manifest.to_json()
            results[precision] = {
                "stages_seconds_median": stages,
                "total_seconds_median": round(statistics.median(sum(r.timings.values()) for r in runs), 3),
                "nb_bytes": m["model"]["bytes"],
                "nb_graph_bytes": m["model"]["program_bytes"],
                "nb_weight_bytes": m["model"]["params_bytes"],
                "x86_twin_bytes": m["host_twin"]["bytes"],
                "top1": m["parity"]["accuracy"],
                "tier_a_max_abs": max(s["max_abs"] for s in m["parity"]["outputs"]["A"]),
            }
    fp32, int8 = results["fp32"], results["int8"]
    report = {
        "model": "digits (bundled example)", "target": "arm64", "repeat": args.repeat, "python": sys.version.split()[0],
        "builds": results,
        "ratios": {
            "int8_over_fp32_nb_bytes": round(int8["nb_bytes"] / fp32["nb_bytes"], 4),
            "int8_over_fp32_weight_bytes": round(int8["nb_weight_bytes"] / fp32["nb_weight_bytes"], 4),
            "int8_over_fp32_build_seconds": round(int8["total_seconds_median"] / fp32["total_seconds_median"], 4),
        },
    }
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
