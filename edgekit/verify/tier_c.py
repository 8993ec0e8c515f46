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
(edgekit/verify/counts.py): a deterministic cost figure for the manifest.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.model import parity
from edgekit.verify import tiers
from edgekit.model.artifacts import sha256_file
from edgekit.contracts.settings import BuildConfig
from edgekit.model.data import first_sample, run_lines, spread_indices
from edgekit.model.reports import Emulation
from edgekit.verify.emulator import Emulator
from edgekit.core.errors import EmulationUnavailable
from edgekit.core.tables import TARGETS, Precision

log = logging.getLogger(__name__)

CACHE_FORMAT = "edgekit-emulation/1"


def emulate(rec) -> tuple[parity.ParityReport, Emulation]:
    """The emulation stage: tier C checks in the report, and what ran (or why not) for the manifest."""
    cfg, settings = rec.cfg, rec.cfg.emulation
    if not settings.enabled:
        return rec.report, Emulation(ran=False,
                                     reason="skipped on request (--no-emulation / [emulation] enabled = false)")
    abi = TARGETS[cfg.target].emulation
    try:
        emulator = Emulator.prepare(abi, settings, cfg.tool_timeout)
    except EmulationUnavailable as exc:
        if settings.required:
            raise
        return rec.report, Emulation(ran=False, reason=f"{exc.message} ({exc.hint})")
    return tier_c(rec, emulator)


def emulated_subset(cfg: BuildConfig, evaluation):
    """(count, the evaluation samples tier C runs): [emulation] max_samples of them, spread over the set. Its first
    sample is the one whose instructions are counted (here and by the INT8 search's cost step)."""
    count = len(evaluation) if not cfg.emulation.max_samples else min(cfg.emulation.max_samples, len(evaluation))
    return count, evaluation.spread(count)


def count_sample(cfg: BuildConfig, evaluation) -> dict[str, np.ndarray]:
    """The one sample tier C counts instructions on (the first of `emulated_subset`)."""
    return first_sample(emulated_subset(cfg, evaluation)[1].samples)


def tier_c(rec, emulator: Emulator) -> tuple[parity.ParityReport, Emulation]:
    cfg, evaluation = rec.cfg, rec.evaluation
    count, subset = emulated_subset(cfg, evaluation)
    picks = spread_indices(len(evaluation), count)
    reference = tiers.pick(rec.static, rec.reference, picks)
    start = time.monotonic()
    run = _cached_run if not tiers.holds_nms(rec.static) else _nms_rows_run   # a kept NMS op: rows + counts
    outputs, records, cached = run(cfg, emulator, rec.device.nb_file, subset, rec.static.feeds)
    seconds = time.monotonic() - start
    engine = f"{cfg.target.value} .nb (emulated ARM)"
    subject = f"{engine} vs " + ("reference" if cfg.precision is Precision.fp32 or not subset.has_truth else "fp32")
    lines = subset.samples.lines is not None      # the reference ran on the whole set, tier C on a subset
    stats = parity.compare(*tiers.comparable(rec.static, reference, outputs, lines), rec.static.fetches)
    metrics = {engine: subset.evaluate(outputs)} if subset.has_truth else None
    if cfg.precision is Precision.fp32:
        checks = tiers.twin_tolerance(cfg.gates, evaluation.task).checks("C", subject, stats)
    else:
        primary = subset.primary
        checks = tiers.precision_budget(cfg, evaluation).checks(
            "C", subject, stats, subset.evaluate(reference)[primary] if primary else None,
            metrics[engine][primary] if primary else None)
    summary = dict(emulator.describe(), ran=True, samples=count, of=len(evaluation), seconds=round(seconds, 3),
                   cached=cached, int8_kernels=_kernel_path(records), **_timing(records),
                   agreement_with_b=_agreement(rec, subset, picks, outputs),
                   instruction_counts=_instruction_counts(cfg, emulator, rec.device.nb_file, subset,
                                                          tiers.holds_nms(rec.static), rec.work))
    key = getattr(subset.task, "golden_key", None)     # detections matched / class maps compared per image
    if cfg.precision is not Precision.fp32 and key:
        summary[key] = subset.task.match_outputs(reference, outputs)   # sets the golden floors (stages._golden_floors)
    notes = [] if count == len(evaluation) else [f"tier C ran {count} of {len(evaluation)} evaluation samples "
                                                 "([emulation] max_samples); its FP32 figure is on the same subset"]
    if metrics is not None and count != len(evaluation):
        metrics[f"fp32 reference ({count} samples)"] = subset.evaluate(reference)
    verdict = costs_verdict(rec, emulator, summary["instruction_counts"], subset)
    if verdict:
        summary["instruction_counts"]["int8_vs_fp32"] = verdict["ratios"]
        notes.append(verdict["note"])
    report = rec.report.extended(checks=checks, tier="C", stats=stats, metrics=metrics, notes=notes,
                                 extra={"C": {k: summary[k] for k in ("abi", "cpu_profile", "int8_kernels",
                                                                      "agreement_with_b", "samples")}})
    return report, Emulation.of(summary, key if cfg.precision is not Precision.fp32 else None)


def _instruction_counts(cfg: BuildConfig, emulator: Emulator, nb_file: Path, subset, rows: bool = False,
                        work: Path | None = None) -> dict:
    """Guest instructions of one inference per kernel path (edgekit/verify/counts.py); why not, when they cannot be
    counted. Cached where the INT8 search's cost step counted the same .nb (`search_cost.count_cache`)."""
    from edgekit.verify import counts, latency
    from edgekit.verify.search_cost import count_cache
    from edgekit.core.errors import EdgekitError

    sample = first_sample(subset.samples)
    folder = count_cache(cfg, work) if work is not None else None
    try:
        found = counts.measure(emulator, nb_file, sample, cache_folder=folder,
                              profiles=counts.kernel_paths(emulator.abi, emulator.cpu), rows=rows)
        if emulator.abi == "aarch64":   # the published table the estimate is fitted to is arm64
            found["latency_estimate"] = latency.estimate(found["paths"], cfg.precision.value)
        return found
    except EdgekitError as exc:
        if cfg.emulation.required:
            raise
        log.warning("instruction counts not recorded: %s", exc.message)
        return {"ran": False, "reason": f"{exc.message} ({exc.hint})"}


NOT_FASTER = 0.95      # INT8 at this share of FP32's instructions or more is "not faster" (counts, not time)


def int8_verdict(int8_paths: Mapping[str, Mapping], fp32_paths: Mapping[str, Mapping], cpu: str) -> dict | None:
    """INT8's instructions per inference over FP32's per kernel path, and a plain note on the build's own CPU profile
    (`cpu`) when INT8 executes NOT_FASTER of FP32's or more; None without both counts on that path."""
    ratios = {p: round(c["per_inference"]["total"] / fp32_paths[p]["per_inference"]["total"], 4)
              for p, c in int8_paths.items() if p in fp32_paths and fp32_paths[p]["per_inference"]["total"]}
    if cpu not in ratios:
        return None
    ratio = ratios[cpu]
    shown = ", ".join(f"{p} {r:.2f}x" for p, r in ratios.items())
    if ratio >= NOT_FASTER:
        note = (f"INT8 is not faster than FP32 on the {cpu} CPU profile: it executes {ratio:.2f}x FP32's instructions "
                f"per inference ({shown}); `edgekit inspect BUNDLE --profile --cpu {cpu}` shows where they go")
    else:
        note = f"INT8 executes {ratio:.2f}x FP32's instructions per inference on the {cpu} CPU profile ({shown})"
    return {"ratios": ratios, "note": note}


def costs_verdict(rec, emulator: Emulator, counts: Mapping, subset) -> dict | None:
    """For an INT8 build with counts: the same model converted to FP32 for the target, counted on the same kernel
    paths, and `int8_verdict`. None for other precisions or when either count is missing."""
    from edgekit import lite
    from edgekit.core.errors import EdgekitError
    from edgekit.verify import counts as costs
    from edgekit.verify.search_cost import count_cache

    if rec.cfg.precision is not Precision.int8 or not counts.get("paths"):
        return None
    counted = searched_fp32(rec.search, counts["paths"])
    if counted is not None:             # the INT8 search's cost step counted FP32 on these paths: not twice
        return int8_verdict(counts["paths"], counted, emulator.cpu)
    try:
        samples = dict(rec.evaluation.samples.head(4).inputs)
        fp32 = lite.convert_safe(rec.static, "arm", rec.work / "fp32-reference.nb", rec.work / "rewrite-fp32-reference",
                                 samples, timeout=rec.cfg.tool_timeout, target=rec.cfg.target.value, precision="fp32")
        sample = first_sample(subset.samples)
        folder = count_cache(rec.cfg, rec.work)
        reference = costs.measure(emulator, fp32.nb_file, sample, cache_folder=folder, profiles=list(counts["paths"]))
    except EdgekitError as exc:
        log.warning("FP32 reference count not made: %s", exc.message)
        return None
    return int8_verdict(counts["paths"], reference["paths"], emulator.cpu)


def searched_fp32(search, paths: Mapping) -> dict | None:
    """FP32's counts from the INT8 search's cost step, as `int8_verdict` reads them, when they cover every path in
    `paths`; None otherwise (no search, cost not counted, fewer paths)."""
    cost = getattr(search, "cost", None)
    fp32 = cost.fp32 if cost is not None and cost.counted else None
    if not fp32 or not set(paths) <= set(fp32):
        return None
    return {p: {"per_inference": {"total": int(n)}} for p, n in fp32.items()}


def _agreement(rec, subset, picks, outputs) -> dict | None:
    """How closely the ARM kernels follow tier B's simulation: the measure of how far B can be trusted."""
    if rec.simulated is None:
        return None
    simulated = tiers.pick(rec.static, rec.simulated, picks)
    stats = parity.differences(*tiers.comparable(rec.static, simulated, outputs, subset.samples.lines is not None),
                               rec.static.fetches)
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
    """Where tier C's shards ran (edgekit/verify/shards.py): the executor and how many nodes (hosts) ran them."""
    placed = [r["shard"] for r in records if "shard" in r]
    if not placed:
        return None              # a cache entry made before shards said where they ran
    nodes = {json.dumps(p.get("node"), sort_keys=True) for p in placed}
    return {"executor": placed[0].get("executor"), "nodes": len(nodes), "count": len(placed)}


def _nms_rows_run(cfg: BuildConfig, emulator: Emulator, nb_file: Path, subset, feeds) -> tuple[list, list, bool]:
    """A graph that kept its NMS op: the runner's --rows mode (edgekit/verify/nms.py), uncached."""
    from edgekit.verify import nms

    outputs, records = nms.emulate(emulator, nb_file, subset.inputs, feeds, cfg.emulation.jobs or 2)
    return outputs, records, False


def _cached_run(cfg: BuildConfig, emulator: Emulator, nb_file: Path, subset, feeds) -> tuple[list, list, bool]:
    """Results are keyed by the .nb, the exact inputs, the runtime, the runner build, the CPU profile and threads."""
    from edgekit.core import atomic

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
    from edgekit.core.executors import from_environment, usable_cores

    records: list = []
    with from_environment() as executor:        # the build's executor (EDGEKIT_EXECUTOR), as the INT8 search's
        def run(inputs):
            if cfg.emulation.jobs:
                found, ran = emulator.run(nb_file, inputs, feeds, cfg.emulation.jobs, executor=executor)
            else:
                found, ran = emulator.run(nb_file, inputs, feeds, usable_cores(), memory_aware=True, executor=executor)
            records.extend(ran)
            return found

        outputs = run_lines(run, subset.samples)     # text lines in width groups, as every other engine runs them
    if folder is not None:
        with atomic.replacing(folder / f"{key}.npz") as tmp:
            with tmp.open("wb") as handle:
                np.savez(handle, **{f"output_{i}": o for i, o in enumerate(outputs)})
        atomic.write_json(folder / f"{key}.json", records)
    return outputs, records, False
