"""Baselines and the decisions made against them; pure except `load` and `save`.

One JSON file per device (schema `edgekit.device-baseline/1`), meant to be committed:

    {"schema", "device": {"id", "spec", "facts"},
     "entries": {"<model>/<target>-<precision>": {
         "recorded_utc", "nb_sha256", "opt_version", "settings": {"threads", "batch", "warmup", "iterations",
         "launches"}, "latency_ms": {median, p90, p99, trimmed_mean, cv, ...}, "launch_medians_ms": [...],
         "samples_ms": [[every timed run of launch 1], ...], "load_ms_median", "peak_rss_kb",
         "output_sha256", "golden": {output: {cosine, max_abs}}, "eval": {metric, value, samples, data_sha256} | null,
         "instruction_counts": {unit, plugin, runtime_version, runner_build, input_shapes,
                                "paths": {cpu profile: {kernel_path, per_inference: {total, simd_fp, load_store,
                                                                                     branch, other, dot_product}}}}
                               (qemu devices only),
         "history": [older entries' {recorded_utc, nb_sha256, median_ms, launch_medians_ms, cv, instructions}, ...]}}}

A latency regression needs all three: the new median above the baseline median by
`slowdown_pct` percent, by `slowdown_ms`, and by `noise_k` robust sigmas of the noise
(`noise_ms`: the MAD of the history's medians, or of the baseline's per-launch medians
while the history is short). It counts only when a re-run agrees (`confirm`). A run
whose robust CV (MAD-based, `stats.Summary.robust_cv`) or temperature rise is too high
is unstable: skipped, never failed.
Accuracy gets no noise allowance: any drop of the task metric on the same data fails.

Instruction counts (qemu devices: edgekit/verify/counts.py) have no noise at all: the same
runner, runtime, model and input execute the same instructions on any host. So any
growth of a kernel path's total beyond `count_tolerance_pct` (0 by default) is a
count regression, with no re-run, whatever the `.nb` (a rebuilt bundle of the same
key is the point). It is reported per class and exits 17 (edgekit/device/results.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from edgekit.verify import counts
from edgekit.core.errors import ConfigError
from . import stats

SCHEMA = "edgekit.device-baseline/1"
HISTORY_KEEP = 50          # older entries kept per bundle (a few years of weekly updates)
MIN_HISTORY = 3            # below this many medians the per-launch spread stands in for the history's noise
COMPARABLE = ("threads", "batch")   # settings that change latency: a baseline taken otherwise is not compared


@dataclass(frozen=True)
class Policy:
    slowdown_pct: float = 10.0
    slowdown_ms: float = 0.5
    noise_k: float = 3.0
    max_cv: float = 0.25
    max_thermal_rise_c: float = 5.0
    count_tolerance_pct: float = 0.0     # instruction counts are deterministic: any growth is a regression

    def __post_init__(self) -> None:
        if not self.count_tolerance_pct >= 0:
            raise ConfigError(f"--count-tolerance {self.count_tolerance_pct:g} is negative",
                              "give a percentage >= 0 (0: any growth of the instruction count is a regression)")

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Measurement:
    """What a run contributes to the decision."""

    median_ms: float
    launch_medians_ms: tuple[float, ...]
    cv: float                        # robust CV of every timed run (stats.Summary.robust_cv)
    thermal_rise_c: float | None = None
    settings: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    kind: str                        # ok, faster, regression, unstable, no-baseline, incomparable
    reason: str                      # one line
    median_ms: float
    baseline_ms: float | None = None
    delta_ms: float | None = None
    delta_pct: float | None = None
    noise_ms: float | None = None
    threshold_ms: float | None = None    # the slowdown tolerated: the largest of the three margins
    confirmed: bool | None = None    # regressions: whether the re-run agreed; None before a re-run

    @property
    def is_regression(self) -> bool:
        return self.kind == "regression" and self.confirmed is not False

    def to_json(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class CountVerdict:
    """Instruction counts of one run against the baseline's."""

    kind: str                        # ok, fewer, regression, no-baseline, incomparable
    reason: str                      # one line
    totals: Mapping[str, int]        # kernel path (CPU profile) -> instructions per inference, this run
    baseline_totals: Mapping[str, int] | None = None
    regressions: tuple[str, ...] = ()   # one line per regressed path, with the change of each class

    @property
    def is_regression(self) -> bool:
        return self.kind == "regression"

    def to_json(self) -> dict:
        return {"kind": self.kind, "reason": self.reason, "totals": dict(self.totals),
                "baseline_totals": dict(self.baseline_totals) if self.baseline_totals is not None else None,
                "regressions": list(self.regressions)}


COUNT_PROVENANCE = (("runtime_version", "runtime"), ("runner_build", "runner build"), ("plugin", "counting plugin"))


COUNT_KEYS = ("unit", "input", "input_shapes", "plugin", "runtime_version", "runner_build", "paths")


def count_record(found: Mapping, runtime_version: str, runner_build: str) -> dict:
    """What a baseline keeps of `counts.measure_on_device`'s counts: per path the kernel path and the classes."""
    return {"unit": found["unit"], "input": found.get("input"), "input_shapes": found.get("input_shapes"),
            "plugin": found.get("plugin"), "runtime_version": runtime_version, "runner_build": runner_build,
            "paths": {p: {"kernel_path": c.get("kernel_path"), "per_inference": dict(c["per_inference"])}
                      for p, c in found["paths"].items()}}


def _totals(record: Mapping) -> dict[str, int]:
    return {p: int(c["per_inference"]["total"]) for p, c in record["paths"].items()}


def _well_formed(record: object) -> bool:
    """A count_record as written by the suite (a hand-edited baseline may not be): every path's classes are ints."""
    paths = record.get("paths") if isinstance(record, Mapping) else None
    return isinstance(paths, Mapping) and bool(paths) and all(
        isinstance(c, Mapping) and isinstance(c.get("per_inference"), Mapping)
        and all(type(c["per_inference"].get(k)) is int for k in ("total", *counts.CLASSES)) for c in paths.values())


def judge_counts(now: Mapping, entry: Mapping | None, policy: Policy) -> CountVerdict:
    """A run's `count_record` against the baseline entry's: growth of any path's total beyond the tolerance is a
    regression (per class in its line); a different input shape or no common path cannot be compared."""
    totals = _totals(now)
    figures = ", ".join(f"{p} {t:,}" for p, t in totals.items())
    base = (entry or {}).get("instruction_counts")
    if entry is None:
        return CountVerdict("no-baseline", f"{figures} instructions per inference; no baseline for this bundle on "
                                           "this device (record one with --update-baseline)", totals)
    if not base:
        return CountVerdict("no-baseline", f"{figures} instructions per inference; the baseline has none (recorded "
                                           "before counting or on another kind of device): --update-baseline", totals)
    if not _well_formed(base):
        return CountVerdict("incomparable", "the baseline's instruction_counts are malformed (edited by hand?): "
                                            "record them again with --update-baseline", totals)
    before = _totals(base)
    if base.get("input_shapes") != now.get("input_shapes"):
        return CountVerdict("incomparable", f"the golden input's shapes {now.get('input_shapes')} differ from the "
                                            f"baseline's {base.get('input_shapes')}: counts scale with them", totals, before)
    common = [p for p in totals if p in before]
    if not common:
        return CountVerdict("incomparable", f"counted on {', '.join(totals)}, the baseline on {', '.join(before)}",
                            totals, before)
    changed = [label for key, label in COUNT_PROVENANCE if base.get(key) != now.get(key)]
    context = (f" (the {', '.join(changed)} differ{'s' if len(changed) == 1 else ''} from the baseline's)"
               if changed else "")
    tolerance = policy.count_tolerance_pct
    found = counts.regressions({p: base["paths"][p]["per_inference"] for p in common},
                              {p: now["paths"][p]["per_inference"] for p in common}, tolerance=tolerance / 100.0)
    if found:
        allowed = f"more than {tolerance:g} % " if tolerance else ""
        return CountVerdict("regression", f"{allowed}more instructions than the baseline{context}: " + "; ".join(found),
                            totals, before, tuple(found))
    fewer = [p for p in common if totals[p] < before[p]]
    grew = [p for p in common if totals[p] > before[p]]
    delta = "; ".join(f"{p} {totals[p]:,} vs {before[p]:,} ({(totals[p] - before[p]) / before[p]:+.2%})"
                      for p in common)
    if fewer and not grew:
        return CountVerdict("fewer", f"{delta}: fewer instructions than the baseline{context} (record it with "
                                     "--update-baseline)", totals, before)
    if grew:
        return CountVerdict("ok", f"{delta}: within --count-tolerance {tolerance:g} %{context}", totals, before)
    return CountVerdict("ok", f"{delta}: identical to the baseline{context}", totals, before)


def noise_ms(entry: Mapping) -> float:
    """Run-to-run noise of the baseline: robust sigma of the history's medians (with the current one), or of the
    current baseline's per-launch medians while the history is short; the larger when both exist."""
    medians = [h["median_ms"] for h in entry.get("history", [])] + [entry["latency_ms"]["median"]]
    launch = stats.robust_sigma(entry.get("launch_medians_ms", []))
    return max(stats.robust_sigma(medians), launch) if len(medians) >= MIN_HISTORY else launch


def unstable_reason(m: Measurement, policy: Policy) -> str | None:
    if m.cv > policy.max_cv:
        return f"unstable run: robust CV {m.cv:.3f} > {policy.max_cv:g} (noisy device: close apps, fix the governor)"
    if m.thermal_rise_c is not None and m.thermal_rise_c > policy.max_thermal_rise_c:
        return (f"unstable run: temperature rose {m.thermal_rise_c:.1f} °C > {policy.max_thermal_rise_c:g} °C "
                "(let the device cool down)")
    return None


def judge(m: Measurement, entry: Mapping | None, policy: Policy) -> Verdict:
    """One run against its baseline entry, before any re-run."""
    unstable = unstable_reason(m, policy)
    if unstable:
        return Verdict("unstable", unstable, m.median_ms)
    if entry is None:
        return Verdict("no-baseline", f"median {m.median_ms:.3f} ms; no baseline for this bundle on this device "
                                      "(record one with --update-baseline)", m.median_ms)
    settings = entry.get("settings", {})
    differ = [k for k in COMPARABLE if k in settings and k in m.settings and settings[k] != m.settings[k]]
    base = float(entry["latency_ms"]["median"])
    if differ:
        return Verdict("incomparable", "baseline measured with " + ", ".join(f"{k}={settings[k]}" for k in differ) +
                       ", this run with " + ", ".join(f"{k}={m.settings[k]}" for k in differ), m.median_ms, base)
    delta = m.median_ms - base
    pct = 100.0 * delta / base if base > 0 else float("inf")
    noise = noise_ms(entry)
    margin = max(policy.slowdown_ms, policy.noise_k * noise, base * policy.slowdown_pct / 100.0)
    figures = (f"median {m.median_ms:.3f} ms vs baseline {base:.3f} ms ({delta:+.3f} ms, {pct:+.1f} %; "
               f"noise {noise:.3f} ms)")
    common = dict(median_ms=m.median_ms, baseline_ms=base, delta_ms=delta, delta_pct=pct, noise_ms=noise,
                  threshold_ms=margin)
    if pct > policy.slowdown_pct and delta > policy.slowdown_ms and delta > policy.noise_k * noise:
        return Verdict("regression", f"{figures}: slower by more than {margin:.3f} ms", **common)
    if -pct > policy.slowdown_pct and -delta > policy.slowdown_ms and -delta > policy.noise_k * noise:
        return Verdict("faster", f"{figures}: faster than the baseline (record it with --update-baseline)", **common)
    return Verdict("ok", f"{figures}: within {margin:.3f} ms", **common)


def confirm(first: Verdict, rerun: Verdict) -> Verdict:
    """A regression stands only when the automatic re-run is a regression too."""
    if first.kind != "regression":
        return first
    if rerun.kind == "regression":
        return replace(first, confirmed=True,
                       reason=f"{first.reason}; confirmed by a re-run (median {rerun.median_ms:.3f} ms)")
    if rerun.kind == "unstable":
        return replace(first, kind="unstable", confirmed=False,
                       reason=f"first run regressed ({first.reason}) but the re-run was an {rerun.reason}")
    return replace(first, kind="ok", confirmed=False, reason=f"not confirmed: first run {first.reason}; "
                                                             f"the re-run's median {rerun.median_ms:.3f} ms is not")


def accuracy_drop(now: Mapping | None, entry: Mapping | None) -> tuple[str, str]:
    """(status, message) of the task metric against the baseline's: any drop on the same data fails."""
    if now is None:
        return "skipped", "no --eval data"
    base = (entry or {}).get("eval")
    value = f"{now['metric']} {now['value']:.4g} % on {now['samples']} samples"
    if not base:
        return "skipped", f"{value}; no baseline value"
    if base.get("data_sha256") != now["data_sha256"] or base.get("metric") != now["metric"]:
        return "skipped", f"{value}; the baseline's value is on other data ({base.get('samples')} samples)"
    if now["value"] < base["value"]:
        return "failed", f"{value} < baseline {base['value']:.4g} % (accuracy has no noise allowance)"
    return "passed", f"{value} (baseline {base['value']:.4g} %)"


def outputs_changed(nb_sha256: str, output_sha256: str, entry: Mapping | None) -> tuple[str, str]:
    """(status, message): the same model.nb on the same device must give bit-identical outputs."""
    if not entry:
        return "skipped", "no baseline"
    if entry.get("nb_sha256") != nb_sha256:
        return "skipped", "model.nb differs from the baseline's (outputs may change)"
    if entry.get("output_sha256") != output_sha256:
        return "failed", (f"outputs changed for the same model.nb: sha256 {output_sha256[:12]} vs baseline "
                          f"{str(entry.get('output_sha256'))[:12]} (runtime or kernels changed?)")
    return "passed", f"bit-identical to the baseline (sha256 {output_sha256[:12]})"


def updated(doc: Mapping | None, device: Mapping, key: str, entry: Mapping) -> dict:
    """The baseline document with `entry` as the new current for `key`; the previous one goes to its history."""
    doc = json.loads(json.dumps(doc)) if doc else {"schema": SCHEMA, "entries": {}}
    doc["device"] = dict(device)
    old = doc["entries"].get(key)
    history = list(old.get("history", [])) if old else []
    if old:
        history.append({"recorded_utc": old.get("recorded_utc"), "nb_sha256": old.get("nb_sha256"),
                        "median_ms": old["latency_ms"]["median"], "launch_medians_ms": old.get("launch_medians_ms", []),
                        "cv": old["latency_ms"].get("cv"),
                        "instructions": _totals(old["instruction_counts"]) if old.get("instruction_counts") else None})
    doc["entries"][key] = dict(entry, history=history[-HISTORY_KEEP:])
    return doc


def load(path: Path) -> dict | None:
    """The baseline at `path`, None when there is none yet; a file of another kind is refused."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"baseline {path} is not readable JSON: {exc}", "restore it from version control") from exc
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("entries"), dict):
        raise ConfigError(f"{path} is not a device baseline ({SCHEMA})", "pass the file --update-baseline wrote")
    return doc


def save(path: Path, doc: Mapping) -> None:
    from edgekit.core import atomic

    atomic.write_json(Path(path), doc)
