"""What tier C (the ARM model.nb under qemu) adds to a build, and what it finds, as JSON.

    EDGEKIT_LITE_ARM=/path/to/lite-arm ./run python bench/bench_emulation.py \
        [--examples digits det rec cls] [--precisions int8 fp32] [--data DIR] [--cpu default] [--emulation-samples N]

For each example and precision, builds for arm64 twice in one run, each time with an
empty cache (so both calibrate and neither reuses a tier-C result): once with
`--no-emulation`, once with tier C; then reports the build seconds of each, the
emulation stage's seconds, the ratio, the emulated milliseconds per sample, and the
task metric of every tier (A: x86 twin, B: host simulation, C: the ARM .nb) with the
agreement between B and C (output cosine, max abs, the share of samples that read
the same). PP-OCR data come from `python -m edgekit.examples.ppocr.make_data DIR`
(rendered into a temporary folder when --data is not given). Figures only: nothing is
asserted. Emulated time is qemu's, not a device's.
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


def _build(flags: dict, config: Path | None, root: Path) -> tuple[dict, float]:
    from edgekit.build.config import resolve
    from edgekit.build.pipeline import build

    cfg = resolve(config, {"target": "arm64", "out_dir": root, "cache_dir": str(root / "cache"), **flags})
    start = time.monotonic()
    result = build(cfg)
    return result.bundle.manifest.to_json(), time.monotonic() - start


def _case(example: str, precision: str, data: Path | None, root: Path, cpu: str, samples: int | None) -> dict:
    config, flags = example_flags(example, precision, data)
    flags["emulation_cpu"] = cpu
    if samples is not None:
        flags["emulation_max_samples"] = samples
    without, seconds_without = _build(dict(flags, emulation_enabled=False), config, root / "without")
    with_c, seconds_with = _build(flags, config, root / "with")
    emulation = with_c["emulation"]
    stage = with_c["stages_seconds"].get("tier-c", 0.0)
    return {
        "metric": (with_c.get("task") or {}).get("primary"),
        "accuracy": with_c["parity"]["accuracy"],
        "tier_c_checks": [c for c in with_c["parity"]["checks"] if c["tier"] == "C"],
        "agreement_b_c": emulation.get("agreement_with_b"),
        "emulation": {k: emulation.get(k) for k in ("abi", "cpu_profile", "int8_kernels", "samples", "processes",
                                                    "ms_per_sample_median", "load_ms_median", "runtime_version")},
        "seconds": {"build_without_tier_c": round(seconds_without, 2), "build_with_tier_c": round(seconds_with, 2),
                    "emulation_stage": stage,
                    # the first use of a runtime cross-compiles the runner once (cached afterwards): not per build
                    "runner_build_in_stage": emulation.get("runner_build_seconds", 0.0),
                    "emulation_stage_per_sample": round((stage - emulation.get("runner_build_seconds", 0.0))
                                                        / max(1, emulation.get("samples") or 1), 4)},
        "ratio_build_with_over_without": round(seconds_with / seconds_without, 3),
        "nb_bytes": with_c["model"]["bytes"],
        "without_tier_c_accuracy": without["parity"]["accuracy"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", nargs="+", default=["digits", "det", "rec", "cls"],
                        choices=["digits", "det", "rec", "cls"])
    parser.add_argument("--precisions", nargs="+", default=["int8", "fp32"], choices=["int8", "fp32"])
    parser.add_argument("--data", type=Path, help="PP-OCR data from make_data (default: rendered into a temp folder)")
    parser.add_argument("--cpu", default="default", help="CPU profile (default, a53, a55)")
    parser.add_argument("--emulation-samples", type=int, help="samples tier C runs (0 = all; default: the example's "
                        "[emulation] max_samples: 512, rec 64)")
    args = parser.parse_args()
    if not os.environ.get("EDGEKIT_LITE_ARM"):
        print("set EDGEKIT_LITE_ARM to the folder holding inference_lite_lib.armlinux.armv8", file=sys.stderr)
        return 2
    logging.disable(logging.INFO)
    os.environ.setdefault("GLOG_minloglevel", "2")
    os.environ["EDGEKIT_REQUIRE_EMULATION"] = "1"      # a bench of tier C that silently skipped it would be wrong
    report: dict = {"target": "arm64", "python": sys.version.split()[0], "cpu_profile": args.cpu,
                    "cores": os.cpu_count(), "examples": {}}
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-emulation-") as scratch:
        root = Path(scratch)
        data = ocr_data(args.data, args.examples, root)
        for example in args.examples:
            for precision in args.precisions:
                start = time.monotonic()
                row = _case(example, precision, data, root / example / precision, args.cpu, args.emulation_samples)
                report["examples"].setdefault(example, {})[precision] = row
                print(f"{example} {precision}: {json.dumps(row['accuracy'])}, tier C +{row['seconds']['emulation_stage']} s "
                      f"({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
