"""One build's tier C (the ARM model.nb under qemu, in shards) on each executor: serial vs pool vs Ray local (JSON).

    EDGEKIT_LITE_ARM=/path/to/lite-arm ./run python bench/bench_tier_c_executors.py \
        [--example digits|det|rec|cls] [--precision fp32|int8] [--executors serial pool ray] [--samples N] [--data DIR]

Builds the example for arm64 once per executor (EDGEKIT_EXECUTOR=serial, pool, ray: the
build's executor, which runs the INT8 search's candidates and tier C's shards). The first
build fills a cache; every later build gets a copy of it without the tier-C entry, so it
calibrates nothing and counts no instructions again, and its tier C runs afresh. Reported:
the tier-C seconds of each build (the shards, the pool's worker start included; Ray is
started before the build, which uses it, and its startup is reported apart), the tier-C
stage seconds, the ratio to serial, how many shards ran where, and
whether the tier-C outputs (the cached arrays) and the manifest's tier-C figures equal the
first build's. On 2 cores the executors share the same two CPUs: the ratios say what the
scheduling costs here, not what a cluster gains. Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import example_flags, ocr_data  # noqa: E402


def _build(flags: dict, config: Path | None, out: Path, cache: Path) -> tuple[dict, float]:
    from edgekit.build.config import resolve
    from edgekit.build.pipeline import build

    cfg = resolve(config, {"target": "arm64", "out_dir": out, "cache_dir": str(cache), **flags})
    start = time.monotonic()
    result = build(cfg)
    return result.bundle.manifest.to_json(), time.monotonic() - start


def _tier_c_entries(cache: Path) -> list[Path]:
    """The tier-C result files of a cache (KEY.npz and KEY.json; instruction counts are KEY.counts.json)."""
    folder = cache / "emulation"
    stems = {p.stem for p in folder.glob("*.npz")}
    return sorted(p for p in folder.iterdir() if p.name.split(".")[0] in stems and p.suffix in (".npz", ".json")
                  and not p.name.endswith(".counts.json"))


def _outputs(cache: Path) -> list[np.ndarray]:
    (npz,) = [p for p in _tier_c_entries(cache) if p.suffix == ".npz"]
    with np.load(npz) as stored:
        return [stored[f"output_{i}"] for i in range(len(stored.files))]


def _figures(manifest: dict) -> dict:
    """The manifest's tier-C figures that must not depend on the executor (timings and placement apart)."""
    parity = manifest["parity"]
    return {"outputs": parity["outputs"].get("C"), "accuracy": {k: v for k, v in parity["accuracy"].items()
                                                                if "emulated" in k},
            "checks": [c for c in parity["checks"] if c["tier"] == "C"],
            "agreement_with_b": manifest["emulation"].get("agreement_with_b"), "nb": manifest["model"]["sha256"]
            if "sha256" in manifest["model"] else manifest["files"]["model.nb"]["sha256"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", default="digits", choices=["digits", "det", "rec", "cls"])
    parser.add_argument("--precision", default="fp32", choices=["fp32", "int8"])
    parser.add_argument("--executors", nargs="+", default=["serial", "pool", "ray"])
    parser.add_argument("--samples", type=int, help="[emulation] max_samples (default: the config's)")
    parser.add_argument("--data", type=Path, help="PP-OCR data from make_data (default: rendered here)")
    args = parser.parse_args()
    if not os.environ.get("EDGEKIT_LITE_ARM"):
        print("error: EDGEKIT_LITE_ARM is not set\n  fix: point it to the folder holding inference_lite_lib.armlinux.armv8",
              file=sys.stderr)
        return 2

    from edgekit.core.executors import make, usable_cores

    report: dict = {"bench": "tier-c-executors", "example": args.example, "precision": args.precision,
                    "cores": usable_cores(), "runs": {}}
    previous = os.environ.get("EDGEKIT_EXECUTOR")
    with tempfile.TemporaryDirectory(prefix="bench-tier-c-") as tmp:
        root = Path(tmp)
        data = ocr_data(args.data, [args.example], root)
        config, flags = example_flags(args.example, args.precision, data)
        if args.samples is not None:
            flags["emulation_max_samples"] = args.samples
        first = None
        try:
            for kind in args.executors:
                cache = root / f"cache-{kind}"
                if first is not None:            # everything but the tier-C result: only tier C runs again
                    shutil.copytree(first["cache"], cache)
                    for entry in _tier_c_entries(cache):
                        entry.unlink()
                os.environ["EDGEKIT_EXECUTOR"] = kind
                started, ray = None, None
                if kind == "ray":       # started here and reused by the build (Ray's startup reported apart)
                    start = time.monotonic()
                    ray = make("ray")
                    started = round(time.monotonic() - start, 2)
                try:
                    manifest, seconds = _build(flags, config, root / f"out-{kind}", cache)
                finally:
                    if ray is not None:
                        ray.close()
                emulation = manifest["emulation"]
                run = {"build_seconds": round(seconds, 2), "tier_c_seconds": emulation["seconds"],
                       "tier_c_stage_seconds": manifest["stages_seconds"].get("tier-c"),
                       "samples": emulation["samples"], "cached": emulation["cached"],
                       "processes": emulation["processes"], "shards": emulation.get("shards"),
                       "memory_probe": emulation.get("memory_probe"),
                       "ms_per_sample_median": emulation["ms_per_sample_median"]}
                if started is not None:
                    run["ray_startup_seconds"] = started
                if first is None:
                    first = {"cache": cache, "outputs": _outputs(cache), "figures": _figures(manifest), "run": run}
                else:
                    outputs = _outputs(cache)
                    run["same_outputs_as_first"] = len(outputs) == len(first["outputs"]) and all(
                        a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
                        for a, b in zip(outputs, first["outputs"]))
                    run["same_tier_c_figures_as_first"] = _figures(manifest) == first["figures"]
                    run["tier_c_ratio_vs_first"] = round(first["run"]["tier_c_seconds"] / emulation["seconds"], 2)
                report["runs"][kind] = run
        finally:
            if previous is None:
                os.environ.pop("EDGEKIT_EXECUTOR", None)
            else:
                os.environ["EDGEKIT_EXECUTOR"] = previous
    report["first"] = args.executors[0]
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
