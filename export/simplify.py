"""Before X2Paddle: shapes inferred with the given input dims, constants folded, and axes X2Paddle can read.

Measured on a PP-OCRv5-style recogniser exported by torch at opsets 14 and 17 (edgekit.examples.torch_models:
ppocrv5_style_rec, docs/inputs.md): X2Paddle 1.6.0 runs its own copy of an old ONNX Runtime symbolic shape
inference, whose Squeeze/Unsqueeze handler asserts that the node has one input
(`_pass_on_sympy_data`). From opset 13 on, Squeeze and Unsqueeze take `axes` as a second input, so the
first such node aborts the whole inference; X2Paddle then falls back to ONNX's plain shape inference,
which does not carry values through Shape -> Gather -> Concat -> Reshape, and every tensor after the first
run-time reshape has dims [-1, ...]. The first op that needs a static dim then fails (layer_norm: "expected
input with shape [*, 64], but got input shape [-1, -1, -1]"; conv: "the input's channels is -1").

So, in this order:

1. `simplify`: onnx-simplifier (onnxsim) on the model with its input dims fixed: shape inference and
   constant folding, so shape computations on known dims become constants. ONNX Runtime checks that the
   simplified model computes what the source computes.
2. the rewrites `legalize.py` applies (table REWRITES) for opset >= 13:
   - Squeeze / Unsqueeze with constant axes -> Reshape to a constant shape (a dim that stays dynamic is
     written 0, "copy", where it keeps its index, else -1): one input for X2Paddle's shape inference,
     valid ONNX at every opset, and the same tensor;
   - Split with a constant, uneven `split` input -> one Slice per output (X2Paddle's shape inference
     reads only the opset-11 `split` attribute and would split evenly).
"""

from __future__ import annotations

import logging

import numpy as np

from . import onnxrt
from edgekit.model.parity import SameCheck
from edgekit.model.passes import TOLERANCES, flat_check, judge

log = logging.getLogger(__name__)



def simplify(model, draws: list[dict], source_name: str = "the model"):
    """`model` (input dims already fixed) simplified by onnxsim, checked by ONNX Runtime on `draws`; and a report.

    A model onnxsim cannot simplify, or whose result does not run or compute the same in ONNX Runtime, is kept as it
    is (the report says why): the later steps do not need the simplification, only profit from it.
    """
    import onnx
    import onnxsim

    before = len(model.graph.node)
    try:
        simplified, _ = onnxsim.simplify(model, check_n=0)
    except Exception as exc:  # onnxsim raises RuntimeError/ValueError/onnx errors from its C++ core
        reason = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
        log.info("onnxsim could not simplify %s (%s): converting it as it is", source_name, reason)
        return model, {"applied": False, "reason": reason, "tool": f"onnxsim {onnxsim.__version__}"}
    # onnxsim's result can be wrong: on PP-OCRv4 rec (rapidocr 1.4.4) it declares a width of 40 where ONNX Runtime
    # computes 39 and refuses the graph. Such a result is dropped, and the model converted as it is.
    try:
        onnx.checker.check_model(simplified)
        check = compare_outputs(model, simplified, draws)
    except Exception as exc:  # onnx.checker.ValidationError, onnxruntime's Fail/InvalidGraph
        reason = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
        log.info("onnxsim's result for %s is not usable (%s): converting the model as it is", source_name, reason)
        return model, {"applied": False, "reason": reason, "tool": f"onnxsim {onnxsim.__version__}"}
    figures = {"draws": check.samples, "passed": check.passed,
               "outputs": {o.output: {"max_abs": o.max_abs, "limit": o.max_abs_limit, "passed": o.passed}
                           for o in check.outputs}}
    if not judge(model, "simplify", check, optional=True).kept:
        bad = check.failure
        reason = f"it changed output {bad.output!r} by {bad.max_abs:.3g} (limit {bad.max_abs_limit:.3g}) in ONNX Runtime"
        return model, {"applied": False, "reason": reason, "tool": f"onnxsim {onnxsim.__version__}", "check": figures}
    report = {"applied": True, "tool": f"onnxsim {onnxsim.__version__}", "nodes": {"before": before,
              "after": len(simplified.graph.node)}, "check": figures}
    return simplified, report


def compare_outputs(source, other, draws: list[dict]) -> SameCheck:
    """ONNX Runtime (optimisations off) on both models: the graph outputs, judged by TOLERANCES["simplify"]."""
    names = [o.name for o in source.graph.output]
    one = onnxrt.session(source.SerializeToString(), as_written=True)
    two = onnxrt.session(other.SerializeToString(), as_written=True)
    ref = {n: np.concatenate([np.asarray(one.run(names, d)[i], np.float64).ravel() for d in draws]) for i, n in enumerate(names)}
    got = {n: np.concatenate([np.asarray(two.run(names, d)[i], np.float64).ravel() for d in draws]) for i, n in enumerate(names)}
    return flat_check(ref, got, TOLERANCES["simplify"], "onnx-simplifier's model vs the source (ONNX Runtime)", len(draws))


# --- axes X2Paddle's shape inference can read (used by legalize.REWRITES) ---------------------------

def reshape_target(in_dims: list[int] | None, out_dims: list[int] | None) -> list[int] | None:
    """A constant Reshape shape giving `out_dims` from `in_dims` (-1: unknown), or None when none exists.

    A known dim is written as it is; an unknown one as 0 (Reshape copies the input's dim at that index)
    when the input has the same unknown dim at the same index, else as -1, which Reshape allows once.
    """
    if in_dims is None or out_dims is None:
        return None
    shape, inferred = [], 0
    for j, d in enumerate(out_dims):
        if d > 0:
            shape.append(d)
        elif j < len(in_dims) and in_dims[j] < 0 and _same_unknown(in_dims, out_dims, j):
            shape.append(0)
        else:
            inferred += 1
            shape.append(-1)
    return shape if inferred <= 1 else None


def _same_unknown(in_dims: list[int], out_dims: list[int], j: int) -> bool:
    """Input dim j is the output's dim j: the dims before it are the same (a Squeeze/Unsqueeze after j)."""
    return list(in_dims[:j]) == list(out_dims[:j])


def squeeze_dims(in_dims: list[int], axes: list[int], op: str) -> list[int] | None:
    """The output dims of Squeeze/Unsqueeze(axes) on `in_dims` (-1 unknown), or None if the axes do not fit."""
    if op == "Squeeze":
        rank = len(in_dims)
        picked = sorted({a % rank for a in axes}) if rank else []
        if any(in_dims[a] not in (1, -1) for a in picked):
            return None
        if any(in_dims[a] == -1 for a in picked):    # a dynamic dim squeezed: it must be 1 at run time, unknowable here
            return None
        return [d for i, d in enumerate(in_dims) if i not in picked]
    rank = len(in_dims) + len(axes)
    picked = sorted({a % rank for a in axes})
    it = iter(in_dims)
    return [1 if j in picked else next(it) for j in range(rank)]


def split_bounds(sizes: list[int]) -> list[tuple[int, int]]:
    """(start, end) of each piece of a Split with these sizes."""
    bounds, start = [], 0
    for size in sizes:
        bounds.append((start, start + size))
        start += size
    return bounds
