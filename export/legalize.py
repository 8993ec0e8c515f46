"""Legalise an ONNX graph for X2Paddle 1.6.0, before it converts it: rewrites checked by ONNX Runtime.

X2Paddle 1.6.0 is the last release. Current exporters emit ops it has no mapper for
(HardSwish since opset 14, LayerNormalization since 17, Gelu and Mish since 20 and
18), and a few ops it translates with the wrong semantics. This pass rewrites each
such node into ops X2Paddle translates faithfully, keeping the node's output names, so
everything downstream of it is untouched:

    HardSwish(x)          -> x * HardSigmoid(x; alpha=1/6, beta=0.5)
    LayerNormalization    -> ReduceMean, Sub, Mul, ReduceMean, Add(eps), Sqrt, Div, Mul(scale), Add(bias)
    Gelu(x)               -> 0.5 x (1 + Erf(x / sqrt 2))   (approximate="tanh": the tanh formula)
    Mish(x)               -> x * Tanh(Softplus(x))
    Selu(x) / Celu(x)     -> gamma * Elu(x; alpha) / alpha * Elu(x / alpha; 1)
    Dropout (inference)   -> Identity
    CastLike(x, like)     -> Cast(x; to = like's type)
    Softmax / LogSoftmax  -> the axis written out (X2Paddle defaults to 1, ONNX 13+ to -1); below
                             opset 13, where ONNX softmaxes the flattened tail, Flatten -> op -> Reshape
    Squeeze / Unsqueeze   -> (opset 13+, constant axes) Reshape to a constant shape, 0 copying a dynamic dim:
                             X2Paddle's own shape inference asserts one input and stops (simplify.py)
    Split                 -> (opset 13+, constant uneven split; or two of its outputs read by one node, which
                             X2Paddle wires to the same output) one Slice per output

Then a graph above opset 15 is converted down to 15: X2Paddle would otherwise apply its
opset-15 rules to newer nodes, e.g. read an opset-18 ReduceMean, whose axes are an input,
as a reduction over every axis. ONNX's version converter has no down-adapters for most
ops, so `_convert_down` rewrites the nodes whose meaning changed after 15 (axes inputs,
Split's num_outputs, attributes legal only at their defaults) and refuses the rest.

A node whose op X2Paddle lacks and that has no rewrite is refused with the op, the
node's name and its first output named, before X2Paddle runs.

`check_rewrites` runs ONNX Runtime on the model before and after and compares every
rewritten node's outputs (max abs <= TOLERANCES["legalise"] times the output's scale, edgekit/model/passes.py): the
legalised model is the one X2Paddle sees, so it must compute what the source computes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from edgekit.core.errors import ExportError, InputModelError

from . import onnxrt, simplify
from edgekit.model.passes import TOLERANCES, flat_check, judge

if TYPE_CHECKING:
    import onnx

X2PADDLE_MAX_OPSET = 15            # X2Paddle 1.6.0's newest rules; newer graphs are converted down to them
X2PADDLE_MIN_OPSET = 7

# Every ONNX op X2Paddle 1.6.0 has a mapper for (OpSet15's methods, directly_map_ops and
# elementwise_ops); tests/e2e/test_onnx_import.py reads the installed X2Paddle to keep it true.
X2PADDLE_OPS = frozenset("""
Abs Add And ArgMax AveragePool BatchNormalization Cast Ceil Clip Concat Constant ConstantOfShape Conv ConvTranspose
Cos CumSum DepthToSpace Div Elu Equal Erf Exp Expand Flatten Floor Gather GatherElements GatherND Gemm
GlobalAveragePool GlobalMaxPool Greater GreaterOrEqual HardSigmoid Identity InstanceNormalization IsInf IsNaN LRN
LSTM LeakyRelu Less LessOrEqual Log LogSoftmax MatMul Max MaxPool MaxRoiPool Min Mod Mul Neg NonMaxSuppression
NonZero Not OneHot Or PRelu Pad Pow Range Reciprocal ReduceL1 ReduceL2 ReduceMax ReduceMean ReduceMin ReduceProd
ReduceSum Relu Reshape Resize RoiAlign ScatterND Shape Shrink Sigmoid Sign Sin Size Slice Softmax Softplus Softsign
SpaceToDepth Split Sqrt Squeeze Sub Sum Tanh ThresholdedRelu Tile TopK Transpose Unsqueeze Upsample Where Xor
""".split())

# Ops X2Paddle lacks, met in mobile models, with no rewrite here: why, and what the user can do.
REFUSED = {
    "GroupNormalization": "export GroupNorm at opset <= 17, where exporters write it as InstanceNormalization + Mul/Add",
    "Einsum": "write the contraction as matmul/transpose in the model code before exporting",
    "Trilu": "build the mask as a constant in the model code (torch.triu on a buffer), not at run time",
    "GridSample": "no Paddle-Lite ARM kernel takes it from X2Paddle; replace grid_sample in the model code",
    "QuantizeLinear": "export the float model: edgekit quantises it (--quant int8)",
    "DequantizeLinear": "export the float model: edgekit quantises it (--quant int8)",
    "If": "export with fixed shapes and no data-dependent branches (torch.jit.trace-style export)",
    "Loop": "export with fixed shapes and no data-dependent loops (torch.jit.trace-style export)",
    "Scan": "export with fixed shapes and no data-dependent loops (torch.jit.trace-style export)",
}


@dataclass(frozen=True)
class Rewrite:
    """How one op is legalised: the function and the formula docs/inputs.md and import.json show."""

    op: str
    formula: str
    apply: Callable


@dataclass
class Legalised:
    """The legalised model and what was done to it (import.json's `legalise` section)."""

    model: onnx.ModelProto
    source_opset: int | None
    opset: int | None
    rewrites: list[dict] = field(default_factory=list)   # one per rewritten node
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.rewrites) or self.opset != self.source_opset

    def report(self) -> dict:
        by_op: dict[str, dict] = {}
        for r in self.rewrites:
            entry = by_op.setdefault(r["op"], {"op": r["op"], "formula": r["formula"], "nodes": 0})
            entry["nodes"] += 1
        return {"opset": {"source": self.source_opset, "converted_to": self.opset}, "by_op": list(by_op.values()),
                "rewrites": self.rewrites, "notes": self.notes}


class _Builder:
    """New nodes, constants and unique names for one graph."""

    def __init__(self, model, opset: int):
        self.model = model
        self.graph = model.graph
        self.opset = opset
        self.taken = {n for node in self.graph.node for n in (node.name, *node.input, *node.output)}
        self.taken |= {i.name for i in self.graph.initializer} | {v.name for v in self.graph.input}
        self.nodes: list = []
        self.notes: list[str] = []

    def unique(self, base: str) -> str:
        base = (base or "legalised").strip("/") + "_lg"
        name, i = base, 0
        while name in self.taken:
            i += 1
            name = f"{base}{i}"
        self.taken.add(name)
        return name

    def const(self, base: str, value, dtype) -> str:
        from onnx import numpy_helper

        name = self.unique(base)
        self.graph.initializer.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def add(self, op: str, inputs: list[str], base: str, output: str | None = None, **attrs) -> str:
        from onnx import helper

        out = output or self.unique(base)
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.unique(base + "_" + op), **attrs))
        return out

    def reduce_mean(self, x: str, axes: list[int], base: str) -> str:
        # the opset-15 form (axes as an attribute): a graph above 15 is converted to 15 before anything runs it
        return self.add("ReduceMean", [x], base, axes=axes, keepdims=1)


def _attr(node, name: str, default=None):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


class _Context:
    """Shape facts for the rewrites, from ONNX shape inference on the source graph."""

    def __init__(self, model):
        import onnx

        try:
            inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)   # dims through Shape -> Reshape
        except Exception:     # shape inference is an aid here; rewrites that need it refuse without it
            inferred = model
        self.types, self.shapes = {}, {}
        for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
            t = vi.type.tensor_type
            rank = len(t.shape.dim) if t.HasField("shape") else None
            self.types[vi.name] = (t.elem_type or None, rank)
            if rank is not None:
                self.shapes[vi.name] = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1
                                        for d in t.shape.dim]
        for init in inferred.graph.initializer:
            self.types[init.name] = (init.data_type, len(init.dims))
        self.constants = constant_values(model)
        self.reads = [{name for name in node.input if name} for node in model.graph.node]

    def read_together(self, names) -> bool:
        """One node reads two or more of the tensors `names`."""
        wanted = {name for name in names if name}
        return any(len(read & wanted) > 1 for read in self.reads)

    def dims(self, name: str) -> list[int] | None:
        """The tensor's dims from shape inference (-1 unknown), None when even its rank is unknown."""
        return self.shapes.get(name)

    def constant(self, name: str) -> list[int] | None:
        value = self.constants.get(name)
        return None if value is None else [int(v) for v in np.asarray(value).ravel()]

    def rank(self, name: str) -> int | None:
        return self.types.get(name, (None, None))[1]

    def elem_type(self, name: str) -> int | None:
        return self.types.get(name, (None, None))[0]

    def np_dtype(self, name: str):
        from onnx import helper

        elem = self.elem_type(name)
        return helper.tensor_dtype_to_np_dtype(elem) if elem else np.float32


def _where(node) -> str:
    return f"node {node.name or '(unnamed)'!r} (output {node.output[0]!r})" if node.output else f"node {node.name!r}"


# --- the rewrites: each appends nodes to b.nodes that produce the node's own outputs ---------------

def _hardswish(node, b: _Builder, ctx: _Context) -> None:
    x, y = node.input[0], node.output[0]
    gate = b.add("HardSigmoid", [x], y, alpha=1.0 / 6.0, beta=0.5)
    b.add("Mul", [x, gate], y, output=y)


def _gelu(node, b: _Builder, ctx: _Context) -> None:
    x, y = node.input[0], node.output[0]
    dt = ctx.np_dtype(x)
    if _attr(node, "approximate", b"none") in (b"tanh", "tanh"):
        cube = b.add("Mul", [b.add("Mul", [x, x], y), x], y)
        inner = b.add("Add", [x, b.add("Mul", [cube, b.const(y + "_c", 0.044715, dt)], y)], y)
        t = b.add("Tanh", [b.add("Mul", [inner, b.const(y + "_k", math.sqrt(2.0 / math.pi), dt)], y)], y)
        one_plus = b.add("Add", [t, b.const(y + "_one", 1.0, dt)], y)
    else:
        e = b.add("Erf", [b.add("Div", [x, b.const(y + "_sqrt2", math.sqrt(2.0), dt)], y)], y)
        one_plus = b.add("Add", [e, b.const(y + "_one", 1.0, dt)], y)
    b.add("Mul", [b.add("Mul", [x, one_plus], y), b.const(y + "_half", 0.5, dt)], y, output=y)


def _mish(node, b: _Builder, ctx: _Context) -> None:
    x, y = node.input[0], node.output[0]
    b.add("Mul", [x, b.add("Tanh", [b.add("Softplus", [x], y)], y)], y, output=y)


def _selu(node, b: _Builder, ctx: _Context) -> None:
    x, y = node.input[0], node.output[0]
    alpha = float(_attr(node, "alpha", 1.67326319217681884765625))
    gamma = float(_attr(node, "gamma", 1.05070102214813232421875))
    b.add("Mul", [b.add("Elu", [x], y, alpha=alpha), b.const(y + "_gamma", gamma, ctx.np_dtype(x))], y, output=y)


def _celu(node, b: _Builder, ctx: _Context) -> None:
    x, y = node.input[0], node.output[0]
    alpha, dt = float(_attr(node, "alpha", 1.0)), ctx.np_dtype(x)
    scaled = b.add("Div", [x, b.const(y + "_alpha", alpha, dt)], y)
    b.add("Mul", [b.add("Elu", [scaled], y, alpha=1.0), b.const(y + "_alpha", alpha, dt)], y, output=y)


def _dropout(node, b: _Builder, ctx: _Context) -> None:
    if len(node.output) > 1 and node.output[1]:
        raise _refusal(node, "its mask output is used", "export the model in eval mode (model.eval()) so Dropout is dropped")
    b.add("Identity", [node.input[0]], node.output[0], output=node.output[0])


def _castlike(node, b: _Builder, ctx: _Context) -> None:
    to = ctx.elem_type(node.input[1])
    if not to:
        raise _refusal(node, "the type of its second input is unknown", "export with static types (or at opset <= 14, where "
                       "exporters write Cast)")
    b.add("Cast", [node.input[0]], node.output[0], output=node.output[0], to=to)


def _layernorm(node, b: _Builder, ctx: _Context) -> None:
    x, y = node.input[0], node.output[0]
    scale = node.input[1]
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    axis = int(_attr(node, "axis", -1))
    eps = float(_attr(node, "epsilon", 1e-5))
    if axis < 0:
        axes = list(range(axis, 0))
    else:
        rank = ctx.rank(x)
        if rank is None:
            raise _refusal(node, f"axis {axis} needs the input's rank, which shape inference could not find",
                           "export with static shapes, or with a negative axis (nn.LayerNorm does this)")
        axes = list(range(axis, rank))
    dt = ctx.np_dtype(x)
    mean = b.reduce_mean(x, axes, y + "_mean")
    centred = b.add("Sub", [x, mean], y)
    var = b.reduce_mean(b.add("Mul", [centred, centred], y), axes, y + "_var")
    std = b.add("Sqrt", [b.add("Add", [var, b.const(y + "_eps", eps, dt)], y)], y)
    normed = b.add("Div", [centred, std], y)
    scaled = b.add("Mul", [normed, scale], y, output=None if bias else y)
    if bias:
        b.add("Add", [scaled, bias], y, output=y)
    if len(node.output) > 1 and node.output[1]:
        b.add("Identity", [mean], node.output[1], output=node.output[1])
    if len(node.output) > 2 and node.output[2]:
        b.add("Reciprocal", [std], node.output[2], output=node.output[2])


def _softmax(node, b: _Builder, ctx: _Context) -> bool:
    """False when X2Paddle translates the node as it is (it reads `axis`, defaulting to 1)."""
    from onnx import helper

    x, y = node.input[0], node.output[0]
    given = _attr(node, "axis")
    if b.opset >= 13:        # one axis, as in Paddle; only ONNX's default (-1) differs from X2Paddle's (1)
        if given is not None:
            return False
        b.nodes.append(helper.make_node(node.op_type, [x], [y], name=b.unique(node.name or y), axis=-1))
        return True
    axis = 1 if given is None else int(given)
    rank = ctx.rank(x)
    if rank is None:     # shape inference lost the rank (dynamic reshapes upstream): X2Paddle's reading is checked later
        b.notes.append(f"{node.op_type} at {_where(node)}: rank unknown, left as X2Paddle reads it (axis {axis} alone)")
        return False
    if axis % rank == rank - 1:    # the flattened tail is the last axis alone
        return False
    # below opset 13, ONNX softmaxes the input flattened to 2-D at `axis`; X2Paddle softmaxes along `axis` alone
    out = b.add(node.op_type, [b.add("Flatten", [x], y, axis=axis)], y, axis=1)
    b.add("Reshape", [out, b.add("Shape", [x], y)], y, output=y)
    return True


def _squeeze(node, b: _Builder, ctx: _Context) -> bool:
    """Squeeze/Unsqueeze with a constant axes input (opset 13+) -> Reshape to a constant shape (simplify.py says why)."""
    if b.opset < 13 or len(node.input) < 2 or not node.input[1]:
        return False                  # axes as an attribute (opset < 13) or none: X2Paddle reads it
    x, y = node.input[0], node.output[0]
    axes, dims = ctx.constant(node.input[1]), ctx.dims(x)
    target = None
    if axes is not None and dims is not None:
        target = simplify.reshape_target(dims, simplify.squeeze_dims(dims, axes, node.op_type))
    if target is None:
        why = "its axes are computed at run time" if axes is None else f"the input's dims {dims} leave the shape open"
        b.notes.append(f"{node.op_type} at {_where(node)} kept with its axes input ({why}): X2Paddle's shape inference "
                       "stops there, so shapes after it may be unknown to X2Paddle")
        return False
    b.add("Reshape", [x, b.const(y + "_shape", target, np.int64)], y, output=y)
    return True


def _split(node, b: _Builder, ctx: _Context) -> bool:
    """Split -> one Slice per output, when the split is constant and uneven (opset 13+; X2Paddle's shape inference
    assumes an even one) or when one node reads two or more of its outputs: X2Paddle 1.6.0 then wires the same
    output to each of those inputs (paddle2onnx's `Concat(split(scale_factor)[1], [0], [1], [0])` came out as four
    times [1])."""
    if b.opset < 10:
        return False                  # Slice takes its bounds as inputs from opset 10 on
    outputs = [o for o in node.output if o]
    sizes = ctx.constant(node.input[1]) if b.opset >= 13 and len(node.input) > 1 and node.input[1] else None
    if sizes is None and b.opset < 13:
        sizes = _attr(node, "split")
    axis = int(_attr(node, "axis", 0))
    together = ctx.read_together(outputs)
    if sizes is None and together:   # an even split: the sizes from the input's dim along the axis
        dims = ctx.dims(node.input[0])
        size = dims[axis] if dims is not None and -len(dims) <= axis < len(dims) else -1
        sizes = [size // len(node.output)] * len(node.output) if size > 0 and size % len(node.output) == 0 else None
    if sizes is None or not (together or (b.opset >= 13 and len(set(sizes)) > 1)):
        return False                  # an even split read output by output is what X2Paddle translates faithfully
    x = node.input[0]
    for out, (start, end) in zip(node.output, simplify.split_bounds([int(s) for s in sizes])):
        if not out:
            continue
        b.add("Slice", [x, b.const(out + "_start", [start], np.int64), b.const(out + "_end", [end], np.int64),
                        b.const(out + "_axis", [axis], np.int64)], out, output=out)
    return True


REWRITES = {r.op: r for r in [
    Rewrite("HardSwish", "x * HardSigmoid(x; alpha=1/6, beta=0.5)", _hardswish),
    Rewrite("LayerNormalization", "(x - mean) / sqrt(var + eps) * scale + bias, with ReduceMean over the normalised axes",
            _layernorm),
    Rewrite("Gelu", "0.5 x (1 + Erf(x / sqrt 2)); approximate=tanh: 0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3)))", _gelu),
    Rewrite("Mish", "x * Tanh(Softplus(x))", _mish),
    Rewrite("Selu", "gamma * Elu(x; alpha)", _selu),
    Rewrite("Celu", "alpha * Elu(x / alpha; 1)", _celu),
    Rewrite("Dropout", "Identity (inference)", _dropout),
    Rewrite("CastLike", "Cast(x; to = the type of the second input)", _castlike),
    Rewrite("Softmax", "axis written out (X2Paddle's default is 1, ONNX 13+'s is -1); opset < 13 with a non-last axis: "
            "Flatten(axis) -> Softmax(1) -> Reshape(Shape(x))", _softmax),
    Rewrite("LogSoftmax", "as Softmax", _softmax),
    Rewrite("Squeeze", "opset 13+ with constant axes: Reshape(x, constant shape; 0 copies a dynamic dim)", _squeeze),
    Rewrite("Unsqueeze", "opset 13+ with constant axes: Reshape(x, constant shape; 0 copies a dynamic dim)", _squeeze),
    Rewrite("Split", "a constant uneven split (opset 13+), or outputs one node reads together: one Slice(start, end, "
            "axis) per output", _split),
]}


def _refusal(node, why: str, fix: str) -> ExportError:
    return ExportError(f"cannot legalise ONNX op {node.op_type} at {_where(node)} for X2Paddle 1.6.0: {why}", fix)


def model_opset(model) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def unsupported_nodes(model) -> list:
    """The nodes X2Paddle 1.6.0 cannot translate and edgekit cannot rewrite, in graph order."""
    return [n for n in model.graph.node if n.op_type not in X2PADDLE_OPS and n.op_type not in REWRITES]


def legalise(model, source_name: str = "the model") -> Legalised:
    """A copy of `model` that X2Paddle 1.6.0 translates faithfully, or an ExportError naming the first node it cannot."""
    import onnx

    opset = model_opset(model)
    custom = sorted({o.domain for o in model.opset_import if o.domain not in ("", "ai.onnx")} &
                    {n.domain for n in model.graph.node if n.domain not in ("", "ai.onnx")})
    if custom:
        node = next(n for n in model.graph.node if n.domain in custom)
        raise ExportError(f"{source_name} uses custom-domain op {node.domain}::{node.op_type} at {_where(node)}, which X2Paddle "
                          "cannot translate", "export without custom ops (e.g. no onnxruntime-extensions or contrib ops)")
    bad = unsupported_nodes(model)
    if bad:
        ops = sorted({n.op_type for n in bad})
        node = bad[0]
        advice = REFUSED.get(node.op_type, "change the model code so the exporter does not emit it, or export the model from "
                             "Paddle directly")
        raise ExportError(f"X2Paddle 1.6.0 has no translation for ONNX op(s) {', '.join(ops)} and edgekit no rewrite: first at "
                          f"{_where(node)} ({len(bad)} node(s))", advice)
    if opset is not None and opset < X2PADDLE_MIN_OPSET:
        raise InputModelError(f"{source_name} is at ONNX opset {opset}; X2Paddle 1.6.0 reads opsets {X2PADDLE_MIN_OPSET}-"
                              f"{X2PADDLE_MAX_OPSET}", "re-export at opset 13 or newer")
    ctx = _Context(model)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    b = _Builder(out, opset or X2PADDLE_MAX_OPSET)
    rewrites, kept = [], []
    for node in out.graph.node:
        rule = REWRITES.get(node.op_type)
        if rule is None:
            kept.append(node)
            continue
        before = len(b.nodes)
        done = rule.apply(node, b, ctx)
        if done is False:
            kept.append(node)
            continue
        added = b.nodes[before:]
        kept.extend(added)
        rewrites.append({"op": node.op_type, "node": node.name, "outputs": [o for o in node.output if o],
                         "into": [n.op_type for n in added], "formula": rule.formula})
    del out.graph.node[:]
    out.graph.node.extend(kept)
    result = Legalised(out, opset, opset, rewrites, list(b.notes))
    if opset is not None and opset > X2PADDLE_MAX_OPSET:
        result.model = _convert_down(out, source_name, opset)
        result.opset = X2PADDLE_MAX_OPSET
        result.notes.append(f"opset {opset} converted to {X2PADDLE_MAX_OPSET} (X2Paddle 1.6.0's newest rules)")
    return result


# Ops whose semantics changed between opset 15 and 21 beyond new types (ONNX's Changelog.md):
# what a node must look like to mean the same at opset 15.
_REDUCE_AXES_INPUT = {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
                      "ReduceProd", "ReduceSumSquare"}          # axes moved from attribute to input in opset 18
_DEFAULT_ONLY = {                                               # attributes added after 15, legal only at their default
    "Resize": {"antialias": 0, "keep_aspect_ratio_policy": b"stretch"},
    "AveragePool": {},                                          # dilations (19): all ones
    "ScatterND": {"reduction": b"none"},
    "ScatterElements": {"reduction": b"none"},
    "Pad": {},
}
_DROPPED = {"Cast": ("saturate",), "CastLike": ("saturate",)}   # fp8-only attributes (19)


def constant_values(model) -> dict[str, np.ndarray]:
    """The values of the graph's initializers and Constant nodes, by tensor name."""
    from onnx import numpy_helper

    values = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def _convert_down(model, source_name: str, opset: int):
    """`model` at opset 15: nodes whose meaning changed after 15 rewritten into their opset-15 form, or refused.

    ONNX's own version converter has no down-adapters for most ops (e.g. Identity 19 -> 16),
    so this walks the changes that matter to X2Paddle and relabels the rest, whose
    changes are new element types only. ONNX Runtime then checks the result.
    """
    import onnx
    from onnx import helper

    consts = constant_values(model)
    for node in model.graph.node:
        op = node.op_type
        if op in _REDUCE_AXES_INPUT and opset >= 18:
            noop = _attr(node, "noop_with_empty_axes", 0)
            if len(node.input) > 1 and node.input[1]:
                if node.input[1] not in consts:
                    raise _refusal(node, "its axes are computed at run time", "export with constant reduction axes")
                axes = [int(a) for a in consts[node.input[1]].ravel()]
                del node.input[1:]
                node.attribute.append(helper.make_attribute("axes", axes))
            elif noop:
                raise _refusal(node, "it reduces nothing (noop_with_empty_axes=1, no axes)", "remove the no-op reduction")
            _drop_attributes(node, ("noop_with_empty_axes",))
        elif op == "Split" and opset >= 18:
            count = _attr(node, "num_outputs")
            if count is not None and len(node.output) != count:
                raise _refusal(node, f"num_outputs={count} but {len(node.output)} outputs", "re-export the model")
            _drop_attributes(node, ("num_outputs",))   # opset 13: an even split into the outputs (X2Paddle's reading)
        elif op == "Pad" and opset >= 18 and (len(node.input) > 3 and node.input[3] or _attr(node, "mode") == b"wrap"):
            raise _refusal(node, "it pads selected axes or in 'wrap' mode (opset 18/19)", f"export at opset "
                           f"{X2PADDLE_MAX_OPSET}, or pad every axis")
        elif op == "Resize" and opset >= 18 and (_attr(node, "axes") is not None or
                                                   _attr(node, "coordinate_transformation_mode") == b"half_pixel_symmetric"):
            raise _refusal(node, "it uses Resize's axes or half_pixel_symmetric (opset 18/19)",
                           f"export at opset {X2PADDLE_MAX_OPSET}")
        elif op == "AveragePool" and opset >= 19 and any(d != 1 for d in _attr(node, "dilations", [])):
            raise _refusal(node, "it uses dilations (opset 19)", "use a dilation of 1")
        for name, default in _DEFAULT_ONLY.get(op, {}).items():
            value = _attr(node, name)
            if value is not None and value != default:
                raise _refusal(node, f"attribute {name}={value!r} has no opset-{X2PADDLE_MAX_OPSET} equivalent",
                               f"export at opset {X2PADDLE_MAX_OPSET} or without it")
        _drop_attributes(node, tuple(_DEFAULT_ONLY.get(op, {})) + _DROPPED.get(op, ()) +
                         (("dilations",) if op == "AveragePool" else ()))
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = X2PADDLE_MAX_OPSET
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx.checker.ValidationError: an op that does not exist at opset 15
        text = str(exc).strip().splitlines()
        raise ExportError(f"{source_name} at opset {opset} cannot be expressed at X2Paddle's opset {X2PADDLE_MAX_OPSET}: "
                          f"{(text[0] if text else type(exc).__name__)[:240]}",
                          f"re-export at opset {X2PADDLE_MAX_OPSET} (torch.onnx.export(..., opset_version="
                          f"{X2PADDLE_MAX_OPSET}))") from exc
    return model


def _drop_attributes(node, names: tuple[str, ...]) -> None:
    keep = [a for a in node.attribute if a.name not in names]
    del node.attribute[:]
    node.attribute.extend(keep)


# --- the check -------------------------------------------------------------------------------------

def _with_outputs(model, names: list[str]):
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    have = {o.name for o in copy.graph.output}
    for name in names:
        if name not in have:
            copy.graph.output.append(onnx.ValueInfoProto(name=name))
    return copy


def _run(model, draws: list[dict[str, np.ndarray]], names: list[str]) -> list[dict[str, np.ndarray]]:
    session = onnxrt.session(_with_outputs(model, names).SerializeToString(), as_written=True)
    results = []
    for draw in draws:
        values = session.run(names, draw)
        results.append(dict(zip(names, (np.asarray(v) for v in values))))
    return results


def check_rewrites(source, legalised: Legalised, draws: list[dict[str, np.ndarray]]) -> dict:
    """ONNX Runtime on the source and on the legalised model: every rewritten output, and the graph's outputs."""
    import onnxruntime as ort

    rewritten = [o for r in legalised.rewrites for o in r["outputs"]]
    graph_outputs = [o.name for o in source.graph.output]
    names = list(dict.fromkeys(rewritten + graph_outputs))
    try:
        before = _run(source, draws, names)
        after = _run(legalised.model, draws, names)
    except Exception as exc:  # onnxruntime's own exception types
        text = str(exc).strip().splitlines()
        raise ExportError(f"ONNX Runtime cannot run the legalised model: {(text[0] if text else type(exc).__name__)[:240]}",
                          "report the model with this line; export at opset 13-15 to avoid the rewrites") from exc
    found = flat_check({n: np.concatenate([b[n].ravel() for b in before]) for n in names},
                       {n: np.concatenate([a[n].ravel() for a in after]) for n in names}, TOLERANCES["legalise"],
                       "the legalised .onnx vs the source (ONNX Runtime), every rewritten tensor", len(draws))
    figures = {o.output: {"max_abs": o.max_abs, "limit": o.max_abs_limit, "passed": o.passed} for o in found.outputs}
    for r in legalised.rewrites:
        r["check"] = {o: figures[o] for o in r["outputs"]}
    failed = [(n, f) for n, f in figures.items() if not f["passed"]]
    check = {"engine": f"ONNX Runtime {ort.__version__}, source vs legalised .onnx, graph optimisations off",
             "draws": len(draws), "max_abs_limit_factor": TOLERANCES["legalise"].max_abs,
             "rewritten_max_abs": max((figures[o]["max_abs"] for o in rewritten), default=0.0),
             "outputs": {n: figures[n] for n in graph_outputs}, "passed": not failed}
    if failed:
        name = failed[0][0]
        op = next((r["op"] for r in legalised.rewrites if name in r["outputs"]), "the opset conversion")
        judge(legalised.model, "legalise", found, error=ExportError,
              hint=f"report the model with this line ({op} rewrote {name!r}); export at opset {X2PADDLE_MAX_OPSET} or "
                   "below to avoid the rewrite")
    return check
