"""Filter pruning of a dynamic-graph model with PaddleSlim's L1-norm / FPGM filter pruners.

`prune_layer` analyses the model (PaddleSlim's collections: which convs are coupled,
including through residual adds), decides the ratios (given, or searched for a FLOPs /
parameter target), prunes in place, and then *measures* every conv's weight shape:
a plan that should have removed filters but left a shape unchanged is an error,
never a silent no-op.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from edgekit.model.data import array_digest

from .groups import groups_from, tied_convs, unreachable
from edgekit.contracts.prune import CRITERIA, Choice, Criterion, Goal, PruneConfig
from .errors import PruneError
from .plan import Analysis, Conv, bisect, classify, explicit_ratios, filter_scores, pruned_mask, ratios_at, verify
from .quiet import quiet_paddleslim
from .report import PruneReport, layer_rows
from edgekit.model.parity import Metric

from .sensitivity import GRID, Sensitivity, cache_key, cached, measure

if TYPE_CHECKING:
    import paddle

log = logging.getLogger(__name__)


@dataclass
class PrunedLayer:
    layer: paddle.nn.Layer         # the input object, pruned in place
    analysis: Analysis
    ratios: dict[str, float]       # master param name -> ratio applied
    report: PruneReport


def _pruner_class(criterion: Criterion):
    """PaddleSlim's pruner for the criterion, ranking a residual-tied group on all of its convs."""
    import paddleslim.dygraph as slim

    base = getattr(slim, CRITERIA[criterion].dygraph_pruner)

    class TiedAwarePruner(base):
        def cal_mask(self, pruned_ratio, collection, num_head=-1):
            tied = tied_convs(collection)
            if len(tied) < 2:
                return super().cal_mask(pruned_ratio, collection, num_head=num_head)
            return pruned_mask(filter_scores(criterion, [collection.values[n] for n in tied]), pruned_ratio)

    return TiedAwarePruner


def _convs(layer) -> dict[str, Conv]:
    import paddle

    convs = {}
    for name, sub in layer.named_sublayers():
        if isinstance(sub, paddle.nn.Conv2D) and sub.weight is not None:
            w = sub.weight
            convs[w.name] = Conv(w.name, name, int(w.shape[0]), int(sub._groups), int(sub._groups) * int(w.shape[1]))
    return convs


def analyse(layer, shape: Sequence[int], criterion: Criterion, min_filters: int):
    """(pruner, analysis) for a model in eval mode; `shape` is one concrete input shape."""
    import paddle

    paddle.disable_static()
    layer.eval()
    import paddleslim.dygraph  # noqa: F401  (its loggers must exist before they are quietened)

    with quiet_paddleslim():
        pruner = _pruner_class(criterion)(layer, list(shape))
        convs = _convs(layer)
        groups = groups_from(pruner.collections, convs)
        in_groups = {n for g in groups for n in (g.master,) + g.tied + g.depthwise}
        orphans = [p for p, c in convs.items() if p not in in_groups and not c.depthwise]
        reasons = {}
        if orphans:
            from paddleslim.core import GraphWrapper, dygraph2program

            reasons = unreachable(GraphWrapper(dygraph2program(layer, inputs=[list(shape)])), orphans)
            paddle.disable_static()
    return pruner, classify(convs, groups, min_filters, reasons)


def flops_and_params(layer, shape: Sequence[int]) -> tuple[float, int]:
    """Multiply-adds of conv and fc layers (PaddleSlim's count) and the number of parameter values."""
    from paddleslim.analysis import dygraph_flops

    with quiet_paddleslim():
        flops = float(dygraph_flops(layer, [list(shape)], only_conv=True))
    params = int(sum(int(np.prod(p.shape)) for p in layer.parameters()))
    return flops, params


def _filters(layer) -> dict[str, int]:
    return {c.param: c.filters for c in _convs(layer).values()}


def _apply(pruner, ratios: dict[str, float]):
    with quiet_paddleslim():
        return pruner.prune_vars(dict(ratios), 0)


def _reduction(pruner, layer, shape, goal: Goal, base: tuple[float, int]) -> Callable[[dict[str, float]], float]:
    def measure_ratios(ratios: dict[str, float]) -> float:
        if not ratios:
            return 0.0
        plan = _apply(pruner, ratios)
        try:
            flops, params = flops_and_params(layer, shape)
        finally:
            plan.restore(layer)
        return 1.0 - (flops / base[0] if goal is Goal.flops else params / base[1])
    return measure_ratios


def model_digest(layer) -> str:
    """Structure and weights of the unpruned model: the sensitivity cache's model key."""
    weights = array_digest({name: value.numpy() for name, value in layer.state_dict().items()})
    return hashlib.sha256(f"{type(layer).__qualname__}:{weights}".encode()).hexdigest()


def layer_sensitivity(pruner, layer, analysis: Analysis, evaluate: Callable[[], float], metric: Metric, samples: int,
                      samples_digest: str, cfg: PruneConfig) -> Sensitivity:
    """Per-group sensitivity, keyed by structured layer name (parameter names change from run to run)."""
    masters = {analysis.convs[g.master].layer: g.master for g in analysis.groups}
    grid = tuple(r for r in GRID if r <= cfg.max_ratio + 1e-9)

    def prune_one(layer_name: str, ratio: float):
        plan = _apply(pruner, {masters[layer_name]: ratio})
        return lambda: plan.restore(layer)

    key = cache_key(model_digest(layer), samples_digest, cfg.criterion.value, metric.name, list(masters), grid)
    return cached(cfg.cache_dir, key, samples, metric.name, lambda: measure(list(masters), prune_one, evaluate, grid))


def choose_ratios(pruner, layer, shape, analysis: Analysis, cfg: PruneConfig, base: tuple[float, int],
                  sensitivity: Callable[[], Sensitivity] | None) -> tuple[dict[str, float], str, Sensitivity | None]:
    if not cfg.is_target:
        ratios = explicit_ratios(cfg, analysis)
        return ratios, cfg.describe(), None
    reduction = _reduction(pruner, layer, shape, cfg.goal, base)
    masters = [g.master for g in analysis.groups]
    if sensitivity is None:
        ratio, achieved = bisect(lambda r: reduction({m: r for m in masters}), cfg.reduction, cfg.max_ratio)
        return ({m: ratio for m in masters},
                f"{cfg.reduction * 100:g} % fewer {cfg.goal.value}: one ratio {ratio:.3f} for every prunable layer "
                f"(bisection on measured {cfg.goal.value}: -{achieved * 100:.1f} %)", None)
    sens = sensitivity()
    by_layer = {analysis.convs[m].layer: m for m in masters}

    def at(threshold: float) -> dict[str, float]:
        return {by_layer[k]: v for k, v in ratios_at(sens.curves, threshold, cfg.max_ratio).items()}

    top = max((l for c in sens.curves.values() for l in c.values()), default=0.0)
    threshold, achieved = bisect(lambda t: reduction(at(t)), cfg.reduction, max(top, 1e-6) + 1e-6,
                                 tol=1e-3 * max(top, 1.0))
    how = (f"{cfg.reduction * 100:g} % fewer {cfg.goal.value}: per-layer ratios from sensitivity "
           f"(each layer alone loses <= {threshold:.2f} {sens.metric}; measured -{achieved * 100:.1f} %)")
    return at(threshold), how, sens


def prune_layer(layer, shape: Sequence[int], cfg: PruneConfig,
                sensitivity_inputs: tuple[Callable[[], float], Metric, int, str] | None = None) -> PrunedLayer:
    """Prune `layer` in place. `sensitivity_inputs` = (evaluate, metric, samples, samples digest) when
    evaluation data is available (needed for Choice.sensitivity)."""
    import paddle

    pruner, analysis = analyse(layer, shape, cfg.criterion, cfg.min_filters)
    if not analysis.groups:
        reasons = "; ".join(f"{s.layer}: {s.reason}" for s in analysis.skipped[:4])
        raise PruneError(f"no conv of this model can be pruned ({reasons or 'it has no Conv2D layers'})",
                         "pruning removes conv filters; lower [prune] min_filters if the layers are only small")
    base = flops_and_params(layer, shape)
    before = _filters(layer)
    sens_fn = None
    if sensitivity_inputs is not None and cfg.is_target and cfg.choice(True) is Choice.sensitivity:
        evaluate, metric, samples, digest = sensitivity_inputs

        def sens_fn() -> Sensitivity:
            return layer_sensitivity(pruner, layer, analysis, evaluate, metric, samples, digest, cfg)
    ratios, how, sens = choose_ratios(pruner, layer, shape, analysis, cfg, base, sens_fn)
    _apply(pruner, ratios)
    # the backups PaddleSlim keeps for restore() would otherwise be exported as extra parameters
    for sub in layer.sublayers(include_self=True):
        for name in [n for n in sub._buffers if n.endswith("_backup")]:
            del sub._buffers[name]
    after = _filters(layer)
    verify(analysis, ratios, before, after)
    with paddle.no_grad():
        layer(paddle.zeros(list(shape), "float32"))     # the pruned graph still runs
    flops, params = flops_and_params(layer, shape)
    report = PruneReport(cfg.criterion.value, how, layer_rows(analysis, ratios, before, after),
                         {"before": base[0], "after": flops}, {"before": base[1], "after": params},
                         sensitivity=sens.to_json() if sens else None)
    log.info("pruned: FLOPs -%.1f %%, parameters -%.1f %%", report.flops_reduction * 100, report.params_reduction * 100)
    return PrunedLayer(layer, analysis, ratios, report)
