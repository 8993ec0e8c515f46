"""The host's parity checks for a build: tier A (x86 twin), tier B (simulated precision), budgets, golden tolerances.

Validation lives here, apart from the stages that transform the model; the pipeline
calls `host_parity` and decides what a failure means (it writes no bundle).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import parity
from .artifacts import QuantizedModel, StaticModel
from .config import BuildConfig
from .data import Samples
from .tables import Precision


def int8_budget(cfg: BuildConfig, metric: str) -> float:
    """The int8 budget as a drop in `metric`: "points" of the task's primary metric, or "cosine" of the outputs.

    --max-drop is in task points when the evaluation data has ground truth (labels or a truth
    file), else in output cosine; without it the [parity] gates apply (int8_max_top1_drop is in
    points of whatever the task's primary metric is: top-1, exact match, hmean, ...).
    """
    if cfg.quant.max_drop is not None:
        return cfg.quant.max_drop
    return cfg.gates.int8_max_top1_drop if metric == "points" else 1.0 - cfg.gates.int8_min_cosine


def host_parity(cfg: BuildConfig, static: StaticModel, quantized: QuantizedModel | None, twin_file: Path,
            evaluation: Samples, lite_runner, task=None, truth=None, reference=None) -> parity.ParityReport:
    """`reference`: the FP32 outputs of `static` on `evaluation` when already computed (the int8 search runs them)."""
    from .export import StaticRunner

    gates = cfg.gates
    report = parity.ParityReport(samples=len(evaluation))
    if reference is None:
        reference = StaticRunner(static).run(evaluation.inputs)
    for name, arr in zip(static.fetches, reference):
        if not np.isfinite(arr).all():
            raise parity.ParityError(f"the FP32 reference output {name!r} contains NaN or Inf",
                                     "the model itself is numerically broken on this data: check weights and preprocessing")
    if static.check:
        report.notes.append(f"reference engine checked: {static.check['engine']}, max abs {static.check['max_abs']:.3g} "
                            f"on {static.check['samples']} samples")
    twin = lite_runner(twin_file, static.feed_names).run(evaluation.inputs, len(evaluation))
    stats = parity.compare(reference, twin, static.fetches)
    report.outputs["A"] = [s.__dict__ for s in stats]
    for s in stats:
        report.checks.append(parity.Check("A", "x86 twin .nb vs reference", "max_abs", s.max_abs, gates.twin_max_abs, False, s.output))
        report.checks.append(parity.Check("A", "x86 twin .nb vs reference", "cosine", s.cosine, gates.twin_min_cosine, True, s.output))
    if truth is not None:
        report.metric = task.primary
        report.metrics["fp32 reference"] = task.evaluate(reference, truth)
        report.metrics["x86 twin .nb"] = task.evaluate(twin, truth)
    if quantized is not None:
        precision = cfg.precision.value
        how = "PaddleSlim simulation" if cfg.precision is Precision.int8 else "weight-rounding simulation"
        simulated = StaticRunner(quantized.model).run(evaluation.inputs)
        qstats = parity.compare(reference, simulated, static.fetches)
        report.outputs["B"] = [s.__dict__ for s in qstats]
        if truth is not None:
            report.metrics[f"{precision} simulated"] = task.evaluate(simulated, truth)
            drop = report.metrics["fp32 reference"][task.primary] - report.metrics[f"{precision} simulated"][task.primary]
            report.checks.append(parity.Check("B", f"{precision} ({how}) vs fp32", f"{task.primary}_drop_points", drop,
                                              int8_budget(cfg, "points"), False, static.fetches[0]))
        else:
            for s in qstats:
                report.checks.append(parity.Check("B", f"{precision} ({how}) vs reference", "cosine", s.cosine,
                                                  1.0 - int8_budget(cfg, "cosine"), True, s.output))
        if cfg.precision is Precision.int8:
            report.notes.append("tier A covers the FP32 graph through Paddle-Lite's x86 kernels; tier B covers INT8 "
                                "accuracy through PaddleSlim's fake-quant simulation. Paddle-Lite INT8 kernels run only "
                                "on ARM: the ARM .nb itself is checked on devices with the bundle's golden vectors.")
        else:
            report.notes.append(f"tier A covers the FP32 graph through Paddle-Lite's x86 kernels; tier B covers {precision} "
                                "through the same weights rounded on the host (opt's own conversion runs only for ARM; "
                                + ("FP16 arithmetic is not simulated" if cfg.precision is Precision.fp16 else
                                   "the device dequantises weights and computes in float")
                                + "): the ARM .nb itself is checked on devices with the bundle's golden vectors.")
    else:
        report.notes.append("tier A covers the FP32 graph through Paddle-Lite's x86 kernels; the ARM .nb's own kernels "
                            "are checked on devices with the bundle's golden vectors.")
    report.accuracy.update({engine: m[task.primary] for engine, m in report.metrics.items()} if task else {})
    if truth is None:
        report.notes.append("no ground truth (labels or a truth file): no task metric, only output agreement")
    return report


def golden_tolerances(cfg: BuildConfig, report: parity.ParityReport, reference) -> dict:
    scale = max(float(np.max(np.abs(r))) if r.size else 0.0 for r in reference)
    if cfg.precision is not Precision.fp32:
        measured = min((s["cosine"] for s in report.outputs.get("B", [])), default=1.0)
        return {"min_cosine": round(min(cfg.gates.int8_min_cosine, measured - 0.01), 6), "max_abs": None,
                "basis": f"{cfg.precision.value} on device vs fp32 reference: cosine limit from the host simulation minus 0.01"}
    return {"min_cosine": 0.9999, "max_abs": round(1e-3 * max(1.0, scale), 8),
            "basis": "fp32 ARM kernels vs fp32 reference: 1e-3 of the output scale"}
