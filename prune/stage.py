"""Stage `prune`, dygraph side: a factory model -> pruned, fine-tuned, exported `PrunedModel`.

factory + weights -> analyse -> choose ratios -> prune (shapes verified) -> fine-tune hook
-> export (checked against the pruned dynamic model), with the task metric measured
before pruning, after pruning and after fine-tuning on the evaluation data.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgekit.model.artifacts import StaticModel
from edgekit.contracts.settings import ModelConfig
from edgekit.model.data import Samples, run_lines
from edgekit.core.errors import ConfigError
from edgekit.model.evalset import EvalSet, synthetic
from edgekit.model.parity import Metric, task_metric
from edgekit.model.runners import run_batched

from edgekit.contracts.prune import Choice, PruneConfig
from .report import PruneReport
from .sensitivity import samples_digest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrunedModel:
    model: StaticModel                 # the pruned (and fine-tuned) program
    unpruned: StaticModel | None       # the same model exported unpruned, for size and metric comparisons
    report: PruneReport
    seconds: dict[str, float]          # step -> seconds


def _outputs(layer, samples: Samples, batch: int = 128) -> list[np.ndarray]:
    """The dynamic-graph model's outputs (the reference the pruning metric is taken against); text lines in width
    groups (`run_lines`), as every other stage reads them."""
    import paddle

    (name,) = samples.inputs

    def run_batch(feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        with paddle.no_grad():
            out = layer(paddle.to_tensor(feed[name]))
        return [t.numpy() for t in (out if isinstance(out, (list, tuple)) else [out])]

    return run_lines(lambda inputs: run_batched(run_batch, inputs, batch), samples)


def write_report(report: PruneReport, folder: Path, extra: dict | None = None) -> Path:
    path = folder / "prune.json"
    path.write_text(json.dumps(dict(report.to_json(), **(extra or {})), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _sensitivity_inputs(layer, evaluation: EvalSet, count: int):
    """(evaluate, metric, samples, digest) on `count` evaluation samples spread over the set."""
    sample = evaluation.spread(count)
    metric = task_metric(_outputs(layer, sample.samples), sample.task, sample.truth)
    return (lambda: metric.score(_outputs(layer, sample.samples))), metric, len(sample), samples_digest(sample)


def prune_factory_model(model_cfg: ModelConfig, cfg: PruneConfig, out_dir: Path, evaluation: EvalSet | None,
                        unpruned: StaticModel | None = None) -> PrunedModel:
    """Prune a `package.module:factory` model; `evaluation` (truth optional) gives the task metric.

    `unpruned`: the factory's model as already exported (the build's export stage); exported here otherwise.
    """
    import paddle

    from edgekit.export.dygraph import build_layer

    from .dygraph import prune_layer
    from .export import export_layer
    from .finetune import finetune

    if len(model_cfg.inputs) != 1:
        raise ConfigError(f"pruning supports single-input models; {model_cfg.name} has {len(model_cfg.inputs)} inputs",
                          "build without --prune")
    if evaluation is None and cfg.is_target and cfg.choice(False) is Choice.sensitivity:
        raise ConfigError("a sensitivity analysis needs evaluation data", "pass --eval, or use [prune] choose = \"uniform\"")
    seconds: dict = {}
    paddle.disable_static()     # a reference runner earlier in the process may have left static mode on
    layer = build_layer(model_cfg)
    check = evaluation.samples.head(8) if evaluation is not None else synthetic(model_cfg.inputs, 4)
    if unpruned is None:
        start = time.monotonic()
        (out_dir / "unpruned").mkdir(parents=True, exist_ok=True)
        unpruned = export_layer(layer, model_cfg.inputs, out_dir / "unpruned", dict(check.inputs), "the unpruned model")
        seconds["export unpruned"] = round(time.monotonic() - start, 3)

    metric: Metric | None = None
    values: dict[str, float] = {}
    if evaluation is not None:
        reference = _outputs(layer, evaluation.samples)
        metric = task_metric(reference, evaluation.task, evaluation.truth)
        values["unpruned"] = metric.score(reference)
    start = time.monotonic()
    pruned = prune_layer(layer, model_cfg.inputs[0].concrete(1), cfg,
                         _sensitivity_inputs(layer, evaluation, cfg.sensitivity_samples) if evaluation is not None else None)
    seconds["prune"] = round(time.monotonic() - start, 3)
    report = pruned.report
    if metric is not None:
        values["pruned"] = metric.score(_outputs(layer, evaluation.samples))
    if cfg.finetune and cfg.epochs > 0:
        layer, took = finetune(layer, cfg.finetune, cfg.epochs)
        seconds["fine-tune"] = round(took, 3)
        if metric is not None:
            values["fine-tuned"] = metric.score(_outputs(layer, evaluation.samples))
    elif cfg.finetune is None:
        report.notes.append("no fine-tuning (--finetune not given): pruned weights are used as they are")
    if metric is not None:
        report.metric_name, report.metric = metric.name, values
        report.notes.append(f"metric on {len(evaluation)} evaluation samples ({evaluation.samples.source})")
        report.check_budget(cfg.budget)
    start = time.monotonic()
    (out_dir / "pruned").mkdir(parents=True, exist_ok=True)
    model = export_layer(layer, model_cfg.inputs, out_dir / "pruned", dict(check.inputs), "the pruned model")
    seconds["export pruned"] = round(time.monotonic() - start, 3)
    write_report(report, out_dir / "pruned", {"seconds": seconds, "model": model_cfg.name})
    return PrunedModel(model, unpruned, report, seconds)

