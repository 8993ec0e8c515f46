"""What running the build's x86 twin in a child process costs (tier A), as JSON.

    ./run python bench/bench_twin_process.py [--repeat 5] [--samples 360]

Builds the digits example for arm64 FP32 (no emulation) into a temporary folder, then runs its x86 twin on
`--samples` inputs `--repeat` times each way, interleaved so both see the same machine load: in the build's
process (`LiteRunner`, what tier A did before) and in a child (`verify.tiers.twin_process`, what it does now:
process start, predictor, samples over the pipe 16 at a time, exit). Prints medians and the load average; the
outputs of both must be identical. Figures only: nothing is asserted beyond that.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--samples", type=int, default=360)     # the digits example's evaluation set
    args = parser.parse_args()
    logging.disable(logging.INFO)

    import numpy as np

    from edgekit.build.config import resolve
    from edgekit.build.pipeline import build
    from edgekit.lite.runtime import LiteRunner
    from edgekit.verify.tiers import twin_process

    with tempfile.TemporaryDirectory(prefix="edgekit-bench-") as out:
        cfg = resolve(None, {"target": "arm64", "precision": "fp32", "out_dir": Path(out),
                              "emulation_enabled": False})
        result = build(cfg)
        m = result.bundle.manifest.to_json()
        nb = result.bundle.path / m["host_twin"]["file"]
        feed = m["model"]["inputs"][0]
        x = np.random.default_rng(0).random((args.samples, *feed["shape"][1:]), dtype=np.float32)
        inputs = {feed["name"]: x}
        child, in_process = [], []
        for _ in range(args.repeat):
            start = time.monotonic()
            with twin_process(nb, [feed["name"]], "tier-a") as runner:
                a = runner.run(inputs)
            child.append(time.monotonic() - start)
            start = time.monotonic()
            b = LiteRunner(nb, [feed["name"]]).run(inputs)
            in_process.append(time.monotonic() - start)
            if not all(np.array_equal(p, q) for p, q in zip(a, b)):
                raise SystemExit("the child's outputs differ from the in-process twin's")
        report = {
            "model": "digits (bundled example), arm64 fp32 x86 twin", "samples": args.samples, "repeat": args.repeat,
            "in_process_seconds_median": round(statistics.median(in_process), 3),
            "child_seconds_median": round(statistics.median(child), 3),
            "child_extra_seconds_median": round(statistics.median(c - i for c, i in zip(child, in_process)), 3),
            "tier_a_stage_seconds_in_the_build": round(result.timings["tier-a"], 3),
            "build_seconds": round(sum(result.timings.values()), 3),
            "load_average_1min": os.getloadavg()[0], "cpus": os.cpu_count(), "python": sys.version.split()[0],
        }
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
