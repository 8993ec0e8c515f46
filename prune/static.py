"""Stage `prune`, static side: an exported inference model (no training code) -> pruned `PrunedModel`.

Without training code there is no fine-tuning, so the ratios matter more: for a
FLOPs / parameter target they come from a per-layer sensitivity analysis on a sample
of the evaluation data (cached), and the pruned model's metric is checked against
the accuracy budget. PaddleSlim's static `Pruner` prunes the loaded program and its
scope; every conv's weight shape is then read back and compared with the plan.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Mapping

import numpy as np

from edgekit.model.artifacts import StaticModel, sha256_file
from edgekit.core.errors import ConfigError
from edgekit.model.data import Samples, run_lines
from edgekit.model.evalset import EvalSet
from edgekit.model.parity import task_metric
from edgekit.model.runners import run_batched

from .groups import CONV_OPS, groups_from, unreachable
from edgekit.contracts.prune import CRITERIA, Choice, PruneConfig
from .errors import PruneError
from .plan import Analysis, Conv, bisect, classify, explicit_ratios, predicted_cost, ratios_at, verify
from .quiet import quiet_paddleslim
from .report import PruneReport, layer_rows
from .sensitivity import GRID, Sensitivity, cache_key, cached, measure, samples_digest
from .stage import PrunedModel, write_report

log = logging.getLogger(__name__)


class _Loaded:
    """The program, its scope and an executor; `run` feeds a (possibly pruned) clone of the program."""

    def __init__(self, model: StaticModel) -> None:
        import paddle

        from edgekit.export.runner import Batches

        paddle.enable_static()
        self.paddle = paddle
        self.model = model
        self.place = paddle.CPUPlace()
        self.exe = paddle.static.Executor(self.place)
        self.scope = paddle.static.Scope()
        with paddle.static.scope_guard(self.scope):
            self.program, self.feed_names, fetch_vars = paddle.static.load_inference_model(
                str(model.model_file.with_suffix("")), self.exe)
        self.fetch_names = [v.name for v in fetch_vars]
        self.batches = Batches(model, self.program)     # the memory rule's batch per input size (export/runner.py)

    def run(self, program, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Every output over all samples (the masks of a sensitivity trial live in the scope)."""
        def run_batch(feed: dict[str, np.ndarray]) -> list[np.ndarray]:
            return [np.array(out, copy=True) for out in self.exe.run(program, feed=feed, fetch_list=self.fetch_names)]

        with self.paddle.static.scope_guard(self.scope):
            return run_batched(run_batch, inputs, self.batches(inputs))

    def outputs(self, samples: Samples) -> list[np.ndarray]:
        """The program's outputs on `samples` as every other stage reads them: text lines in width groups
        (`run_lines`), not padded to the widest line."""
        return run_lines(lambda inputs: self.run(self.program, inputs), samples)


def _convs(program, sources: Mapping | None) -> dict[str, Conv]:
    block = program.global_block()
    convs = {}
    for op in block.ops:
        if op.type in CONV_OPS and op.input("Filter"):
            name = op.input("Filter")[0]
            shape = block.var(name).shape
            in_shape = block.var(op.input("Input")[0]).shape
            groups = int(op.attr("groups") or 1)
            source = (sources or {}).get(op.output("Output")[0], {}).get("source", "")
            convs[name] = Conv(name, name if not source else f"{name} ({source})", int(shape[0]), groups,
                               int(in_shape[1]) if len(in_shape) == 4 and in_shape[1] > 0 else groups * int(shape[1]))
    return convs


def analyse(loaded: _Loaded, min_filters: int):
    """(analysis, PaddleSlim collection per prunable master, graph)."""
    from paddleslim.core import GraphWrapper
    from paddleslim.prune import StaticPruningCollections

    convs = _convs(loaded.program, loaded.model.sources)
    with quiet_paddleslim():
        graph = GraphWrapper(loaded.program)
        collections = list(StaticPruningCollections(list(convs), graph, skip_leaves=True))
        groups = groups_from(collections, convs)
        in_groups = {n for g in groups for n in (g.master,) + g.tied + g.depthwise}
        orphans = [p for p, c in convs.items() if p not in in_groups and not c.depthwise]
        reasons = unreachable(graph, orphans) if orphans else {}
    analysis = classify(convs, groups, min_filters, reasons)
    by_master = {c.master_name: c for c in collections if c.master_name in {g.master for g in analysis.groups}}
    return analysis, by_master, graph


def _cost_model(program, collections: Mapping[str, object]):
    """Per-parameter FLOPs and sizes of the unpruned program, and which group cuts which axis of which parameter."""
    from paddleslim.analysis import flops

    with quiet_paddleslim():
        total, per_param = flops(program, detail=True)
    sizes = {v.name: float(np.prod(v.shape)) for v in program.list_vars() if v.persistable and v.name not in ("feed", "fetch")}
    touches: dict[str, dict[int, str]] = {}
    for master, collection in collections.items():
        for d in collection.all_pruning_details():
            if d.name in sizes:
                touches.setdefault(d.name, {}).setdefault(d.axis, master)
    return {"flops": (dict(per_param), float(total) - float(sum(per_param.values()))), "params": (sizes, 0.0)}, touches


def _selector(criterion):
    """PaddleSlim's default index selector, ranking a residual-tied group on all of its convs."""
    from paddleslim.prune.idx_selector import default_idx_selector

    from .groups import tied_convs

    def select(group, scores, ratios):
        tied = [n for n in tied_convs(group) if n in scores and 0 in scores[n]]
        if len(tied) > 1:
            scores = dict(scores)
            master = group.master["name"]
            # filter_scores normalises per conv; PaddleSlim's scores are per-conv already, so sum those normalised
            combined = sum(s / s.max() if s.max() > 0 else s for s in (np.asarray(scores[n][0], np.float64) for n in tied))
            scores[master] = {**scores[master], 0: combined}
        return default_idx_selector(group, scores, ratios)

    return select


def _prune(loaded: _Loaded, ratios: dict[str, float], criterion):
    """(pruned program clone, parameter backup) — the scope holds the pruned values until `_restore`."""
    from paddleslim.prune import Pruner

    with quiet_paddleslim(), loaded.paddle.static.scope_guard(loaded.scope):
        return Pruner(CRITERIA[criterion].static_name, _selector(criterion)).prune(
            loaded.program, loaded.scope, list(ratios), list(ratios.values()), loaded.place, only_graph=False,
            param_backup=True)[:2]


def _mask(loaded: _Loaded, graph, collection, ratio: float, criterion) -> dict:
    """Zero the filters `ratio` would remove — the conv rows, the batch-norm entries and the consumers' input
    columns — in the scope, without touching the program: numerically the same model as removing them (a zeroed
    batch norm outputs exactly 0), at a fraction of the cost of rebuilding the program for every trial."""
    from paddleslim.prune import Pruner
    from paddleslim.prune.criterion import CRITERION

    block = loaded.program.global_block()
    values = {n: np.array(loaded.scope.find_var(n).get_tensor()) for n in collection.variables()
              if block.has_var(n) and block.var(n).persistable and loaded.scope.find_var(n) is not None}
    scores = CRITERION.get(CRITERIA[criterion].static_name)(collection, values, graph)
    selected = Pruner()._transform(_selector(criterion)(collection, scores, {collection.master_name: ratio}))
    backup = {}
    for name, axis, pruned in selected:
        if name not in values or len(pruned) == 0:
            continue
        backup.setdefault(name, values[name])
        masked = np.array(loaded.scope.find_var(name).get_tensor())
        index = [slice(None)] * masked.ndim
        index[axis] = np.asarray(pruned, dtype=np.int64)
        masked[tuple(index)] = 0
        loaded.scope.find_var(name).get_tensor().set(masked, loaded.place)
    return backup


def _restore(loaded: _Loaded, backup: dict) -> None:
    for name, value in backup.items():
        loaded.scope.find_var(name).get_tensor().set(value, loaded.place)


def flops_and_params(program) -> tuple[float, int]:
    from paddleslim.analysis import flops

    block = program.global_block()
    for name in {n for op in block.ops if op.type in CONV_OPS for n in op.input("Input")}:
        if any(d <= 0 for d in block.var(name).shape[1:]):
            raise PruneError(f"conv input {name} has dynamic size {list(block.var(name).shape)}: FLOPs cannot be counted",
                             "export the model with fixed input height and width")
    params = sum(int(np.prod(v.shape)) for v in program.list_vars() if v.persistable and v.name not in ("feed", "fetch"))
    with quiet_paddleslim():
        return float(flops(program)), int(params)


def _filters(program) -> dict[str, int]:
    block = program.global_block()
    return {op.input("Filter")[0]: int(block.var(op.input("Filter")[0]).shape[0]) for op in block.ops
            if op.type in CONV_OPS and op.input("Filter")}


def prune_inference_model(model: StaticModel, cfg: PruneConfig, out_dir: Path, evaluation: EvalSet | None) -> PrunedModel:
    """Prune an exported model; `evaluation` (truth optional) drives sensitivity and the budget check."""
    import paddle

    from edgekit.export import StaticRunner
    from edgekit.export import program as prog

    if cfg.finetune:
        raise ConfigError("--finetune needs a factory model: an exported model has no training code to fine-tune",
                          "prune the package.module:factory model instead, or leave out --finetune")
    seconds: dict = {}
    loaded = _Loaded(model)
    analysis, collections, graph = analyse(loaded, cfg.min_filters)
    if not analysis.groups:
        reasons = "; ".join(f"{s.layer}: {s.reason}" for s in analysis.skipped[:4])
        raise PruneError(f"no conv of this model can be pruned ({reasons or 'it has no conv2d ops'})",
                         "pruning removes conv filters; lower [prune] min_filters if the layers are only small")
    base = flops_and_params(loaded.program)
    before = _filters(loaded.program)
    costs, touches = _cost_model(loaded.program, collections)
    metric, values, sens = None, {}, None
    if evaluation is not None:
        reference = loaded.outputs(evaluation.samples)
        metric = task_metric(reference, evaluation.task, evaluation.truth)
        values["unpruned"] = metric.score(reference)
    choice = cfg.choice(evaluation is not None)
    if cfg.is_target and choice is Choice.sensitivity and evaluation is None:
        raise PruneError("choosing per-layer ratios for an exported model needs evaluation data (sensitivity analysis)",
                         "pass --eval (ground truth gives the task metric; without it the output cosine is used), or "
                         "choose = \"uniform\"")

    per_param, fixed = costs[cfg.goal.value] if cfg.is_target else ({}, 0.0)
    unpruned_cost = predicted_cost(per_param, touches, before, {}, fixed)

    def reduction(ratios: dict[str, float]) -> float:
        """Predicted from the cost model (cheap enough to search with); the result is measured below."""
        return 1.0 - predicted_cost(per_param, touches, before, ratios, fixed) / unpruned_cost

    start = time.monotonic()
    masters = [g.master for g in analysis.groups]
    if not cfg.is_target:
        ratios, how = explicit_ratios(cfg, analysis), cfg.describe()
    elif choice is Choice.uniform:
        ratio, achieved = bisect(lambda r: reduction({m: r for m in masters}), cfg.reduction, cfg.max_ratio)
        ratios = {m: ratio for m in masters}
        how = (f"{cfg.reduction * 100:g} % fewer {cfg.goal.value}: one ratio {ratio:.3f} for every prunable layer "
               f"(predicted -{achieved * 100:.1f} %)")
    else:
        sens = _sensitivity(loaded, analysis, collections, graph, cfg, evaluation)
        top = max((l for c in sens.curves.values() for l in c.values()), default=0.0)
        threshold, achieved = bisect(lambda t: reduction(ratios_at(sens.curves, t, cfg.max_ratio)), cfg.reduction,
                                     max(top, 1e-6) + 1e-6, tol=1e-3 * max(top, 1.0))
        ratios = ratios_at(sens.curves, threshold, cfg.max_ratio)
        how = (f"{cfg.reduction * 100:g} % fewer {cfg.goal.value}: per-layer ratios from sensitivity (each layer alone "
               f"loses <= {threshold:.3g} {sens.metric}; predicted -{achieved * 100:.1f} %)")
    seconds["choose ratios"] = round(time.monotonic() - start, 3)

    pruned, _ = _prune(loaded, ratios, cfg.criterion)
    prefix = out_dir / "pruned" / "model"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    block = pruned.global_block()
    with paddle.static.scope_guard(loaded.scope):
        paddle.static.save_inference_model(str(prefix), [block.var(n) for n in loaded.feed_names],
                                           [block.var(n) for n in loaded.fetch_names], loaded.exe, program=pruned)
    for extra in prefix.parent.glob("model.pdiparams.info"):
        extra.unlink()
    saved = prog.parse_program(prefix.with_suffix(".pdmodel"))
    after = _filters(saved)
    verify(analysis, ratios, before, after)
    result = StaticModel(prefix.with_suffix(".pdmodel"), prefix.with_suffix(".pdiparams"), model.feeds, model.fetches,
                         model.origin, prog.op_types(saved))
    flops, params = flops_and_params(saved)
    report = PruneReport(cfg.criterion.value, how, layer_rows(analysis, ratios, before, after),
                         {"before": base[0], "after": flops}, {"before": base[1], "after": params},
                         sensitivity=sens.to_json() if sens else None)
    if cfg.is_target:
        measured = 1.0 - (flops / base[0] if cfg.goal.value == "flops" else params / base[1])
        if abs(measured - achieved) > 0.01:
            report.notes.append(f"predicted -{achieved * 100:.1f} % {cfg.goal.value}, measured -{measured * 100:.1f} %")
        if measured < cfg.reduction - 0.01:
            raise PruneError(f"the pruned model has {measured * 100:.1f} % fewer {cfg.goal.value}, short of the "
                             f"{cfg.reduction * 100:g} % asked", "report the model; give per-layer ratios as a workaround")
    if evaluation is not None:
        # the saved files, read back by the reference engine: what the next stages will get
        values["pruned"] = metric.score(run_lines(StaticRunner(result).run, evaluation.samples))
        report.metric_name, report.metric = metric.name, values
        report.notes.append(f"metric on {len(evaluation)} evaluation samples ({evaluation.samples.source}); no fine-tuning "
                            "(an exported model has no training code)")
        report.check_budget(cfg.budget)
    write_report(report, prefix.parent, {"seconds": seconds, "model": str(model.model_file)})
    return PrunedModel(result, model, report, seconds)


def _sensitivity(loaded: _Loaded, analysis: Analysis, collections: Mapping[str, object], graph, cfg: PruneConfig,
                 evaluation: EvalSet) -> Sensitivity:
    sample = evaluation.spread(cfg.sensitivity_samples)
    metric = task_metric(loaded.outputs(sample.samples), sample.task, sample.truth)
    grid = tuple(r for r in GRID if r <= cfg.max_ratio + 1e-9)

    def prune_one(master: str, ratio: float):
        backup = _mask(loaded, graph, collections[master], ratio, cfg.criterion)
        return lambda: _restore(loaded, backup)

    def evaluate() -> float:
        return metric.score(loaded.outputs(sample.samples))

    masters = [g.master for g in analysis.groups]
    digest = sha256_file(loaded.model.model_file) + (sha256_file(loaded.model.params_file) if loaded.model.params_file else "")
    key = cache_key(digest, samples_digest(sample), cfg.criterion.value, metric.name, masters, grid)
    with quiet_paddleslim():
        return cached(cfg.cache_dir, key, len(sample), metric.name, lambda: measure(masters, prune_one, evaluate, grid))
