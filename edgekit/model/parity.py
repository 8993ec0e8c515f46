"""Validation, apart from the transformations: compare outputs, apply gates and budgets, report.

Everything that decides whether two engines agree lives here, and only here: the
figures (max abs, cosine, SNR), the per-output comparison, the tolerance gate of
tier A (a faithful float engine against the reference), the accuracy budget of
tiers B and C and of the INT8 search (a drop in the task's own metric, or in output
cosine without ground truth), the pruning metric, and the report the pipeline
prints and stores. The export checks (static vs dynamic, X2Paddle vs ONNX Runtime,
program rewrites) take their figures from `differences` too.

The tiers (what each engine is): A = the FP32 x86 twin `.nb` on Paddle-Lite's x86
kernels; B = the reduced precision as simulated on the host (PaddleSlim fake-quant,
or weights rounded as opt rounds them); C = the ARM `.nb` itself on Paddle-Lite's
ARM kernels under emulation (`edgekit.verify.tiers`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from edgekit.contracts.golden import GoldenTolerances
from edgekit.core.errors import ConfigError, ParityError


# ---------------------------------------------------------------- figures


def max_abs(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean per-sample cosine similarity (flattened per sample)."""
    a2 = a.reshape(len(a), -1).astype(np.float64) if a.ndim > 1 else a.reshape(1, -1).astype(np.float64)
    b2 = b.reshape(a2.shape).astype(np.float64)
    na, nb = np.linalg.norm(a2, axis=1), np.linalg.norm(b2, axis=1)
    both_zero = (na == 0) & (nb == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(both_zero, 1.0, (a2 * b2).sum(axis=1) / (na * nb))
    return float(np.nanmean(np.where(np.isnan(cos), 0.0, cos)))


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    noise = float(np.sum((reference.astype(np.float64) - test.astype(np.float64)) ** 2))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def top1(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits.reshape(len(logits), -1), axis=1) == labels) * 100.0)


def metric_label(metric: str) -> str:
    """How a task metric is named in reports: "top-1" for top1, "exact match" for exact_match."""
    return "top-1" if metric == "top1" else metric.replace("_", " ")


# ---------------------------------------------------------------- comparing two engines


@dataclass(frozen=True)
class OutputStats:
    output: str
    max_abs: float
    cosine: float
    snr_db: float


def differences(reference: Sequence[np.ndarray], test: Sequence[np.ndarray], names: Sequence[str]) -> list[OutputStats]:
    """Per-output figures of `test` against `reference`; NaN/Inf give NaN figures (the caller's gate fails them)."""
    if len(reference) != len(test):
        raise ParityError(f"the model under test returns {len(test)} outputs, the reference {len(reference)}",
                          "report the model: the conversion changed the program's outputs")
    stats = []
    for name, ref, got in zip(names, reference, test):
        if ref.shape != got.shape:
            raise ParityError(f"output {name!r} has shape {list(got.shape)}, the reference {list(ref.shape)}",
                              "report the model: the converted program's output shape differs")
        if not (np.isfinite(got).all() and np.isfinite(ref).all()):
            stats.append(OutputStats(name, math.nan, math.nan, math.nan))
            continue
        stats.append(OutputStats(name, max_abs(ref, got), cosine(ref, got), snr_db(ref, got)))
    return stats


def compare(reference: Sequence[np.ndarray], test: Sequence[np.ndarray], names: Sequence[str]) -> list[OutputStats]:
    """`differences`, refusing outputs with NaN or Inf (no tolerance makes those comparable)."""
    for name, got in zip(names, test):
        if not np.isfinite(got).all():
            raise ParityError(f"output {name!r} of the model under test contains NaN or Inf",
                              "check the calibration data and the model's numerics in fp32")
    return differences(reference, test, names)


def worst_max_abs(stats: Sequence[OutputStats]) -> float:
    """The largest max abs over outputs; NaN when any output was not finite."""
    values = [s.max_abs for s in stats]
    return math.nan if any(math.isnan(v) for v in values) else max(values, default=0.0)


def output_scale(outputs: Sequence[np.ndarray]) -> float:
    """The largest |value| of any output: tolerances for float noise grow with it."""
    return max((float(np.max(np.abs(o))) if o.size else 0.0 for o in outputs), default=0.0)


# ---------------------------------------------------------------- checks


@dataclass(frozen=True)
class Check:
    tier: str          # "A", "B", "C" (or "export", "prune")
    subject: str       # what is compared, e.g. "x86 twin .nb vs reference"
    metric: str        # "max_abs", "cosine", "top1_drop_points", ...
    value: float
    limit: float
    higher_is_better: bool
    output: str = ""

    @property
    def passed(self) -> bool:
        if not math.isfinite(self.value) and not (self.value == math.inf and self.higher_is_better):
            return False
        return self.value >= self.limit if self.higher_is_better else self.value <= self.limit

    def line(self) -> str:
        mark = "✓" if self.passed else "✗"
        op = "≥" if self.higher_is_better else "≤"
        out = f" [{self.output}]" if self.output else ""
        return f"  {mark} tier {self.tier} {self.subject}{out}: {self.metric} {self.value:.6g} ({op} {self.limit:g})"


@dataclass(frozen=True)
class Tolerance:
    """Tier-A style: every output within `max_abs` and at least `min_cosine` of the reference."""

    max_abs: float
    min_cosine: float

    def checks(self, tier: str, subject: str, stats: Sequence[OutputStats]) -> list[Check]:
        out = []
        for s in stats:
            out.append(Check(tier, subject, "max_abs", s.max_abs, self.max_abs, False, s.output))
            out.append(Check(tier, subject, "cosine", s.cosine, self.min_cosine, True, s.output))
        return out


# ---------------------------------------------------------------- transforms: the same program, rewritten


@dataclass(frozen=True)
class SameTolerance:
    """How close a transformed program must stay to the one it replaces: max abs within `max_abs` x max(1, scale),
    the scale being the output's largest |value| (`per_output`) or every output's (or `max_abs` itself when not
    `scaled`); cosine >= `min_cosine` if given."""

    max_abs: float
    min_cosine: float | None = None
    per_output: bool = True
    scaled: bool = True


@dataclass(frozen=True)
class OutputCheck:
    output: str
    max_abs: float
    cosine: float
    max_abs_limit: float
    passed: bool


@dataclass(frozen=True)
class SameCheck:
    """The one result shape of every transform's check (fold, rewrite, export, engine cross-check)."""

    what: str
    samples: int
    outputs: tuple[OutputCheck, ...]

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    @property
    def worst_max_abs(self) -> float:
        values = [o.max_abs for o in self.outputs]
        return math.nan if any(math.isnan(v) for v in values) else max(values, default=0.0)

    @property
    def failure(self) -> OutputCheck | None:
        return next((o for o in self.outputs if not o.passed), None)

    def to_json(self) -> dict:
        return {"what": self.what, "samples": self.samples, "outputs": [asdict(o) for o in self.outputs],
                "passed": self.passed}


def check_same(before: Sequence[np.ndarray], after: Sequence[np.ndarray], names: Sequence[str],
               tolerance: SameTolerance, what: str) -> SameCheck:
    """`after` (the transformed program's outputs) against `before` on the same inputs. Raises ParityError when the
    outputs differ in count or shape (no tolerance applies); NaN or Inf fail their output."""
    stats = differences(before, after, names)
    overall = output_scale(before)
    outputs = []
    for s, ref in zip(stats, before):
        scale = (output_scale([ref]) if tolerance.per_output else overall) if tolerance.scaled else 1.0
        limit = tolerance.max_abs * max(1.0, scale)
        ok = math.isfinite(s.max_abs) and s.max_abs <= limit and (
            tolerance.min_cosine is None or s.cosine >= tolerance.min_cosine)
        outputs.append(OutputCheck(s.output, s.max_abs, s.cosine, limit, bool(ok)))
    samples = int(before[0].shape[0]) if before and before[0].ndim else 0
    return SameCheck(what, samples, tuple(outputs))


def golden_checks(tolerances: GoldenTolerances, tier: str, subject: str, stats: Sequence[OutputStats]) -> list[Check]:
    """What a device replaying the bundle's golden vectors must meet (golden.json's tolerances, set at build time
    from the host's own figures): a cosine floor per output, and a max abs ceiling for FP32 models."""
    checks = [Check(tier, subject, "cosine", s.cosine, tolerances.min_cosine, True, s.output) for s in stats]
    if tolerances.max_abs is not None:
        checks += [Check(tier, subject, "max_abs", s.max_abs, tolerances.max_abs, False, s.output) for s in stats]
    return checks


# ---------------------------------------------------------------- accuracy budgets


@dataclass(frozen=True)
class Score:
    """A candidate's outputs against the FP32 reference on the evaluation samples."""

    cosine: float                  # worst output's mean per-sample cosine
    snr_db: float                  # worst output's SNR
    task: float | None = None      # the task's primary metric in % (top-1, exact match, hmean, ...), with truth
    task_drop: float | None = None  # points below the FP32 reference, with truth
    # every metric of the task (e.g. detection's map_small), and each one's points below the FP32 reference on the
    # same samples; None without truth (or from an older score cache)
    metrics: dict[str, float] | None = field(default=None, hash=False)
    metric_drops: dict[str, float] | None = field(default=None, hash=False)
    # % of samples whose task result (class, text, boxes) is the FP32 model's (Task.agreement); None without truth
    agreement: float | None = None

    @property
    def error(self) -> float:
        """Continuous error used for ranking layers (a task metric on a small sample moves in coarse steps)."""
        return 1.0 - self.cosine

    @property
    def changed(self) -> float | None:
        """% of the samples whose task result differs from FP32's (points for boxes and masks); None without."""
        return None if self.agreement is None else 100.0 - self.agreement

    def to_json(self) -> dict:
        return {"cosine": self.cosine, "snr_db": self.snr_db, "task": self.task, "task_drop": self.task_drop,
                "metrics": None if self.metrics is None else dict(self.metrics),
                "metric_drops": None if self.metric_drops is None else dict(self.metric_drops),
                "agreement": self.agreement}


COSINE_DROP = "cosine_drop"
PER_SAMPLE = frozenset({"top1", "exact_match", "accuracy"})   # primary metrics that score one result per sample
CHANGED = "_changed"        # the metric suffix of Budget.changed_check
CHANGED_FIX = ("see the search above; allow more float layers ([quantize] max_float_fraction, no --no-fallback), or "
               "raise --max-changed / [quantize] max_changed if the figure is acceptable")
POINTS = "_drop_points"


@dataclass(frozen=True)
class Budget:
    """`max_drop` in points of the task's primary metric with ground truth, else in output cosine (1 - cosine).

    `metric` is "<task metric>_drop_points" (e.g. "top1_drop_points", "exact_match_drop_points")
    or "cosine_drop". The INT8 search (`holds`) and the tier-B/C gates (`checks`) use
    this one class, so a search that meets its budget also passes the gate.
    """

    max_drop: float
    metric: str
    # the INT8 search only: at most this % of the samples may get another task result than FP32's (a text read
    # differently, another class) whatever the truth says; None = not checked. The gates check `max_drop` alone.
    max_changed: float | None = None

    def __post_init__(self) -> None:
        if self.metric != COSINE_DROP and not (self.metric.endswith(POINTS) and len(self.metric) > len(POINTS)):
            raise ConfigError(f"accuracy budget metric {self.metric!r} is unknown",
                              f"use {COSINE_DROP} or <task metric>{POINTS}, e.g. top1{POINTS}")
        if not math.isfinite(self.max_drop):     # negative is allowed, as in the parity gates: "must improve"
            raise ConfigError(f"--max-drop {self.max_drop!r} is not a number",
                              "give task-metric points (e.g. 1.0) with ground truth, or a cosine drop (e.g. 0.01) without")
        if self.max_changed is not None:
            if not (math.isfinite(self.max_changed) and 0.0 <= self.max_changed <= 100.0):
                raise ConfigError(f"[quantize] max_changed = {self.max_changed!r} is not a share of samples in %",
                                  "give a percentage in [0, 100], e.g. 1.0")
            if self.metric == COSINE_DROP:
                raise ConfigError("[quantize] max_changed needs evaluation data with ground truth (a task reads the "
                                  "samples)", "give labels or a truth file, or drop max_changed")

    @classmethod
    def for_data(cls, max_drop: float, task_metric: str | None) -> "Budget":
        """Points of `task_metric` (the task's primary metric) when the data has truth, else output cosine."""
        return cls(float(max_drop), f"{task_metric}{POINTS}" if task_metric else COSINE_DROP)

    @property
    def task_metric(self) -> str | None:
        return None if self.metric == COSINE_DROP else self.metric[:-len(POINTS)]

    def drop(self, score: Score) -> float:
        if self.metric == COSINE_DROP:
            return 1.0 - score.cosine
        if score.task_drop is None:
            raise ConfigError(f"a {self.task_metric} budget needs evaluation data with ground truth",
                              "give labels or a truth file, or budget the output cosine")
        return score.task_drop

    def holds(self, score: Score) -> bool:
        if self.metric == COSINE_DROP:
            return score.cosine >= 1.0 - self.max_drop
        return self.drop(score) <= self.max_drop and self._changed_holds(score)

    def _changed_holds(self, score: Score) -> bool:
        if self.max_changed is None:
            return True
        changed = score.changed
        if changed is None:
            raise ConfigError("a max_changed budget needs scores with their agreement to the FP32 results",
                              "score the candidates with the task's evaluator (edgekit.quantize.sensitivity.Evaluator)")
        return changed <= self.max_changed

    def excess(self, score: Score) -> float:
        """How far `score` is over the budget (<= 0 when it holds): the larger of its excess drop and excess
        changed samples; what the fallback compares misses by."""
        over = self.drop(score) - self.max_drop
        changed = score.changed if self.max_changed is not None else None
        return over if changed is None else max(over, changed - self.max_changed)

    def changed_text(self, score: Score) -> str:
        """", 2 % changed" (", 2 points changed" for boxes and masks) when the budget counts the results unlike
        FP32's and the score has them, else ""."""
        changed = score.changed if self.max_changed is not None else None
        unit = "%" if self.task_metric in PER_SAMPLE else "points"
        return "" if changed is None else f", {changed:.4g} {unit} changed"

    def changed_check(self, score: Score) -> Check | None:
        """The gate on the INT8 search's choice when the budget has `max_changed` (the tiers check `max_drop`):
        a choice that misses it fails the build as a missed drop does."""
        if self.max_changed is None:
            return None
        changed = score.changed
        return Check("B", "int8 search vs fp32 results", f"{self.task_metric}{CHANGED}",
                     math.inf if changed is None else changed, self.max_changed, False)

    def describe(self) -> str:
        unit = f"{self.task_metric} points" if self.task_metric else "of output cosine"
        changed = ""
        if self.max_changed is not None:      # one result per sample (a text, a class), else points of boxes or masks
            changed = (f", ≤ {self.max_changed:g} % of samples read unlike FP32" if self.task_metric in PER_SAMPLE
                       else f", ≤ {self.max_changed:g} {self.task_metric} points against FP32's results")
        return f"drop ≤ {self.max_drop:g} {unit}{changed}"

    def checks(self, tier: str, subject: str, stats: Sequence[OutputStats], reference_metric: float | None = None,
               test_metric: float | None = None) -> list[Check]:
        """The gate: one drop-in-points check with truth (`*_metric` are the task metric of both engines, in %),
        else a cosine check per output."""
        if self.task_metric is not None:
            if reference_metric is None or test_metric is None:
                raise ConfigError(f"a {self.task_metric} budget needs evaluation data with ground truth",
                                  "give labels or a truth file, or budget the output cosine")
            return [Check(tier, subject, self.metric, reference_metric - test_metric, self.max_drop, False,
                          stats[0].output if stats else "")]
        return [Check(tier, subject, "cosine", s.cosine, 1.0 - self.max_drop, True, s.output) for s in stats]


# ---------------------------------------------------------------- a metric for searches over models (pruning)


@dataclass(frozen=True)
class Metric:
    """Higher is better, in % ("points"): the task's primary metric with truth, else the output cosine x100."""

    name: str
    score: Callable[[Sequence[np.ndarray]], float]     # the model's outputs -> value


def task_metric(reference: Sequence[np.ndarray], task=None, truth: Sequence | None = None) -> Metric:
    """What a pruning budget is measured in: the same metric as the INT8 budget and the parity gates."""
    if task is not None and truth is not None:
        return Metric(f"{metric_label(task.primary)} %", lambda outputs: task.score(list(outputs), truth))
    return Metric("cosine to unpruned x100",
                  lambda outputs: 100.0 * min(cosine(r, o) for r, o in zip(reference, outputs)))


# ---------------------------------------------------------------- the report


@dataclass(frozen=True)
class ParityReport:
    checks: tuple[Check, ...] = ()
    outputs: dict[str, tuple[OutputStats, ...]] = field(default_factory=dict)    # tier -> per-output stats
    accuracy: dict[str, float] = field(default_factory=dict)        # engine -> the task's primary metric, %
    metric: str = "top1"                                            # the primary metric's name
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)   # engine -> every task metric
    samples: int = 0
    notes: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)                       # tier -> details (agreement, runtime, ...)

    def __post_init__(self) -> None:
        object.__setattr__(self, "checks", tuple(self.checks))
        object.__setattr__(self, "notes", tuple(self.notes))

    def extended(self, *, checks: Sequence[Check] = (), tier: str | None = None, stats: Sequence[OutputStats] = (),
                 metrics: dict | None = None, notes: Sequence[str] = (), extra: dict | None = None) -> "ParityReport":
        """A new report with more checks, a tier's per-output stats, engines' task metrics and notes."""
        outputs = dict(self.outputs)
        if tier is not None and stats:
            outputs[tier] = tuple(stats)
        all_metrics = {**self.metrics, **(metrics or {})}
        accuracy = {engine: m[self.metric] for engine, m in all_metrics.items() if self.metric in m}
        return replace(self, checks=self.checks + tuple(checks), outputs=outputs, metrics=all_metrics,
                       accuracy=accuracy, notes=self.notes + tuple(notes), extra={**self.extra, **(extra or {})})

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def lines(self) -> list[str]:
        out = [f"parity on {self.samples} evaluation samples:"]
        for tier, stats in self.outputs.items():
            for s in stats:
                out.append(f"    tier {tier} [{s.output}]: max_abs {s.max_abs:.3g}  cosine {s.cosine:.8f}  SNR {s.snr_db:.1f} dB")
        name = metric_label(self.metric)
        for engine, acc in self.accuracy.items():
            out.append(f"    {name} {engine}: {acc:.2f} %")
        out.extend(c.line() for c in self.checks)
        out.extend(f"  note: {n}" for n in self.notes)
        return out

    def to_json(self) -> dict:
        return {
            "passed": self.passed, "samples": self.samples,
            "outputs": {tier: [asdict(s) for s in stats] for tier, stats in self.outputs.items()}, "accuracy": self.accuracy,
            "metric": self.metric, "metrics": self.metrics,
            "checks": [dict(asdict(c), passed=c.passed) for c in self.checks], "notes": list(self.notes),
            **({"tiers": self.extra} if self.extra else {}),
        }

    def raise_if_failed(self) -> None:
        failed = self.failures()
        if failed:
            first = failed[0]
            error = ParityError(
                f"{len(failed)} parity gate(s) failed; first: tier {first.tier} {first.subject} {first.metric} "
                f"{first.value:.4g} vs limit {first.limit:g}",
                CHANGED_FIX if first.metric.endswith(CHANGED) else
                "see the table above; loosen the gate in [parity] only if the figure is acceptable, "
                "or try another calibration algorithm (--algo) or more calibration data",
            )
            error.report_lines = self.lines()
            raise error
