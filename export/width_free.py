"""Width-free reshapes for variable-width ONNX models (text recognisers): part of the ONNX import.

A recogniser exported with a dynamic width computes its Reshape targets from Shape ops (the batch, the number of
CTC steps, the tokens of an attention neck). X2Paddle cannot convert such a graph with the width left dynamic
(its shape inference loses the dims, e.g. `layer_norm` sees [-1, -1, -1]), and with the width fixed it folds
those targets into constants for that one width: the `.nb` then stops at any other width (Lite:
`reshape_op.cc ValidateShape ... Invalid shape is given`).

`rewrite` measures every computed Reshape target in ONNX Runtime at three (batch, width) probes and writes it as
one constant that holds for all of them: a dim that never changes stays, one that follows the reshaped tensor's
dim at its index becomes 0 (copy), and the one left becomes -1 (infer). A target that varies in two dims that do
not copy has no such constant, and the model is refused with the node and its measured targets. The shape
computations die and are dropped. The result is checked against the model as given in ONNX Runtime at widths
and batches the probes did not use. No weight changes.

The import applies it when the build's preprocessing has `width_mode = "dynamic"` (stages.import_onnx), before
the input shapes are fixed for X2Paddle, and the import report records it (`onnx_import.width_free`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import onnxrt
from edgekit.core.errors import InputModelError
from edgekit.model.passes import TOLERANCES, flat_check, judge



def probe_widths(low: int, step: int, high: int) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
    """(batch, width) pairs to measure at and, others, to check at: widths the preprocessing makes (multiples of
    `step` from `low` to `high`)."""
    def at(k: int) -> int:
        return min(high, low + k * step)

    return ((1, low), (2, at(5)), (1, at(10))), ((1, at(15)), (3, at(3)), (1, high), (2, low))


def computed_reshapes(model) -> list:
    """Reshape nodes whose target is computed in the graph (not an initializer or a Constant node's output)."""
    constants = {i.name for i in model.graph.initializer}
    constants |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    return [n for n in model.graph.node if n.op_type == "Reshape" and n.input[1] not in constants]


def rewrite(model, input_name: str, channels: int, height: int, widths: tuple[int, int, int], where: str):
    """`model` (an onnx.ModelProto, width dynamic) with every computed Reshape target written as a width-free
    constant; `widths` = (resize width, width_step, max_width). Returns (model, report); the model unchanged and
    report None when no target is computed."""
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    reshapes = computed_reshapes(out)           # nodes of the copy: rewritten in place below
    if not reshapes:
        return model, None
    probes, checks = probe_widths(*widths)
    watched = [name for n in reshapes for name in n.input[:2]]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    for name in dict.fromkeys(watched):
        if name not in known:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    rng = np.random.default_rng(0)

    def draw(batch: int, width: int) -> dict:
        return {input_name: rng.standard_normal((batch, channels, height, width)).astype(np.float32)}

    session = _session(probe.SerializeToString(), where)
    try:
        seen = [dict(zip(watched, session.run(watched, draw(b, w)))) for b, w in probes]
    except Exception as exc:           # ONNX Runtime's own shape checks: the graph fixes the width somewhere
        raise InputModelError(f"{where}: the model does not run at (batch, width) {list(probes)} in ONNX Runtime "
                              f"({_first_line(exc)})", "export it with a dynamic width, or use width_mode = "
                              "\"fixed\" in [preprocess]") from None
    rewritten = []
    for k, node in enumerate(reshapes):
        targets = [s[node.input[1]].astype(np.int64).tolist() for s in seen]
        shapes = [s[node.input[0]].shape for s in seen]
        fixed = []
        for d in range(len(targets[0])):
            values = {t[d] for t in targets}
            if len(values) == 1 and not values & {0, -1}:
                fixed.append(targets[0][d])
            elif all(d < len(s) and t[d] in (s[d], 0) for t, s in zip(targets, shapes)):
                fixed.append(0)
            else:
                fixed.append(-1)
        if fixed.count(-1) > 1:
            raise InputModelError(f"{where}: Reshape {node.name or node.output[0]!r} has targets {targets} at "
                                  f"(batch, width) {list(probes)}: no width-free constant (two dims vary)",
                                  "export the model so that this reshape keeps the width in one dim, or use "
                                  "width_mode = \"fixed\" in [preprocess]")
        name = f"edgekit_width_free_shape_{k}"
        graph.initializer.append(numpy_helper.from_array(np.array(fixed, np.int64), name))
        node.input[1] = name
        rewritten.append({"node": node.name or node.output[0], "measured": targets, "constant": fixed})
    dropped = _drop_dead(graph)
    try:
        onnx.checker.check_model(out)
    except onnx.checker.ValidationError as exc:
        raise InputModelError(f"{where}: the width-free reshapes left an invalid model ({_first_line(exc)})",
                              "use width_mode = \"fixed\" in [preprocess], and report the model") from None
    worst = _check(model, out, input_name, checks, draw, where)
    return out, {"reshapes": rewritten, "dropped_nodes": dropped, "probes": [list(p) for p in probes],
                 "checks": [list(c) for c in checks], "max_abs": worst,
                 "why": "X2Paddle folds computed reshape targets into constants for the one width it converts at"}


def _subgraph_inputs(node) -> set[str]:
    """Every name the If/Loop/Scan bodies of `node` read (outer-scope values are used there without being inputs)."""
    names: set[str] = set()
    for attr in node.attribute:
        for graph in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            for inner in graph.node:
                names.update(inner.input)
                names |= _subgraph_inputs(inner)
    return names


def _drop_dead(graph) -> int:
    needed = {o.name for o in graph.output}
    keep = []
    for node in reversed(list(graph.node)):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(node.input)
            needed |= _subgraph_inputs(node)
    dropped = len(graph.node) - len(keep)
    del graph.node[:]
    graph.node.extend(reversed(keep))
    used = {i for n in graph.node for i in n.input}
    initializers = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    return dropped


def _check(source, rewritten, input_name: str, checks: Sequence[tuple[int, int]], draw, where: str) -> float:
    """The rewritten model against the source in ONNX Runtime at every (batch, width) of `checks`, judged by the pass
    manager (TOLERANCES["width-free"]); the worst max abs."""
    reference, ours = _session(source.SerializeToString(), where), _session(rewritten.SerializeToString(), where)
    before: dict[str, list[np.ndarray]] = {}
    after: dict[str, list[np.ndarray]] = {}
    for batch, width in checks:
        feed = draw(batch, width)
        try:
            pairs = list(zip(reference.run(None, feed), ours.run(None, feed)))
        except Exception as exc:      # ONNX Runtime's shape checks at a width the probes did not use
            raise InputModelError(f"{where}: with width-free reshapes the model does not run at batch {batch}, "
                                  f"width {width} ({_first_line(exc)})", "use width_mode = \"fixed\" in [preprocess]"
                                  ) from None
        for k, (a, b) in enumerate(pairs):
            if a.shape != b.shape:
                raise InputModelError(f"{where}: the width-free reshapes change output {k}'s shape at batch {batch}, "
                                      f"width {width} ({list(b.shape)} vs {list(a.shape)})",
                                      "use width_mode = \"fixed\" in [preprocess]")
            before.setdefault(f"output {k}", []).append(np.ravel(a))
            after.setdefault(f"output {k}", []).append(np.ravel(b))
    found = flat_check({k: np.concatenate(v) for k, v in before.items()}, {k: np.concatenate(v) for k, v in after.items()},
                       TOLERANCES["width-free"], f"{where}: width-free reshapes vs the source (ONNX Runtime) at (batch, "
                       f"width) {[list(c) for c in checks]}", len(checks))
    judge(rewritten, "width-free", found, error=InputModelError, hint="use width_mode = \"fixed\" in [preprocess]")
    return found.worst_max_abs


def _session(data: bytes, where: str):
    import onnxruntime as ort

    try:
        return ort.InferenceSession(data, onnxrt.options(basic=False), providers=["CPUExecutionProvider"])
    except Exception as exc:          # ONNX Runtime refuses the graph (an op, a type): its own message
        raise InputModelError(f"{where}: ONNX Runtime cannot load the model to measure its reshapes for "
                              f"width_mode = \"dynamic\" ({_first_line(exc)})",
                              "check the model in ONNX Runtime, or use width_mode = \"fixed\"") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[-1] if text else type(exc).__name__)[:200]
