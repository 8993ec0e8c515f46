"""What the host concludes from the pulled results of one cell: golden, determinism, latency.

The golden comparison is `parity.compare` + `parity.golden_checks` with the tolerances the
bundle carries, applied to every launch's outputs (the worst launch decides). Latency
statistics pool every timed run of every launch (`stats`); the decision against the
baseline is `baseline.judge`, and whether it may fail the run is `latency_check`:
emulated devices and unstable runs are recorded, never gated. Instruction counts (qemu
devices) are judged by `baseline.judge_counts` and gated by `count_check`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from edgekit.model import parity
from edgekit.core.errors import ParityError
from . import baseline as baseline_mod
from . import stats
from .baseline import Measurement, Verdict
from .preflight import Prepared
from .results import CheckResult


def golden(p: Prepared, outputs: Sequence[Sequence[np.ndarray]], device_id: str,
           label: str = "") -> tuple[dict, list[CheckResult]]:
    """(worst cosine and max abs per output, one check per golden tolerance and output); `label` names a golden
    group at another width (" at width 1280"), whose reference `p` then holds."""
    subject = f"model.nb on {device_id} vs golden{label}"
    worst: dict[tuple[str, str], parity.Check] = {}
    figures: dict[str, dict] = {}
    for outs in outputs:
        if len(outs) != len(p.reference):
            return {}, [CheckResult(f"golden outputs{label}", "failed", f"the device returned {len(outs)} outputs, the "
                                                                f"bundle's golden vectors have {len(p.reference)}")]
        reference, names = p.reference, p.output_names
        if p.rows:                          # NMS rows of every image: compared image by image (lite/nms.py)
            from ..lite import nms

            (reference, outs), names = nms.comparable(reference, outs), names[:1]
        try:
            found = parity.compare(reference, outs, names)
        except ParityError as exc:          # NaN or Inf: no tolerance makes them comparable
            return {}, [CheckResult(f"golden outputs{label}", "failed", exc.message)]
        for c in parity.golden_checks(p.tolerances, "device", subject, found):
            key = (c.metric, c.output)
            if key not in worst or (c.value < worst[key].value if c.higher_is_better else c.value > worst[key].value):
                worst[key] = c
        for s in found:
            seen = figures.setdefault(s.output, {"cosine": s.cosine, "max_abs": s.max_abs})
            seen.update(cosine=min(seen["cosine"], s.cosine), max_abs=max(seen["max_abs"], s.max_abs))
    checks = [CheckResult(f"golden{label} {c.metric} [{c.output}]", "passed" if c.passed else "failed",
                          f"{c.value:.6g} ({'≥' if c.higher_is_better else '≤'} {c.limit:g}), worst of "
                          f"{len(outputs)} launches", value=c.value, limit=c.limit) for c in worst.values()]
    return figures, checks


def determinism(digests: Sequence[str]) -> CheckResult:
    distinct = sorted(set(digests))
    if len(distinct) == 1:
        return CheckResult("outputs deterministic", "passed",
                           f"identical over {len(digests)} launches (sha256 {distinct[0][:12]})")
    return CheckResult("outputs deterministic", "failed", f"{len(distinct)} different outputs over {len(digests)} "
                       "launches of the same inputs: non-deterministic kernels (try --threads 1)")


def measure(launches: Sequence[dict], threads: int) -> Measurement:
    samples = [launch["record"]["iteration_ms"] for launch in launches]
    summary = stats.summarize([v for s in samples for v in s])
    before = [launch["temperature_before_c"] for launch in launches if launch["temperature_before_c"] is not None]
    after = [launch["temperature_after_c"] for launch in launches if launch["temperature_after_c"] is not None]
    rise = max(after) - before[0] if before and after else None
    return Measurement(summary.median, tuple(stats.median(s) for s in samples), summary.robust_cv, rise,
                       {"threads": threads, "batch": 1})


def latency(launches: Sequence[dict], first: Measurement, rerun: Measurement | None, verdict: Verdict,
            entry: Mapping | None) -> dict:
    """Every figure of the first measurement, the re-run's, the verdict and the baseline it was judged against."""
    measured = [launch["record"] for launch in launches if not launch["rerun"]]
    samples = [r["iteration_ms"] for r in measured]
    loads = [r["load_ms"] for r in measured if r.get("load_ms") is not None]
    firsts = [r["first_run_ms"] for r in measured if r.get("first_run_ms") is not None]
    return {
        "summary": stats.summarize([v for s in samples for v in s]).to_json(),
        "per_launch": [stats.summarize(s).to_json() for s in samples], "samples_ms": samples,
        "launch_medians_ms": [round(m, 4) for m in first.launch_medians_ms], "thermal_rise_c": first.thermal_rise_c,
        "load_ms_median": round(stats.median(loads), 3) if loads else None,
        "first_run_ms_median": round(stats.median(firsts), 3) if firsts else None,
        "rerun": None if rerun is None else {
            "samples_ms": [launch["record"]["iteration_ms"] for launch in launches if launch["rerun"]],
            "median_ms": round(rerun.median_ms, 4), "robust_cv": round(rerun.cv, 4)},
        "verdict": verdict.to_json(),
        "baseline": None if entry is None else dict(
            {k: entry.get(k) for k in ("latency_ms", "launch_medians_ms", "samples_ms", "recorded_utc")},
            noise_ms=baseline_mod.noise_ms(entry)),
    }


def latency_check(verdict: Verdict, emulated: str | None, updating: bool) -> CheckResult:
    """Only a confirmed regression on a real device fails; emulated, unstable or unbaselined latency is skipped."""
    label = f"{verdict.kind}: {verdict.reason}"
    figures = dict(kind="latency", value=verdict.median_ms, limit=verdict.baseline_ms)
    if emulated:
        return CheckResult("latency median", "skipped", f"emulated ({emulated}): latency recorded, never gated; {label}",
                           **figures)
    if updating:
        return CheckResult("latency median", "skipped", f"--update-baseline: not gated; {label}", **figures)
    if verdict.is_regression:
        return CheckResult("latency median", "failed", f"regression: {verdict.reason}", **figures)
    return CheckResult("latency median", "passed" if verdict.kind in ("ok", "faster") else "skipped", label, **figures)


def count_check(verdict, updating: bool) -> CheckResult:
    """Instruction counts (qemu devices) are deterministic, so a count regression fails at once, emulated or not."""
    figures = dict(kind="count", value=float(sum(verdict.totals.values())),
                   limit=float(sum(verdict.baseline_totals.values())) if verdict.baseline_totals else None)
    if updating:
        return CheckResult("instruction count", "skipped", f"--update-baseline: not gated; {verdict.kind}: "
                                                           f"{verdict.reason}", **figures)
    if verdict.is_regression:
        return CheckResult("instruction count", "failed", f"count regression: {verdict.reason}", **figures)
    status = "passed" if verdict.kind in ("ok", "fewer") else "skipped"
    return CheckResult("instruction count", status, f"{verdict.kind}: {verdict.reason}", **figures)


def golden_matching(p: Prepared, outputs: Sequence[Sequence[np.ndarray]]) -> tuple[str, dict, CheckResult]:
    """Detection and segmentation bundles: the device's golden outputs judged in the task's terms against the golden
    reference's (`detections.check`: boxes per image; `masks.check`: class maps pixel by pixel), with the key of
    their figures in the cell ("detections" or "masks")."""
    from . import detections, masks

    key = p.task.golden_key
    judge = detections.check if key == "detections" else masks.check
    figures, found = judge(p.task, p.reference, outputs, p.tolerances.floor(key) if p.tolerances is not None else None)
    return key, figures, found
