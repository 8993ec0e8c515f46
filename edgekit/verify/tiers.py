"""The host's checks of a build, one function per tier; the gates themselves are `edgekit.model.parity`'s.

    tier A  the FP32 x86 twin .nb (Paddle-Lite's x86 kernels) vs the FP32 reference: `Tolerance`
    tier B  the reduced precision as simulated on the host vs FP32: the accuracy `Budget`
    tier C  the ARM model.nb itself under emulation (edgekit.verify.tier_c) vs FP32: the budget for
            reduced precisions, the tier-A tolerance for FP32, plus its agreement with tier B

Each returns a new `ParityReport`; the pipeline's `gates` stage decides what a failure
means (no bundle).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np

from edgekit.model import parity
from edgekit.model.artifacts import QuantizedModel, StaticModel
from edgekit.contracts.settings import BuildConfig, ParityGates
from edgekit.model.data import fit_outputs, run_lines
from edgekit.model.evalset import EvalSet
from edgekit.model.reports import Emulation
from edgekit.core.tables import Precision
from edgekit.tasks.base import Task


def comparable(static: StaticModel, reference: Sequence[np.ndarray], test: Sequence[np.ndarray],
               lines: bool = False) -> tuple:
    """The two engines' outputs as the statistics compare them: as they are, or for a graph that kept its NMS op
    (rows of all images + counts, lite/nms.py) the rows image by image, padded to the same count. `lines`: text
    lines run in width groups on different sets (a subset's outputs may end earlier: `fit_outputs`)."""
    if holds_nms(static):
        from edgekit.lite import nms

        return nms.comparable(reference, test)
    return fit_outputs(reference, test) if lines else (reference, test)


def holds_nms(static: StaticModel) -> bool:
    """The program kept an NMS op (lite/nms.py): its outputs are rows of all samples + a count per sample."""
    from edgekit.lite import nms

    return nms.holds_nms(static)


def pick(static: StaticModel, outputs: Sequence[np.ndarray], picks) -> list[np.ndarray]:
    """The outputs of samples `picks` (for a kept NMS graph: those images' rows and counts)."""
    if holds_nms(static):
        from edgekit.lite import nms

        return nms.take(outputs, picks)
    return [o[picks] for o in outputs]


def twin_tolerance(gates: ParityGates, task: Task | None) -> parity.Tolerance:
    """The FP32 gate of the x86 twin and of tier C: [parity] twin_max_abs when given, else the task's (a recogniser's
    softmax over thousands of tokens carries more float error than a classifier's logits), else 1e-4."""
    max_abs = gates.twin_max_abs if gates.twin_max_abs is not None else (task or Task).twin_max_abs
    return parity.Tolerance(max_abs, gates.twin_min_cosine)


def precision_budget(cfg: BuildConfig, evaluation: EvalSet) -> parity.Budget:
    """The budget of a reduced precision, in the task's primary metric with ground truth, else in output cosine.

    --max-drop when given; else the [parity] gates: `int8_max_top1_drop` (points of the
    task's primary metric: top-1, exact match, hmean, ...) or 1 - `int8_min_cosine`.
    """
    if cfg.quant.max_drop is not None:
        drop = cfg.quant.max_drop
    else:
        drop = cfg.gates.int8_max_top1_drop if evaluation.has_truth else 1.0 - cfg.gates.int8_min_cosine
    return parity.Budget.for_data(drop, evaluation.primary)


def search_budget(cfg: BuildConfig, evaluation: EvalSet) -> parity.Budget:
    """The INT8 search's budget: the gates' (`precision_budget`), plus `[quantize] max_changed` when given (the share
    of samples whose task result may differ from FP32's; the gates do not check it)."""
    return replace(precision_budget(cfg, evaluation), max_changed=cfg.quant.max_changed)


def reference_outputs(static: StaticModel, evaluation: EvalSet) -> tuple[np.ndarray, ...]:
    """The FP32 reference: `paddle.static.Executor` on the program (checked against a second engine earlier)."""
    from edgekit.export import StaticRunner

    return tuple(run_lines(StaticRunner(static).run, evaluation.samples))


def require_finite(static: StaticModel, reference: Sequence[np.ndarray]) -> None:
    for name, arr in zip(static.fetches, reference):
        if not np.isfinite(arr).all():
            raise parity.ParityError(f"the FP32 reference output {name!r} contains NaN or Inf",
                                     "the model itself is numerically broken on this data: check weights and preprocessing")


CONTROL_FLOW_OPS = ("conditional_block", "while")   # legacy ops that run a sub-block only when the data says so


def control_flow_note(op_counts: Mapping[str, int]) -> str | None:
    """The report's warning for a program whose blocks run depending on the data; None without control flow."""
    found = {op: int(op_counts.get(op, 0)) for op in CONTROL_FLOW_OPS if op_counts.get(op, 0)}
    if not found:
        return None
    total = sum(found.values())
    listed = ", ".join(f"{count} {op}" for op, count in found.items())
    return (f"control flow: the program holds {total} control-flow block{'s' if total != 1 else ''} ({listed}); "
            "the tiers cover only the branches the evaluation samples take, and say nothing about a branch no sample "
            "takes: give evaluation data that takes each one")


def program_op_counts(static: StaticModel) -> dict[str, int]:
    """How often each op occurs in the program, sub-blocks included."""
    from edgekit.export import program as prog

    counts: dict[str, int] = {}
    for block in prog.parse_program(static.model_file).blocks:
        for op in block.ops:
            counts[op.type] = counts.get(op.type, 0) + 1
    return counts


def start_report(static: StaticModel, evaluation: EvalSet, reference: Sequence[np.ndarray]) -> parity.ParityReport:
    report = parity.ParityReport(samples=len(evaluation), metric=evaluation.primary or "top1")
    notes = []
    if static.check:
        notes.append(f"reference engine checked: {static.check['engine']}, max abs {static.check['max_abs']:.3g} "
                     f"on {static.check['samples']} samples")
    if any(op in static.op_types for op in CONTROL_FLOW_OPS):   # here, not in tier_notes: this is where the program is
        notes.append(control_flow_note(program_op_counts(static)))
    metrics = {"fp32 reference": evaluation.evaluate(reference)} if evaluation.has_truth else None
    return report.extended(metrics=metrics, notes=notes)


TWIN_CRASH_HINT = ("opt converted an op that Paddle-Lite's runtime then stops on (the check named above); the ARM "
                   "model.nb may fail the same way on a device: report the model with this line")


def twin_process(nb_file, feed_names: Sequence[str], stage: str, per_shape: bool = False):
    """The build's x86 twin in a child process (lite/runtime.py: TwinProcess): a crash of Paddle-Lite's native code
    (an abort on a check, a segfault) fails `stage` with one line naming Lite's check, instead of ending the CLI with
    no word and the staging folder left behind. Use it as a context manager. `per_shape`: a predictor per input
    shape (text lines in width groups: a Lite x86 predictor run at one width reads another wrongly)."""
    from edgekit.core.errors import ConversionError
    from edgekit.lite.runtime import TwinProcess

    def crashed(how: str) -> ConversionError:
        return ConversionError(f"{stage}: Paddle-Lite's x86 runtime crashed running the x86 twin {nb_file.name} "
                               f"({how})", TWIN_CRASH_HINT)
    return TwinProcess(nb_file, feed_names, per_shape=per_shape, crashed=crashed)


def tier_a(report: parity.ParityReport, static: StaticModel, evaluation: EvalSet, reference: Sequence[np.ndarray],
           twin: Sequence[np.ndarray], gates: ParityGates) -> parity.ParityReport:
    subject = "x86 twin .nb vs reference"
    stats = parity.compare(*comparable(static, reference, twin), static.fetches)
    metrics = {"x86 twin .nb": evaluation.evaluate(twin)} if evaluation.has_truth else None
    return report.extended(checks=twin_tolerance(gates, evaluation.task).checks("A", subject, stats), tier="A", stats=stats, metrics=metrics)


WIDE_SAMPLES = 2            # evaluation samples re-run at max_width for a dynamic-width spec
GOLDEN_WIDE_SAMPLES = 1     # golden samples a dynamic-width bundle also carries at max_width: every replay runs them,
                            # and one 48x1280 FP32 PP-OCRv4 rec line takes ~30 s under qemu


def wide_feeds(inputs: Mapping[str, np.ndarray], spec, count: int = WIDE_SAMPLES) -> dict | None:
    """The first `count` samples padded on the right to max_width with pad_value, as `PreprocessSpec.apply` pads a
    line narrower than its tensor (tier A's run at max_width, and the bundle's golden group at that width); None
    when an input is not an image tensor at most max_width wide."""
    axis = 3 if spec.layout == "NCHW" else 2
    feeds = {}
    for name, x in inputs.items():
        x = np.asarray(x[:count], np.float32)
        if x.ndim != 4 or x.shape[axis] > spec.max_width:
            return None
        pad = [(0, 0)] * 4
        pad[axis] = (0, spec.max_width - x.shape[axis])
        feeds[name] = np.pad(x, pad, constant_values=np.float32(spec.pad_value))
    return feeds


def tier_a_wide(report: parity.ParityReport, static: StaticModel, twin_nb, evaluation: EvalSet, spec,
                gates: ParityGates) -> parity.ParityReport:
    """A dynamic-width spec (preprocess width_mode = "dynamic"): the evaluation tensors are resize[1] wide, so the
    first samples are padded to max_width (with pad_value, as a narrow line is) and the reference and a fresh twin
    predictor must run there too and agree within the tier-A tolerance. A model whose graph fixes the width (e.g.
    reshapes folded for one width by X2Paddle) is refused here, in one line, instead of aborting in Lite later."""
    from edgekit.core.errors import ParityError
    from edgekit.export import StaticRunner

    feeds = wide_feeds(evaluation.inputs, spec)
    if feeds is None:
        return report
    try:
        reference = StaticRunner(static).run(feeds)
    except Exception as exc:                       # Paddle's own shape checks: the graph is not width-free
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        why = next((line for line in lines if "InvalidArgument" in line), lines[-1])[:240]
        raise ParityError(f"preprocess width_mode dynamic: the model does not run at max_width {spec.max_width} "
                          f"({why})",
                          "export the model with a dynamic width (an ONNX model with one NCHW input gets its "
                          "computed reshape targets made width-free on import), or use width_mode = \"fixed\""
                          ) from None
    with twin_process(twin_nb, list(feeds), "tier-a") as runner:     # a fresh predictor: the width is new
        twin = runner.run(feeds)
    stats = parity.compare(*comparable(static, reference, twin), static.fetches)
    return report.extended(checks=twin_tolerance(gates, evaluation.task).checks("A", f"x86 twin .nb vs reference at width {spec.max_width}",
                                                               stats))


def tier_b(report: parity.ParityReport, cfg: BuildConfig, static: StaticModel, quantized: QuantizedModel,
           evaluation: EvalSet, reference: Sequence[np.ndarray]) -> tuple[parity.ParityReport, list[np.ndarray]]:
    """Returns the report and the simulated outputs (tier C reports how closely the ARM kernels follow them)."""
    from edgekit.export import StaticRunner

    precision = cfg.precision.value
    how = "PaddleSlim simulation" if cfg.precision is Precision.int8 else "weight-rounding simulation"
    simulated = run_lines(StaticRunner(quantized.model).run, evaluation.samples)
    stats = parity.compare(*comparable(static, reference, simulated), static.fetches)
    engine = f"{precision} simulated"
    metrics = {engine: evaluation.evaluate(simulated)} if evaluation.has_truth else {}
    subject = f"{precision} ({how}) vs " + ("fp32" if evaluation.has_truth else "reference")
    primary = evaluation.primary
    checks = precision_budget(cfg, evaluation).checks(
        "B", subject, stats, report.metrics.get("fp32 reference", {}).get(primary) if primary else None,
        metrics.get(engine, {}).get(primary) if primary else None)
    return report.extended(checks=checks, tier="B", stats=stats, metrics=metrics), simulated


def tier_notes(cfg: BuildConfig, evaluation: EvalSet, simulated: bool, emulation: Emulation | None) -> list[str]:
    """What the tiers covered, in words, for the report; a tier C that did not run says why."""
    precision = cfg.precision.value
    covered = ["tier A covers the FP32 graph through Paddle-Lite's x86 kernels"]
    if simulated and cfg.precision is Precision.int8:
        covered.append("tier B INT8 accuracy through PaddleSlim's fake-quant simulation")
    elif simulated:
        covered.append(f"tier B {precision} through the same weights rounded on the host as opt rounds them ("
                       + ("FP16 arithmetic is not simulated" if cfg.precision is Precision.fp16 else
                          "the device dequantises weights and computes in float") + ")")
    if emulation is not None and emulation.ran:
        covered.append(f"tier C the ARM .nb itself on Paddle-Lite's ARM kernels under emulation "
                       f"({emulation.abi}, {emulation.int8_kernels} INT8 kernels)")
    notes = ["; ".join(covered) + "."]
    if emulation is not None and not emulation.ran:
        notes.append(f"tier C (the ARM .nb under emulation) not run: {emulation.reason}. The ARM .nb's own kernels "
                     "are then checked only on devices, with the bundle's golden vectors.")
    if not evaluation.has_truth:
        notes.append("no ground truth (labels or a truth file): no task metric, only output agreement")
    return notes


def golden_tolerances(cfg: BuildConfig, report: parity.ParityReport, reference: Sequence[np.ndarray]) -> dict:
    """What a device replaying the golden vectors must meet: from the host's own figures."""
    scale = parity.output_scale(reference)
    if cfg.precision is not Precision.fp32:
        measured = min((s.cosine for s in report.outputs.get("B", ())), default=1.0)
        return {"min_cosine": round(min(cfg.gates.int8_min_cosine, measured - 0.01), 6), "max_abs": None,
                "basis": f"{cfg.precision.value} on device vs fp32 reference: cosine limit from the host simulation minus 0.01"}
    return {"min_cosine": 0.9999, "max_abs": round(1e-3 * max(1.0, scale), 8),
            "basis": "fp32 ARM kernels vs fp32 reference: 1e-3 of the output scale"}
