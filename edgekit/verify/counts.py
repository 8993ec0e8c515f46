"""Instruction counts as a cost figure: measured under emulation, recorded in the manifest, compared across bundles.

Emulated wall time says nothing about a Cortex-A core and moves with the host's load;
the number of guest instructions an inference executes on Lite's real ARM kernels does
not move at all (lite/icount.py). `measure` counts one sample of a model.nb on the given
kernel paths (CPU profiles; `kernel_paths` picks tier C's) and returns the manifest's
`emulation.instruction_counts` (edgekit/verify/latency.py turns them into a labelled latency estimate);
`compare` and `table` put bundles side by side for `edgekit bench`; `regressions` is the
count gate the device suite applies on qemu devices (`measure_on_device`, edgekit/device/baseline.py).

The figure per kernel path is the first timed run after one warm-up: within one runner
process FP32 kernels vary by up to 0.3 % from run to run (scalar code only; the SIMD count is
constant), but the sequence is the same in every process, so a fixed run index gives the
same number on every host. The spread of the timed runs is recorded beside it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from edgekit.core import executors
from edgekit.core.tables import CPU_PROFILES

if TYPE_CHECKING:
    from edgekit.verify.emulator import Emulator

log = logging.getLogger(__name__)

SCHEMA = "edgekit.instruction-counts/1"
WARMUP, REPEAT = 1, 1          # the figure is timed run 0 after one warm-up; more timed runs measure the spread
CLASSES = ("simd_fp", "load_store", "branch", "other", "dot_product")


def profiles_for(abi: str) -> list[str]:
    """Every CPU profile (kernel path) that exists for an emulation ABI, in table order."""
    return [name for name, profile in CPU_PROFILES.items() if abi in profile.abis]


def kernel_paths(abi: str, configured: str = "default") -> list[str]:
    """The profiles tier C counts: one per distinct INT8 kernel family of the ABI (the first profile in table order:
    `default` for plain NEON, `a55` for dot product), plus the build's own --cpu profile. `a53` runs the default
    path's kernels on qemu's Cortex-A53 model (measured within 0.2 % of `default`); it is counted when asked for."""
    chosen, families = [], set()
    for name in profiles_for(abi):
        family = CPU_PROFILES[name].int8_kernels
        if family not in families or name == configured:
            chosen.append(name)
            families.add(family)
    return chosen


@dataclass(frozen=True)
class PathCount:
    """One kernel path's count: an executor task (one qemu process with the counting plugin)."""

    emulator: Emulator
    nb_file: Path
    sample: Mapping[str, np.ndarray]
    profile: str
    plugin: Path
    repeat: int
    rows: bool


def count_path(job: PathCount) -> tuple[str, dict]:
    from edgekit.lite import icount, native

    emulator = job.emulator
    with icount.canonical_paths(emulator.build, emulator.runtime, job.nb_file) as (build, runtime, nb, work):
        result = native.run_runner(build, runtime, nb, job.sample, threads=1, warmup=WARMUP,
                                   repeat=job.repeat, cpu_profile=job.profile, timeout=emulator.timeout, workdir=work,
                                   icount_plugin=job.plugin, rows=job.rows)
    counts = result.counts
    totals = [r["total"] for r in counts.timed]
    return job.profile, {"kernel_path": (result.record.get("cpu") or {}).get("int8_kernel_path"),
                         "per_inference": counts.timed[0], "first_inference": counts.passes[0]["total"],
                         "timed_totals": totals, "spread": (max(totals) - min(totals)) / max(1, min(totals)),
                         "classifier": counts.classifier}


def measure(emulator: Emulator, nb_file: Path, sample: Mapping[str, np.ndarray], *,
            cache_folder: Path | None = None, profiles: Sequence[str] | None = None, repeat: int = REPEAT,
            rows: bool = False) -> dict:
    """Count one sample's inference of `nb_file` on each kernel path; one qemu process per path, in parallel.

    Each path is an executor task on threads of this process (each waits on its qemu; the runner's files are
    read here).
    `sample` holds one sample per input (shapes already checked:
    no --expect, so the runner's invocation depends on nothing but the model and the sample).
    Cached by the .nb, the sample, the runtime, the runner and plugin builds. `repeat` timed runs follow the
    warm-up (the figure is the first; more only measure the in-process spread).
    """
    from edgekit.core import atomic
    from edgekit.model.artifacts import sha256_file
    from edgekit.verify.emulator import native_cache
    from edgekit.lite import icount

    plugin = icount.build_plugin(native_cache())
    names = list(profiles or profiles_for(emulator.abi))
    key = hashlib.sha256(json.dumps({
        "schema": SCHEMA, "nb": sha256_file(nb_file), "sample": sample_digest(sample), "runtime": emulator.runtime.sha256,
        "runner": emulator.build.key, "plugin": icount.plugin_key()[0], "profiles": names,
        "runs": [WARMUP, repeat], "rows": rows}, sort_keys=True).encode()).hexdigest()
    cached = cache_folder / f"{key}.counts.json" if cache_folder is not None else None
    if cached is not None and cached.is_file():
        try:
            return dict(json.loads(cached.read_text(encoding="utf-8")), cached=True)
        except (OSError, ValueError):
            log.warning("ignoring an unreadable instruction-count cache entry %s", cached.name)
    start = time.monotonic()
    with executors.ThreadExecutor(len(names)) as runner:
        outcomes = runner.run([executors.Task(count_path, (PathCount(emulator, nb_file, sample, name, plugin, repeat,
                                                                      rows),), retries=0) for name in names])
    for outcome in outcomes:
        if not outcome.ok:
            raise outcome.error          # as the count would have failed in this process
    paths = dict(o.value for o in outcomes)
    found = {"ran": True, "schema": SCHEMA, "unit": "guest instructions per inference (qemu TCG plugin, one thread)",
             "input": "evaluation sample 0", "warmup": WARMUP, "repeat": repeat,
             "figure": "timed run 0 after the warm-up; first_inference = the first run (Lite's one-time work)",
             "plugin": icount.plugin_key()[0][:16], "paths": paths, "seconds": round(time.monotonic() - start, 2)}
    if cached is not None:
        atomic.write_json(cached, found)
    return dict(found, cached=False)


def _counts(value) -> dict:
    """A path's counts as {"total", classes...}; a bare int is a total alone."""
    return dict(value) if isinstance(value, Mapping) else {"total": int(value)}


def regressions(baseline: Mapping[str, Mapping | int], current: Mapping[str, Mapping | int], *,
                tolerance: float = 0.0) -> list[str]:
    """Kernel paths whose total count grew beyond `tolerance` (a fraction; 0 = any growth), one line each, with the
    change of every class that moved (values: per_inference counts, or bare totals)."""
    found = []
    for path, value in baseline.items():
        if current.get(path) is None:
            continue
        before, now = _counts(value), _counts(current[path])
        if before["total"] and now["total"] > before["total"] * (1 + tolerance):
            moved = [f"{k} {now[k] - before[k]:+,}" for k in CLASSES if k in before and k in now and now[k] != before[k]]
            found.append(f"{path}: {now['total']:,} instructions per inference, baseline {before['total']:,} "
                         f"(+{(now['total'] - before['total']) / before['total']:.2%}"
                         + (f"; {', '.join(moved)}" if moved else "") + ")")
    return found


def measure_on_device(runtime, cpu: str, nb_file: Path, feeds: Mapping[str, Path], *, timeout: float,
                      rows: bool = False) -> dict:
    """The device suite's counts on a qemu device: `measure` of golden input 0 on the device's CPU profile only,
    with the runner and runtime the suite pushes (`runtime`: edgekit.device.preflight.Runtime). Not cached: the
    suite recomputes every figure it reports."""
    from edgekit.verify.emulator import Emulator

    from edgekit.core.errors import BundleError
    from edgekit.model.data import read_npy

    sample = {name: read_npy(file, BundleError)[:1] for name, file in feeds.items()}     # a bundle's golden input
    emulator = Emulator(runtime.abi, runtime.lite, runtime.build, cpu, 1, timeout)
    found = measure(emulator, nb_file, sample, profiles=[cpu], rows=rows)
    found["input"] = "golden input 0"
    found["input_shapes"] = {name: list(array.shape) for name, array in sample.items()}
    return found


def sample_digest(sample: Mapping[str, np.ndarray]) -> str:
    """The sha256 of the arrays counted (names, dtypes, shapes, bytes): part of every count and profile cache key."""
    digest = hashlib.sha256()
    for name in sorted(sample):
        array = np.ascontiguousarray(sample[name])
        digest.update(name.encode() + str(array.dtype).encode() + str(array.shape).encode() + array.tobytes())
    return digest.hexdigest()
