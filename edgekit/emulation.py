"""Tier C: the ARM model.nb itself, on Paddle-Lite's ARM kernels under qemu-user, on the host.

Tiers A and B check the FP32 graph on x86 kernels and a simulation of the reduced
precision; neither is the file a phone loads. Here `edgekit-lite-run` (native/, cross
compiled for the target's ABI and linked against the user's Paddle-Lite ARM Linux
runtime of the opt's version) runs model.nb on the evaluation samples under qemu,
in parallel processes, with results cached by the .nb, the data, the runtime and the
CPU profile. Gates: a reduced precision within the same accuracy budget as tier B;
FP32 within tier A's tolerances. The agreement between B and C says how far the
simulation can be trusted. Without a runtime, emulator or cross compiler the report
says tier C did not run and why; with `required` (CI) that is an error. Tier C also
counts the instructions one inference executes on every kernel path of the ABI
(edgekit/costs.py): a deterministic cost figure for the manifest.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from . import parity, tiers
from .artifacts import sha256_file
from .config import BuildConfig, EmulationConfig, InputSpec
from .data import spread_indices
from .errors import ConfigError, EmulationUnavailable
from .tables import CPU_PROFILES, TARGETS, Precision

log = logging.getLogger(__name__)

CACHE_FORMAT = "edgekit-emulation/1"
SECONDS_PER_SAMPLE = 30.0      # PP-OCRv4 rec FP32 measured ~12 s a line under qemu on a loaded 2-core host


@dataclass(frozen=True)
class Emulator:
    """A runner built for one ABI, with its runtime and CPU profile: everything `run` needs."""

    abi: str
    runtime: object          # edgekit.lite.native.LiteRuntime
    build: object            # edgekit.lite.native.NativeBuild
    cpu: str
    threads: int
    timeout: float

    @classmethod
    def prepare(cls, abi: str, settings: EmulationConfig, timeout: float) -> "Emulator":
        """Find the runtime, check the tools and build the runner (cached); EmulationUnavailable if they are not here."""
        from .lite import native

        if settings.runtime is None:
            raise EmulationUnavailable(
                "no Paddle-Lite ARM Linux runtime is configured",
                "set EDGEKIT_LITE_ARM (or --lite-arm, [emulation] runtime) to the folder holding "
                "inference_lite_lib.armlinux.armv8 (and .armv7hf) of the opt's version")
        profile = CPU_PROFILES[settings.cpu]
        if abi not in profile.abis:
            raise ConfigError(f"CPU profile {settings.cpu!r} exists for {', '.join(profile.abis)}, not {abi}",
                              "use --cpu default for armv7 (the armhf runtime has no dot-product kernels)")
        native.check_tools(abi)
        runtime = native.find_runtime(settings.runtime, abi)
        return cls(abi, runtime, native.build(abi, runtime, native_cache()), settings.cpu, settings.threads, timeout)

    def describe(self) -> dict:
        from .lite import native

        return {"abi": self.abi, "runtime": str(self.runtime.cxx_dir), "runtime_sha256": self.runtime.sha256,
                "runtime_version": native.runtime_version(self.build, self.runtime),
                "qemu": _qemu_version(self.build, self.runtime), "cpu_profile": self.cpu, "threads": self.threads,
                "runner_build": self.build.key[:16], "runner_build_seconds": round(self.build.seconds, 2)}

    def run(self, nb_file: Path, inputs: Mapping[str, np.ndarray], expect: Sequence[InputSpec],
            jobs: int, *, memory_aware: bool = False, executor=None,
            rows: bool = False) -> tuple[list[np.ndarray], list[dict]]:
        """`nb_file` on every sample, split over `jobs` emulator processes (each loads the model once).

        A process may take the tool timeout plus SECONDS_PER_SAMPLE for each of its samples:
        the timeout catches hangs, and a slow model's share must not look like one.
        `memory_aware`: `jobs` is the most, not the number; one process first runs one sample
        alone, and its peak RSS says how many of the rest fit in the available memory
        (`parallel_processes`): a 640x640 detector's emulator takes GBs, a classifier's tens of MB.
        Each process is an executor task (edgekit/shards.py): on `executor` (a pool, Ray) when given,
        else in threads of this process.
        """
        from . import executors, shards

        own = executor is None or isinstance(executor, executors.SerialExecutor)
        runner = executors.ThreadExecutor(max(1, jobs)) if own else executor
        try:
            return shards.run_shards(self, nb_file, inputs, expect, jobs, runner, memory_aware=memory_aware, rows=rows)
        finally:
            if own:
                runner.close()


MEMORY_HEADROOM = 1.25         # a process's measured peak RSS times this, plus MEMORY_SLACK_MB, is its share
MEMORY_SLACK_MB = 64
MEMORY_KEEP_FREE_MB = 512      # never plan the last of the available memory


def parallel_processes(most: int, samples: int, peak_rss_kb: int | float | None,
                       available_mb: int | None) -> tuple[int, str]:
    """How many emulator processes share `samples`: at most `most` (the cores) and the samples, and no more
    than the available memory holds at one process's measured peak RSS (with headroom). Returns the count
    and what limited it: "cores", "samples", "memory", or "cores (memory unknown)"."""
    count, limit = max(1, most), "cores"
    if samples < count:
        count, limit = max(1, samples), "samples"
    if not peak_rss_kb or available_mb is None:
        return count, limit if peak_rss_kb and available_mb is not None else f"{limit} (memory unknown)"
    share_mb = peak_rss_kb / 1024 * MEMORY_HEADROOM + MEMORY_SLACK_MB
    fit = int(max(0, available_mb - MEMORY_KEEP_FREE_MB) // share_mb)
    if fit < count:
        return max(1, fit), "memory"
    return count, limit


def native_cache() -> Path:
    """Where cross-compiled runners are kept (they outlive any one build's calibration cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().absolute() / "edgekit"


def _qemu_version(build, runtime) -> str:
    from . import proc
    from .lite import native

    argv = native.emulator_argv(build.abi, runtime)[:1] + ["--version"]
    done = proc.run(argv, timeout=60, what=argv[0])
    return done.stdout.splitlines()[0].strip() if done.returncode == 0 and done.stdout else "unknown"


def emulate(rec) -> tuple[parity.ParityReport, dict]:
    """The emulation stage: tier C checks in the report, and what ran (or why not) for the manifest."""
    cfg, settings = rec.cfg, rec.cfg.emulation
    if not settings.enabled:
        return rec.report, {"ran": False, "reason": "skipped on request (--no-emulation / [emulation] enabled = false)"}
    abi = TARGETS[cfg.target].emulation
    try:
        emulator = Emulator.prepare(abi, settings, cfg.tool_timeout)
    except EmulationUnavailable as exc:
        if settings.required:
            raise
        return rec.report, {"ran": False, "reason": f"{exc.message} ({exc.hint})"}
    return tier_c(rec, emulator)


def tier_c(rec, emulator: Emulator) -> tuple[parity.ParityReport, dict]:
    cfg, evaluation = rec.cfg, rec.evaluation
    count = len(evaluation) if not cfg.emulation.max_samples else min(cfg.emulation.max_samples, len(evaluation))
    picks = spread_indices(len(evaluation), count)
    subset = evaluation.spread(count)
    reference = tiers.pick(rec.static, rec.reference, picks)
    start = time.monotonic()
    run = _cached_run if not tiers.holds_nms(rec.static) else _nms_rows_run   # a kept NMS op: rows + counts
    outputs, records, cached = run(cfg, emulator, rec.device.nb_file, subset, rec.static.feeds)
    seconds = time.monotonic() - start
    engine = f"{cfg.target.value} .nb (emulated ARM)"
    subject = f"{engine} vs " + ("reference" if cfg.precision is Precision.fp32 or not subset.has_truth else "fp32")
    stats = parity.compare(*tiers.comparable(rec.static, reference, outputs), rec.static.fetches)
    metrics = {engine: subset.evaluate(outputs)} if subset.has_truth else None
    if cfg.precision is Precision.fp32:
        checks = tiers.twin_tolerance(cfg.gates).checks("C", subject, stats)
    else:
        primary = subset.primary
        checks = tiers.precision_budget(cfg, evaluation).checks(
            "C", subject, stats, subset.evaluate(reference)[primary] if primary else None,
            metrics[engine][primary] if primary else None)
    summary = dict(emulator.describe(), ran=True, samples=count, of=len(evaluation), seconds=round(seconds, 3),
                   cached=cached, int8_kernels=_kernel_path(records), **_timing(records),
                   agreement_with_b=_agreement(rec, subset, picks, outputs),
                   instruction_counts=_instruction_counts(cfg, emulator, rec.device.nb_file, subset,
                                                          tiers.holds_nms(rec.static)))
    key = getattr(subset.task, "golden_key", None)     # detections matched / class maps compared per image
    if cfg.precision is not Precision.fp32 and key:
        summary[key] = subset.task.match_outputs(reference, outputs)   # sets the golden floors (stages._golden_floors)
    notes = [] if count == len(evaluation) else [f"tier C ran {count} of {len(evaluation)} evaluation samples "
                                                 "([emulation] max_samples); its FP32 figure is on the same subset"]
    if metrics is not None and count != len(evaluation):
        metrics[f"fp32 reference ({count} samples)"] = subset.evaluate(reference)
    report = rec.report.extended(checks=checks, tier="C", stats=stats, metrics=metrics, notes=notes,
                                 extra={"C": {k: summary[k] for k in ("abi", "cpu_profile", "int8_kernels",
                                                                      "agreement_with_b", "samples")}})
    return report, summary


def _instruction_counts(cfg: BuildConfig, emulator: Emulator, nb_file: Path, subset, rows: bool = False) -> dict:
    """Guest instructions of one inference per kernel path (edgekit/costs.py); why not, when they cannot be counted."""
    from . import costs
    from .errors import EdgekitError

    sample = {name: values[:1] for name, values in subset.inputs.items()}
    folder = cfg.quant.cache_dir / "emulation" if cfg.quant.cache_dir is not None else None
    try:
        found = costs.measure(emulator, nb_file, sample, cache_folder=folder,
                              profiles=costs.kernel_paths(emulator.abi, emulator.cpu), rows=rows)
        if emulator.abi == "aarch64":   # the published table the estimate is fitted to is arm64
            found["latency_estimate"] = costs.estimate(found["paths"], cfg.precision.value)
        return found
    except EdgekitError as exc:
        if cfg.emulation.required:
            raise
        log.warning("instruction counts not recorded: %s", exc.message)
        return {"ran": False, "reason": f"{exc.message} ({exc.hint})"}


def _agreement(rec, subset, picks, outputs) -> dict | None:
    """How closely the ARM kernels follow tier B's simulation: the measure of how far B can be trusted."""
    if rec.simulated is None:
        return None
    simulated = tiers.pick(rec.static, rec.simulated, picks)
    stats = parity.differences(*tiers.comparable(rec.static, simulated, outputs), rec.static.fetches)
    found = {"cosine": min(s.cosine for s in stats), "max_abs": parity.worst_max_abs(stats)}
    if subset.task is not None:
        found[f"{subset.primary}_agreement"] = subset.task.agreement(outputs, simulated)
    return found


def _kernel_path(records: Sequence[dict]) -> str:
    paths = sorted({str(r.get("cpu", {}).get("int8_kernel_path", "unknown")) for r in records})
    return "/".join(paths)


def _timing(records: Sequence[dict]) -> dict:
    runs = [ms for r in records for ms in r.get("pass_ms", [])]
    loads = [r.get("load_ms") for r in records if r.get("load_ms") is not None]
    return {"ms_per_sample_median": round(float(np.median(runs)), 3) if runs else None,
            "load_ms_median": round(float(np.median(loads)), 3) if loads else None,
            "processes": len(records), "peak_rss_kb": max((r.get("peak_rss_kb") or 0) for r in records),
            "memory_probe": next((r["memory_probe"] for r in records if "memory_probe" in r), None),
            "shards": _shards(records)}


def _shards(records: Sequence[dict]) -> dict | None:
    """Where tier C's shards ran (edgekit/shards.py): the executor and how many nodes (hosts) ran them."""
    placed = [r["shard"] for r in records if "shard" in r]
    if not placed:
        return None              # a cache entry made before shards said where they ran
    nodes = {json.dumps(p.get("node"), sort_keys=True) for p in placed}
    return {"executor": placed[0].get("executor"), "nodes": len(nodes), "count": len(placed)}


def _nms_rows_run(cfg: BuildConfig, emulator: Emulator, nb_file: Path, subset, feeds) -> tuple[list, list, bool]:
    """A graph that kept its NMS op: the runner's --rows mode (lite/nms.py), uncached."""
    from .lite import nms

    outputs, records = nms.emulate(emulator, nb_file, subset.inputs, feeds, cfg.emulation.jobs or 2)
    return outputs, records, False


def _cached_run(cfg: BuildConfig, emulator: Emulator, nb_file: Path, subset, feeds) -> tuple[list, list, bool]:
    """Results are keyed by the .nb, the exact inputs, the runtime, the runner build, the CPU profile and threads."""
    from . import atomic

    key = hashlib.sha256(json.dumps({
        "format": CACHE_FORMAT, "nb": sha256_file(nb_file), "inputs": subset.samples.digest(),
        "runtime": emulator.runtime.sha256, "runner": emulator.build.key, "cpu": emulator.cpu,
        "threads": emulator.threads}, sort_keys=True).encode()).hexdigest()
    folder = cfg.quant.cache_dir / "emulation" if cfg.quant.cache_dir is not None else None
    if folder is not None and (folder / f"{key}.npz").is_file() and (folder / f"{key}.json").is_file():
        try:
            with np.load(folder / f"{key}.npz") as stored:
                outputs = [stored[f"output_{i}"] for i in range(len(stored.files))]
            return outputs, json.loads((folder / f"{key}.json").read_text(encoding="utf-8")), True
        except (OSError, ValueError, KeyError):
            log.warning("ignoring an unreadable tier-C cache entry %s", key)
    from .executors import from_environment, usable_cores

    with from_environment() as executor:        # the build's executor (EDGEKIT_EXECUTOR), as the INT8 search's
        if cfg.emulation.jobs:
            outputs, records = emulator.run(nb_file, subset.inputs, feeds, cfg.emulation.jobs, executor=executor)
        else:
            outputs, records = emulator.run(nb_file, subset.inputs, feeds, usable_cores(), memory_aware=True,
                                            executor=executor)
    if folder is not None:
        with atomic.replacing(folder / f"{key}.npz") as tmp:
            with tmp.open("wb") as handle:
                np.savez(handle, **{f"output_{i}": o for i, o in enumerate(outputs)})
        atomic.write_json(folder / f"{key}.json", records)
    return outputs, records, False
