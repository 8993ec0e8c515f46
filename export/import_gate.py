"""The ONNX import gate: the Paddle model X2Paddle made vs ONNX Runtime on the source .onnx, judged by what it measured.

Per output, over the probe samples (S = the reference's largest |value|):

- S below SIGNAL_FLOOR: the output carries no signal above float noise on these inputs (a DB
  detector's probability map is ~1e-5 everywhere on random inputs). Direction (cosine) and relative
  error are then rounding noise; only `max_abs <= import_max_abs` (absolute) is judged, and the report
  says the output was not really checked on these inputs.
- otherwise: closeness relative to the output's scale, `max_abs / S <= import_max_abs`, and the cosine
  at least `import_min_cosine`. A miss at a cosine of NOISE_COSINE or more is worded as float rounding
  accumulated over the graph (raise the tolerance if the task allows it), a lower one as a wrong op.

Where the probe comes from is part of the verdict: the build's `import-metric` stage probes with the
evaluation samples (else the calibration samples); only without any data are the inputs seeded noise,
and the report says so. With ground truth, the task metric decides: an import whose metric reads
within `import_max_metric_drop` of ONNX Runtime's is accepted even when a tensor figure misses (the
miss is reported), and one that reads lower is refused whatever the tensors say.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from edgekit.core.errors import InputModelError
from edgekit.model.parity import Tolerance

SIGNAL_FLOOR = 1e-3                # an output whose largest |value| is below this carries no measurable direction
NOISE_COSINE = 0.99999             # at or above it, a relative max-abs miss is worded as float rounding

PROBES = {
    "evaluation": "the evaluation samples",
    "calibration": "the calibration samples (no evaluation data given)",
    "random": "seeded random inputs (no data given: outputs near zero on noise are not really checked)",
}


def judge(name: str, ref: np.ndarray, got: np.ndarray, limits: Tolerance) -> dict:
    """The figures of one output and whether they pass (see the module docstring)."""
    ref64, got64 = np.asarray(ref, np.float64).ravel(), np.asarray(got, np.float64).ravel()
    finite = bool(np.isfinite(ref64).all() and np.isfinite(got64).all())
    scale = float(np.max(np.abs(ref64))) if ref64.size else 0.0
    max_abs = float(np.max(np.abs(ref64 - got64))) if ref64.size and finite else math.nan
    norms = float(np.linalg.norm(ref64) * np.linalg.norm(got64))
    cosine = float(ref64 @ got64 / norms) if finite and norms > 0 else (1.0 if finite and max_abs == 0 else math.nan)
    relative = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    signal = scale >= SIGNAL_FLOOR
    if not finite:
        passed, judged = False, "not finite"
    elif not signal:
        passed, judged = max_abs <= limits.max_abs, "absolute (signal below float noise)"
    else:
        passed, judged = relative <= limits.max_abs and cosine >= limits.min_cosine, "relative to scale, and cosine"
    return {"output": name, "shape": list(np.shape(ref)[1:]), "max_abs": max_abs, "scale": scale,
            "relative": relative, "cosine": cosine, "signal_above_noise": signal, "judged": judged,
            "max_abs_limit": limits.max_abs * (scale if signal else 1.0), "min_cosine": limits.min_cosine,
            "passed": bool(passed)}


def compare(expected: Sequence[np.ndarray], got: Sequence[np.ndarray], names: Sequence[str], limits: Tolerance,
            probe: str, samples: int) -> dict:
    """Every output judged; `probe` is a key of PROBES."""
    outputs = [judge(n, e, g, limits) for n, e, g in zip(names, expected, got)]
    return {"probe": probe, "probe_text": PROBES[probe], "samples": samples, "outputs": outputs,
            "max_abs": max(o["max_abs"] for o in outputs), "min_cosine": min(o["cosine"] for o in outputs),
            "max_relative": max(o["relative"] for o in outputs if o["signal_above_noise"]) if any(
                o["signal_above_noise"] for o in outputs) else None,
            "unchecked": [o["output"] for o in outputs if not o["signal_above_noise"]],
            "passed": all(o["passed"] for o in outputs)}


def decide(check: dict, task: dict | None, source_name: str) -> dict:
    """The verdict: the task metric when there is truth, else the tensor check. Raises InputModelError on a refusal."""
    if task is not None:
        drop = task["onnxruntime"] - task["paddle"]
        verdict = {"decided_by": f"task metric ({task['metric']})", "passed": drop <= task["max_drop"],
                   "tensor_check_passed": check["passed"]}
        if not verdict["passed"]:
            error = InputModelError(
                f"the imported model reads {task['paddle']:.2f} % {task['metric']} on {PROBES[check['probe']]} where ONNX "
                f"Runtime reads {task['onnxruntime']:.2f} % on {source_name} (agreement {task['agreement']:.2f} %, "
                f"limit {task['max_drop']} points)", _wrong_op_hint(check))
            error.report_lines = check_lines(check)
            raise error
        return verdict
    if not check["passed"]:
        bad = next(o for o in check["outputs"] if not o["passed"])
        error = disagreement(source_name, bad, check)
        error.report_lines = check_lines(check)
        error.check = check
        raise error
    return {"decided_by": "tensor check", "passed": True, "tensor_check_passed": True}


def _wrong_op_hint(check: dict) -> str:
    return ("X2Paddle or a rewrite changed what the model computes: fix dynamic dimensions with --input, or export the "
            "model from Paddle directly, and report the model (import.json's legalise and simplify sections list every "
            "rewrite); [parity] import_max_metric_drop sets the limit")


def disagreement(source: str, bad: dict, check: dict) -> InputModelError:
    """The refusal, worded by what was measured: float rounding and a wrong translation need different ways out."""
    on = PROBES[check["probe"]]
    measured = (f"max abs {bad['max_abs']:.3g} at scale {bad['scale']:.3g} (relative {bad['relative']:.3g}, limit "
                f"{bad['max_abs_limit']:.3g}), cosine {bad['cosine']:.8g} (min {bad['min_cosine']})")
    data_hint = "" if check["probe"] == "evaluation" else \
        "; give evaluation data (--eval, with truth if you have it: then the task metric decides)"
    if not bad["signal_above_noise"]:
        return InputModelError(
            f"the Paddle model X2Paddle made from {source} differs from ONNX Runtime on output {bad['output']!r} on {on}: "
            f"{measured}, though the output stays below {SIGNAL_FLOOR:g} there",
            f"raise [parity] import_max_abs if that is float noise for the task{data_hint}")
    if bad["cosine"] >= NOISE_COSINE:
        suggested = bad["relative"] * 2
        return InputModelError(
            f"the Paddle model X2Paddle made from {source} differs from ONNX Runtime on output {bad['output']!r} on {on}: "
            f"{measured}; a cosine this close to 1 is float rounding accumulated over the graph, not a wrongly "
            f"translated op", f"if that difference is acceptable for the task, raise [parity] import_max_abs to "
            f"{suggested:.2g} (edgekit import onnx --max-abs {suggested:.2g}){data_hint}")
    return InputModelError(
        f"the Paddle model X2Paddle made from {source} disagrees with ONNX Runtime on output {bad['output']!r} on {on}: "
        f"{measured}; outputs this far apart in direction mean an op was translated wrongly",
        _wrong_op_hint(check) + data_hint)


def check_lines(check: dict) -> list[str]:
    """One ✓/✗ line per output, in the parity report's style."""
    lines = [f"X2Paddle import vs ONNX Runtime on {check['samples']} samples: {check['probe_text']}:"]
    for o in check["outputs"]:
        mark = "✓" if o["passed"] else "✗"
        lines.append(f"  {mark} [{o['output']}]: max_abs {o['max_abs']:.3g} at scale {o['scale']:.3g} "
                     f"(relative {o['relative']:.3g}, ≤ {o['max_abs_limit']:.3g}), cosine {o['cosine']:.8g} "
                     f"(≥ {o['min_cosine']}); judged {o['judged']}")
    return lines


def judge_on_data(source: Sequence[np.ndarray], imported: Sequence[np.ndarray], names: Sequence[str], evaluation,
                  limits: Tolerance, max_drop: float, probe: str, source_name: str) -> dict:
    """The build's gate: ONNX Runtime on the source (`source`) vs the imported model (`imported`), every output on
    every sample of `evaluation` (an EvalSet), judged in the task's metric when it has truth, else tensor by tensor.

    Returns the `onnx_import` additions: `data_check` (the tensor figures), `task_metric` (None without truth) and
    `verdict` (what decided); raises InputModelError on a refusal.
    """
    check = compare(list(source), list(imported), names, limits, probe, len(evaluation))
    task = None
    if evaluation.has_truth:
        primary = evaluation.primary
        task = {"metric": primary, "samples": len(evaluation), "onnxruntime": evaluation.evaluate(list(source))[primary],
                "paddle": evaluation.evaluate(list(imported))[primary],
                "agreement": evaluation.task.agreement(list(imported), list(source)), "max_drop": max_drop}
    verdict = decide(check, task, source_name)
    return {"data_check": check, "task_metric": task, "verdict": verdict}
