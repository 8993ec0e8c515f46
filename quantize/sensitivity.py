"""Per-layer INT8 sensitivity and the float fallback loop.

A layer's sensitivity is measured, not guessed: the model is calibrated again with
only that layer quantised (`alone`), or with every layer but that one quantised
(`all-but`), and its outputs are compared with the FP32 reference. The fallback
loop then keeps the most sensitive layers in float (PaddleSlim's
`skip_tensor_list`, keyed by the layer's weight name) until the accuracy budget
holds, and afterwards returns to int8 any layer the budget no longer needs.

Everything here takes an `evaluate(skip) -> Score` callable, so the logic is pure
and the unit tests drive it with a fake; `search.py` supplies the real one.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from operator import attrgetter
from typing import Callable, Sequence

import numpy as np

from edgekit.model import parity
from edgekit.model.artifacts import StaticModel
from edgekit.model.data import Samples, fit_outputs, run_lines, spread_indices
from edgekit.model.evalset import EvalSet
from edgekit.model.parity import COSINE_DROP, Budget, Score
from edgekit.core.errors import ConfigError
from edgekit.contracts.settings import RANK_BY

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- progress


class Eta:
    """Progress over steps of similar cost (one calibration and scoring each): the time left is the mean step
    so far times the steps left; `left` is exact for the sensitivity runs and an upper bound for the fallback."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock, self._start, self.done = clock, clock(), 0

    def tick(self, left: int, at_most: bool = False) -> str:
        """Count one finished step; "3 more, ~4 min left" (`at_most`: "at most 3 more, ~4 min") or "done"."""
        self.done += 1
        if left <= 0:
            return "done"
        seconds = (self._clock() - self._start) / self.done * left
        time_left = f"~{seconds / 60:.0f} min" if seconds >= 90 else ("< 1 min" if seconds < 60 else "~1 min")
        return f"at most {left} more, {time_left}" if at_most else f"{left} more, {time_left} left"


# ---------------------------------------------------------------- layers


@dataclass(frozen=True)
class QuantLayer:
    """One op PaddleSlim would quantise, and the name that keeps it in float."""

    index: int            # position among the quantisable ops, in program order
    op_type: str
    key: str              # the tensor named in skip_tensor_list: the weight, else a private activation input
    output: str           # the op's output variable (what StaticModel.sources is keyed by)
    weight_elements: int  # 0 for ops without a weight (activation x activation matmul)
    source: str = ""      # the user's source line that created the op, when known

    @property
    def name(self) -> str:
        return self.key or self.output


def quantizable_layers(model: StaticModel, op_types: Sequence[str] | None = None) -> tuple[QuantLayer, ...]:
    """The ops `quantize_int8` quantises, in program order, each with the key that skips it."""
    from edgekit.export import program as prog

    from .ptq import QUANTIZABLE_OPS

    wanted = tuple(op_types or QUANTIZABLE_OPS)
    block = prog.parse_program(model.model_file).global_block()
    persistable = {name for name, var in block.vars.items() if var.persistable}
    ops = [op for op in block.ops if op.type in wanted]
    consumers: dict[str, int] = {}
    for op in block.ops:
        for name in set(op.input_arg_names):
            consumers[name] = consumers.get(name, 0) + 1
    layers = []
    for index, op in enumerate(ops):
        inputs = list(dict.fromkeys(op.input_arg_names))
        weights = [n for n in inputs if n in persistable]
        if weights:
            key = weights[0]
            elements = int(np.prod([d for d in block.var(key).shape if d > 0]))
        else:
            # skip_tensor_list matches any input name; only an input no other op reads skips this op alone
            private = [n for n in inputs if consumers.get(n, 0) == 1]
            key, elements = (private[0] if private else ""), 0
        output = op.output_arg_names[0] if op.output_arg_names else ""
        source = model.sources.get(output, {}).get("source", "") if model.sources else ""
        layers.append(QuantLayer(index, op.type, key, output, elements, source))
    return tuple(layers)


# ---------------------------------------------------------------- scoring candidates (Score and Budget: edgekit.model.parity)


class Evaluator:
    """Scores quantised programs against FP32 reference outputs computed once, and against the task's truth.

    With a task and its truth (one entry per sample) every score carries the task's
    primary metric and its drop from the FP32 reference, computed as the parity stage
    computes it; without, only output agreement.
    """

    def __init__(self, reference: Sequence[np.ndarray], evaluation: EvalSet, runner=None) -> None:
        self.reference = [np.asarray(r) for r in reference]
        self.evaluation = evaluation
        self._runner = runner
        self.reference_metrics = evaluation.evaluate(self.reference) if evaluation.has_truth else None
        self.reference_task = self.reference_metrics[evaluation.primary] if evaluation.has_truth else None
        # FP32's results decoded once: every candidate's agreement is judged against them
        self._reference_predictions = evaluation.task.predictions(self.reference) if evaluation.has_truth else None

    @classmethod
    def for_model(cls, static: StaticModel, evaluation: EvalSet, runner=None,
                  reference: Sequence[np.ndarray] | None = None) -> "Evaluator":
        """`reference`: the FP32 outputs of `static` on `evaluation` when an earlier stage computed them already."""
        runner = runner or _static_runner
        return cls(run_lines(runner(static).run, evaluation.samples) if reference is None else reference, evaluation,
                   runner)

    @property
    def samples(self) -> Samples:
        return self.evaluation.samples

    @property
    def task(self):
        return self.evaluation.task

    @property
    def truth(self) -> tuple | None:
        return self.evaluation.truth

    @property
    def has_truth(self) -> bool:
        return self.evaluation.has_truth

    @property
    def metric(self) -> str | None:
        return self.evaluation.primary

    def spread(self, n: int) -> "Evaluator":
        """The same judge on `n` samples spread over the set (as `EvalSet.spread` picks them); no rerun of FP32."""
        if n <= 0 or n >= len(self.evaluation):
            return self
        picks = spread_indices(len(self.evaluation), n)
        if self._rows():   # a kept NMS op's rows + counts (edgekit/lite/nms.py)
            from edgekit.lite import nms

            return Evaluator(nms.take(self.reference, picks), self.evaluation.spread(n), self._runner)
        return Evaluator([r[picks] for r in self.reference], self.evaluation.spread(n), self._runner)

    def _rows(self) -> bool:
        return getattr(self.task, "head", None) == "nms"

    def digest(self) -> str:
        """Identifies the samples, the task and the truth the scores depend on."""
        return self.evaluation.digest()

    def score_outputs(self, outputs: Sequence[np.ndarray]) -> Score:
        cosines, snrs = [], []
        finite = True
        reference, compared = self.reference, outputs
        if self._rows():   # rows image by image, padded to the same count (edgekit/lite/nms.py)
            from edgekit.lite import nms

            reference, compared = nms.comparable(self.reference, outputs)
        elif self.samples.lines is not None:    # width groups: a subset's outputs may end earlier (model/data.py)
            reference, compared = fit_outputs(self.reference, outputs)
        for ref, got in zip(reference, compared):
            if not np.isfinite(got).all():
                cosines.append(0.0)        # NaN/Inf from a quantised program: as bad as it gets
                snrs.append(-math.inf)
                finite = False
                continue
            cosines.append(parity.cosine(ref, got))
            snrs.append(parity.snr_db(ref, got))
        value = drop = metrics = drops = agreement = None
        if self.task is not None:
            if finite:
                metrics = self.evaluation.evaluate(outputs)
                agreement = self.task.agreement_with(list(outputs), self._reference_predictions)
            else:
                metrics = {name: 0.0 for name in self.reference_metrics}
                agreement = 0.0
            value = metrics[self.metric]
            drop = self.reference_task - value      # computed as the parity stage computes it
            drops = {name: self.reference_metrics[name] - v for name, v in metrics.items() if name in self.reference_metrics}
        return Score(min(cosines), min(snrs), value, drop, metrics, drops, agreement)

    def score(self, model: StaticModel) -> Score:
        runner = self._runner or _static_runner
        return self.score_outputs(run_lines(runner(model).run, self.samples))


def _static_runner(model: StaticModel):
    from edgekit.export import StaticRunner

    return StaticRunner(model)


# ---------------------------------------------------------------- sensitivity


Evaluate = Callable[[tuple[str, ...]], Score]      # skip list -> score of the model quantised with it


def _alone_skip(layer: QuantLayer, keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(k for k in keys if k != layer.key)


def _all_but_skip(layer: QuantLayer, keys: tuple[str, ...]) -> tuple[str, ...]:
    return (layer.key,)


def _points(drop: float | None) -> float | None:
    """Task points as a ranking term: a candidate that reads better than FP32 costs nothing, not less than nothing."""
    return None if drop is None else max(0.0, drop)


Cost = Callable[[Score], "float | None"]    # the points a budget counts against a score
_DROP, _CHANGED = attrgetter("task_drop"), attrgetter("changed")     # task points lost, or % of samples read otherwise


def _alone(layer: QuantLayer, keys: tuple[str, ...], evaluate: Evaluate, full: Score,
           cost: Cost = _DROP) -> tuple[Score, float, float | None]:
    score = evaluate(_alone_skip(layer, keys))
    return score, score.error, _points(cost(score))


def _all_but(layer: QuantLayer, keys: tuple[str, ...], evaluate: Evaluate, full: Score,
             cost: Cost = _DROP) -> tuple[Score, float, float | None]:
    score = evaluate(_all_but_skip(layer, keys))
    left, whole = cost(score), cost(full)
    gained = None if left is None or whole is None else whole - left
    return score, full.error - score.error, _points(gained)


_SKIPS = {"alone": _alone_skip, "all-but": _all_but_skip}


def sensitivity_skips(layers: Sequence[QuantLayer], method: str = "alone") -> list[tuple[str, ...]]:
    """The float lists `analyse` will evaluate, one per skippable layer in program order: independent runs, which
    the search calibrates ahead on its executor (none for `local`)."""
    if method not in _SKIPS:
        return []
    controllable = [layer for layer in layers if layer.key]
    keys = tuple(layer.key for layer in controllable)
    return [_SKIPS[method](layer, keys) for layer in controllable]


LOCAL = "local"      # measured in one pass by quantize/local.py, not through evaluate(skip)

# method -> (what is measured, how) ; the value ranks layers: higher = more sensitive
SENSITIVITY_METHODS: dict[str, tuple[str, Callable | None]] = {
    "alone": ("error with only this layer in int8", _alone),
    "all-but": ("error removed by keeping only this layer in float", _all_but),
    LOCAL: ("noise/signal of this layer's own output in int8, on FP32 inputs", None),
}


@dataclass(frozen=True)
class LayerSensitivity:
    layer: QuantLayer
    score: Score          # the measured candidate (see the method)
    value: float          # the method's error: higher = more sensitive
    rank: int             # 1 = most sensitive
    points: float | None = None   # points the layer costs by the method (alone: its drop, or the % of samples it
    #                               changes with a max_changed budget), None without truth


def analyse(layers: Sequence[QuantLayer], evaluate: Evaluate, full: Score, method: str = "alone",
            rank_by: str = "task", changed: bool = False) -> tuple[LayerSensitivity, ...]:
    """Measure every skippable layer with `method`; most sensitive first (`rank`), ties in program order.

    `changed` (a budget with `max_changed`): a layer's points are the samples whose task result it changes from
    FP32's (a line read differently, right or wrong), not the task points it loses against the truth."""
    if method not in SENSITIVITY_METHODS:
        raise ConfigError(f"sensitivity method {method!r} is unknown", f"use one of {', '.join(SENSITIVITY_METHODS)}")
    measure = SENSITIVITY_METHODS[method][1]
    if measure is None:
        raise ConfigError(f"sensitivity method {method!r} is not measured through candidates",
                          "rank with quantize.local.analyse_local, or use alone or all-but")
    controllable = [layer for layer in layers if layer.key]
    keys = tuple(layer.key for layer in controllable)
    measured, eta = [], Eta()
    for layer in controllable:
        score, value, points = measure(layer, keys, evaluate, full, _CHANGED if changed else _DROP)
        measured.append((layer, score, value, points))
        log.info("sensitivity %d/%d %s %s (%s): %.4g%s, %s", len(measured), len(controllable), method, layer.name,
                 layer.op_type, value, "" if points is None else f" ({points:.4g} points)",
                 eta.tick(len(controllable) - len(measured)))
    return rank(measured, rank_by)


def rank(measured: Sequence[tuple], rank_by: str = "task") -> tuple[LayerSensitivity, ...]:
    """Most sensitive first; equal values keep program order, so the ranking is deterministic.

    `measured`: (layer, score, value) or (layer, score, value, task points). With `rank_by` "task" the layers that
    cost task points come first, most points first, and the method's error orders equal points: the budget is in
    task points, and the error (output cosine) can rank a layer that alone breaks 3 lines of 100 ninth (PP-OCRv5
    rec's conv2d_141). A small sample moves the points in coarse steps; the error still orders within each step.
    "error" orders by the error alone."""
    if rank_by not in RANK_BY:
        raise ConfigError(f"rank_by {rank_by!r} is unknown", f"use one of {', '.join(RANK_BY)}")
    rows = [tuple(item) + (None,) * (4 - len(item)) for item in measured]

    def key(row):
        layer, _, value, points = row
        by_points = -_points(points) if rank_by == "task" and points is not None and not math.isnan(points) else 0.0
        return by_points, (-value if not math.isnan(value) else -math.inf), layer.index

    ordered = sorted(rows, key=key)
    return tuple(LayerSensitivity(layer, score, value, i + 1, points)
                 for i, (layer, score, value, points) in enumerate(ordered))


# ---------------------------------------------------------------- fallback


@dataclass(frozen=True)
class Step:
    skip: tuple[str, ...]
    score: Score
    holds: bool
    phase: str            # "start", "add" or "prune"


@dataclass(frozen=True)
class Fallback:
    skip: tuple[str, ...]         # layers kept in float (most sensitive first)
    score: Score                  # the chosen candidate's score
    holds: bool
    steps: tuple[Step, ...]


def fallback(ranked_keys: Sequence[str], evaluate: Evaluate, budget: Budget, max_float: int,
             start: Score | None = None) -> Fallback:
    """Add layers to the float list in ranked order until the budget holds; then drop the ones it does not need.

    Greedy and linear (k + 1 calibrations to reach k float layers) because k is
    usually small and the budget is not monotone in k; the prune pass tries to put
    each earlier layer back into int8, least sensitive first.
    """
    steps: list[Step] = []
    eta, limit = Eta(), min(max_float, len(ranked_keys))

    def trial(skip: tuple[str, ...], phase: str, prunes_left: int = 0) -> Step:
        score = evaluate(skip)
        step = Step(skip, score, budget.holds(score), phase)
        steps.append(step)
        left = prunes_left if phase == "prune" else _trials_left(step, limit)
        log.info("fallback %s %s: drop %.4g%s (%s); %s", phase, list(skip), budget.drop(score),
                 budget.changed_text(score), "holds" if step.holds else "misses", eta.tick(left, at_most=True))
        return step

    current = Step((), start, budget.holds(start), "start") if start is not None else None
    if current is not None:
        steps.append(current)
    else:
        current = trial((), "start")
    best = current
    while not current.holds and len(current.skip) < limit:
        current = trial(current.skip + (ranked_keys[len(current.skip)],), "add")
        if budget.excess(current.score) < budget.excess(best.score):
            best = current
    if not current.holds:
        return Fallback(best.skip, best.score, False, tuple(steps))
    kept = current
    earlier = list(reversed(current.skip[:-1]))      # the last one added was needed with all the others
    for position, key in enumerate(earlier):
        candidate = tuple(k for k in kept.skip if k != key)
        attempt = trial(candidate, "prune", len(earlier) - position - 1)
        if attempt.holds:
            kept = attempt
    return Fallback(kept.skip, kept.score, True, tuple(steps))


def _trials_left(step: Step, limit: int) -> int:
    """After a start or add trial, the most trials the fallback can still make: the adds up to `limit` float
    layers, then one prune trial per float layer but the last one added."""
    if step.holds:
        return max(0, len(step.skip) - 1)
    adds = limit - len(step.skip)
    return adds + limit - 1 if adds > 0 else 0


def max_float_layers(layer_count: int, fraction: float) -> int:
    """How many layers the loop may keep in float: never all of them (that is fp32, not int8)."""
    if not 0.0 <= fraction <= 1.0:
        raise ConfigError(f"max_float_fraction {fraction!r} is outside [0, 1]", "give a fraction such as 0.5")
    return max(0, min(layer_count - 1, int(math.floor(fraction * layer_count + 1e-9))))


__all__ = ["QuantLayer", "quantizable_layers", "Score", "Budget", "Evaluator", "analyse", "rank", "LayerSensitivity",
           "fallback", "Fallback", "Step", "max_float_layers", "SENSITIVITY_METHODS", "COSINE_DROP", "LOCAL"]
