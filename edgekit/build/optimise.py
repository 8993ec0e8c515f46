"""The `optimise` stage's passes: the FP32 program's model-to-model transforms, run by the pass manager
(edgekit/model/passes.py) over the program and the data that goes with it.

    engine    an exported model: its reference engine agrees with Paddle Inference (export/inference.py)
    geometry  PaddleDetection's im_shape/scale_factor inputs written into the graph (export/geometry.py)
    nms       an NMS op in the graph kept, or cut before it for the bundle's NMS (edgekit/verify/nms.py); a Paddle 3
              source cut so takes its reference again from Paddle 3, at the NMS op's inputs (export/pir.py)
    fold      conv affine chains and decomposed activations folded, used only if it computes the same (export/fold.py)

Each pass returns the program, its check against its input, and what the manifest records; the stage turns the
records into the build record's `geometry`, `nms` and `folding` entries and keeps them all in `passes`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

import numpy as np

from edgekit.contracts.settings import BuildConfig
from edgekit.core.errors import ConversionError
from edgekit.core.tables import TARGETS
from edgekit.model.artifacts import StaticModel
from edgekit.model.data import Samples, geometry_rows
from edgekit.model.evalset import EvalSet
from edgekit.model.passes import Pass, PassRecord, PassResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """The program and the data that goes with it, as the optimise passes hand them on."""

    static: StaticModel
    evaluation: EvalSet
    calibration: Samples | None
    bound: tuple[tuple[str, tuple[float, ...]], ...] = ()   # geometry inputs written into the graph, with their values
    reference: tuple[np.ndarray, ...] | None = None          # a Paddle 3 source's reference, taken again after a cut

    def probe(self, count: int = 8) -> dict:
        return dict(self.evaluation.samples.head(count).inputs)


def layout(cfg: BuildConfig) -> str:
    return cfg.data.preprocess.layout if cfg.data.preprocess is not None else "NCHW"


def engine_pass() -> Pass[Prepared]:
    from edgekit.export.inference import ENGINE_REFUSAL, cross_check

    def run(p: Prepared) -> PassResult[Prepared]:
        found = cross_check(p.static, p.probe())
        return PassResult(replace(p, static=found.model), found.check)

    error, hint = ENGINE_REFUSAL
    return Pass("engine", run, error=error, hint=hint)


def geometry_pass(work: Path, cfg: BuildConfig) -> Pass[Prepared]:
    """The same for every source: a Paddle 2 or Paddle 3 program (Paddle 3's reference was taken fed the values the
    pass writes in) and an ONNX import (the import-metric stage feeds ONNX Runtime the values the pass wrote in)."""
    from edgekit.export import geometry

    def run(p: Prepared) -> PassResult[Prepared]:
        names = geometry.bound_feeds(p.static.feeds)
        if not names:
            return PassResult(p)
        found = geometry.bind(p.static, names, work / "geometry", p.probe(), layout(cfg))
        log.info("bound %s into the graph as %s", ", ".join(names), found.facts["bound"])
        (image,) = [f.name for f in found.model.feeds]
        if p.calibration is not None:     # calibrated as the evaluation runs: with the values written in
            geometry.check_fed(names, dict(p.calibration.inputs), image, layout(cfg), "calibration")
        evaluation = EvalSet(p.evaluation.samples.without(names), p.evaluation.task, p.evaluation.truth)
        calibration = p.calibration.without(names) if p.calibration is not None else None
        bound = tuple((n, tuple(v)) for n, v in found.facts["bound"].items())
        return PassResult(replace(p, static=found.model, evaluation=evaluation, calibration=calibration, bound=bound),
                          found.check, found.facts)

    return Pass("geometry", run, error=ConversionError,
                hint="report the model with this message: it cannot be bound safely")


def nms_pass(work: Path, cfg: BuildConfig, paddle3: Mapping | None) -> Pass[Prepared]:
    """`paddle3`: a Paddle 3 source's translation report (its reference is Paddle 3's own inference of the source,
    taken before this pass: a kept op leaves it as it is; a cut takes it again at the NMS op's inputs)."""
    from edgekit.lite.nms import NMS_OPS
    from edgekit.verify import nms

    abi = TARGETS[cfg.target].emulation

    def emulator():
        from edgekit.core.errors import EmulationUnavailable
        from edgekit.verify.emulator import Emulator

        if not cfg.emulation.enabled or abi is None:
            raise EmulationUnavailable("tier C is off for this build (--no-emulation or no ARM target)",
                                       "build with an ARM runtime (EDGEKIT_LITE_ARM) to let tier C check the NMS op")
        return Emulator.prepare(abi, cfg.emulation, cfg.tool_timeout)

    def run(p: Prepared) -> PassResult[Prepared]:
        if not any(t in NMS_OPS for t in p.static.op_types):
            return PassResult(p)
        static, task, entry = nms.decide(p.static, p.evaluation, TARGETS[cfg.target].opt_places, work / "nms",
                                         cfg.tool_timeout, emulator, cfg.model.nms)
        evaluation = EvalSet(p.evaluation.samples, task, p.evaluation.truth)
        reference = p.reference
        if paddle3 is not None and not entry["kept"]:
            reference, entry["paddle3_reference"] = _paddle3_cut_reference(p, static, paddle3, entry["op"], work, cfg)
        return PassResult(replace(p, static=static, evaluation=evaluation, reference=reference), nms.as_check(entry),
                          entry)

    return Pass("nms", run, error=ConversionError)


def _paddle3_cut_reference(p: Prepared, cut: StaticModel, report: Mapping, op_type: str, work: Path,
                           cfg: BuildConfig) -> tuple[tuple[np.ndarray, ...], dict]:
    """Paddle 3's boxes and scores at the source's NMS op on the evaluation set, the geometry inputs fed the values
    the geometry pass wrote into the graph (the source program still reads them)."""
    from edgekit.export.pir import reference_at_cut

    inputs = dict(p.evaluation.samples.inputs)
    count = len(next(iter(inputs.values())))
    inputs.update(geometry_rows(dict(p.bound), count))
    outputs, check = reference_at_cut(cut, report, inputs, op_type, work / "nms" / "paddle3-reference", cfg.tool_timeout)
    log.info("the cut program's reference: Paddle 3 on the source up to %s (translation max abs %.3g)", op_type,
             check["max_abs"])
    return tuple(outputs), check


def fold_pass(work: Path) -> Pass[Prepared]:
    from edgekit.export import fold

    def run(p: Prepared) -> PassResult[Prepared]:
        found = fold.fold_program(p.static, work / "folded")
        if found is None:
            return PassResult(p)
        folded, report = found
        check = fold.check(p.static, folded, p.probe())
        if check.passed:
            log.info("folded %d conv chain(s), %s: %d -> %d ops", report["conv_chains_folded"], report["activations"],
                     report["ops"]["before"], report["ops"]["after"])
        return PassResult(replace(p, static=folded), check, report)

    return Pass("fold", run, optional=True)


def folding_entry(record: PassRecord | None) -> dict | None:
    """The manifest's `folding` entry from the fold pass's record (None: folding is off for this build)."""
    if record is None:
        return None
    if not record.changed:
        return {"applied": False, "reason": "nothing to fold"}
    entry = dict(record.facts or {}, check=record.check.to_json())
    if record.kept:
        return dict(entry, applied=True)
    return dict(entry, applied=False, reason=f"check failed on {record.check.failure.output}")
