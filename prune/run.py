"""`edgekit prune`: prune a model into a stage folder that `edgekit build --model FOLDER` takes.

    OUT/<name>/pruned/model.pdmodel, model.pdiparams   the pruned inference model
                      prune.json                        the report (per layer, FLOPs, params, metric, .nb sizes)
                      manifest.json                     sha256 + size of each file, versions, the resolved config

Written to a staging folder and renamed into place, like a bundle.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Mapping

import numpy as np

from edgekit.contracts import files as contracts
from edgekit.core import atomic
from edgekit.model.artifacts import StaticModel, sha256_file
from edgekit.contracts.settings import BuildConfig
from edgekit.model.evalset import evaluation_set, synthetic
from edgekit.core.errors import BundleError

from edgekit.contracts.prune import PruneConfig
from .stage import PrunedModel, prune_factory_model, write_report


def prune_model(cfg: BuildConfig, prune_cfg: PruneConfig, work: Path) -> PrunedModel:
    """Either path, by what the model is: a factory (dygraph, fine-tunable) or an exported program (static).
    The metric is the task's, from the evaluation data's truth (as in `edgekit build`)."""
    if cfg.model.factory:
        return prune_factory_model(cfg.model, prune_cfg, work, evaluation_set(cfg, cfg.model.inputs))
    from edgekit.export import load_inference

    from .static import prune_inference_model

    (work / "source").mkdir(parents=True, exist_ok=True)
    static = load_inference(cfg.model, work / "source")
    return prune_inference_model(static, prune_cfg, work, evaluation_set(cfg, static.feeds))


def measure_nb(pruned: PrunedModel, work: Path, timeout: float,
               samples: Mapping[str, np.ndarray] | None = None) -> PrunedModel:
    """`pruned` with the ARM fp32 .nb size before and after in its report, each converted as a build converts it
    (`lite.convert_safe`: its rewrites are checked on `samples`, else on `evalset.synthetic` inputs)."""
    from edgekit.lite import convert_safe, read_header

    report = pruned.report
    for name, model in (("unpruned", pruned.unpruned), ("pruned", pruned.model)):
        if model is not None:
            drawn = dict(samples) if samples is not None else synthetic(model.feeds, 2).inputs
            lite = convert_safe(model, "arm", work / f"{name}.nb", work / f"rewrite-{name}", drawn, timeout=timeout,
                                target="arm64", precision="fp32")
            report = report.with_nb(name, read_header(lite.nb_file))
    return replace(pruned, report=report)


def prune_to_folder(cfg: BuildConfig, prune_cfg: PruneConfig) -> tuple[Path, PrunedModel]:
    from edgekit.core import versions

    destination = contracts.check_inside(cfg.out_dir, cfg.out_dir / cfg.model.name / "pruned", "the pruned model folder")
    with atomic.staging_dir(cfg.out_dir, ".edgekit-prune-") as work:
        pruned = prune_model(cfg, prune_cfg, work)
        (work / "nb").mkdir()
        pruned = measure_nb(pruned, work / "nb", cfg.tool_timeout)
        staging = work / "stage"
        staging.mkdir()
        for source, name in ((pruned.model.model_file, "model.pdmodel"), (pruned.model.params_file, "model.pdiparams")):
            shutil.copyfile(source, staging / name)
        write_report(pruned.report, staging, {"seconds": pruned.seconds, "model": cfg.model.name})
        files = {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in sorted(staging.iterdir())}
        manifest = {"schema": "edgekit.prune/1", "files": files, "versions": versions.collect(),
                    "config": dict(cfg.to_json(), prune=prune_cfg.to_json()),
                    "inputs": [{"name": f.name, "shape": list(f.shape), "dtype": f.dtype} for f in pruned.model.feeds],
                    "outputs": list(pruned.model.fetches), "report": pruned.report.to_json()}
        contracts.write_json(staging / contracts.MANIFEST, manifest)   # a pruned-model folder's own schema
        try:
            atomic.publish_dir(staging, destination)
        except OSError as exc:
            raise BundleError(f"cannot move the pruned model into {destination}: {exc.strerror}",
                              "pass a writable --out") from exc
    final = StaticModel(destination / "model.pdmodel", destination / "model.pdiparams", pruned.model.feeds,
                        pruned.model.fetches, pruned.model.origin, pruned.model.op_types)
    return destination, PrunedModel(final, None, pruned.report, pruned.seconds)
