"""Stage `fold`: fold what opt and PaddleSlim leave unfolded, before quantisation, checked numerically.

Models imported through X2Paddle, and Paddle 2.6 exports of conv-with-bias layers,
carry chains that Paddle-Lite's opt passes do not match:

- **conv bias through reshape2**: X2Paddle writes a conv's bias as
  `elementwise_add(conv, reshape2(bias, [1, C, 1, 1]))`. Lite folds
  `conv2d -> elementwise_add(Y persistable)` into the conv, but not an add whose Y is
  computed, so the reshape2 and the add stay as two ops (and two quantised tensors).
- **per-channel affine chains after a conv**: bias add, `batch_norm`, and per-channel or
  scalar `elementwise_mul`/`elementwise_add`/`scale` (PP-LCNetV3's learnable affine
  blocks). Lite folds a batch_norm only straight after a bias-free conv.
- **decomposed activations**: Paddle2ONNX writes hard_swish as
  `x * clip(x + 3, 0, 6) / 6` (five ops and three constant tensors) and hard_sigmoid as
  `clip(scale(x))`; our legalisation writes ONNX HardSwish as `x * HardSigmoid(x)`.

`fold_program` rewrites them: every chain `conv -> affine ops` becomes
`conv(W * a) -> elementwise_add(c, axis=1)` (which opt then folds into the conv's
bias), and the decomposed activations become `hard_swish` / `hard_sigmoid` ops. The
folded model is run against the unfolded one on evaluation samples; it is used only
if every output agrees (max abs and cosine within TOLERANCES["fold"],
edgekit/model/passes.py), else the build keeps the unfolded model and says why.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np

from edgekit.model.artifacts import StaticModel
from edgekit.model.parity import SameCheck, check_same

from . import program as prog
from edgekit.model.passes import TOLERANCES

log = logging.getLogger(__name__)

CONVS = ("conv2d", "depthwise_conv2d")


class _Graph:
    """One block's ops with producer/consumer lookups, and parameter values in a scope."""

    def __init__(self, block, scope, fetches: set[str]):
        self.block, self.scope, self.fetches = block, scope, fetches
        self.new_params = 0

    def producer(self, name: str):
        for op in self.block.ops:
            if name in op.output_arg_names:
                return op
        return None

    def consumers(self, name: str) -> list:
        return [op for op in self.block.ops if name in op.input_arg_names]

    def sole_consumer(self, name: str):
        users = self.consumers(name)
        return users[0] if len(users) == 1 and name not in self.fetches else None

    def value(self, name: str) -> np.ndarray | None:
        """A persistable's value, or a fill_constant's, else None (computed at run time)."""
        var = self.block._find_var_recursive(name)
        if var is not None and var.persistable:
            found = self.scope.find_var(name)
            return None if found is None else np.array(found.get_tensor())
        op = self.producer(name)
        if op is not None and op.type == "reshape2" and not op.input("Shape") and not op.input("ShapeTensor"):
            source, shape = self.value(op.input("X")[0]), [int(d) for d in op.attr("shape")]
            if source is not None and all(d > 0 for d in shape) and int(np.prod(shape)) == source.size:
                return source.reshape(shape)
            return None
        if op is not None and op.type == "fill_constant" and not op.input_arg_names:
            shape = [int(d) for d in op.attr("shape")] or [1]
            text = op.attr("str_value")
            return np.full(shape, float(text) if text else op.attr("value"), np.float32)
        return None

    def scalar(self, name: str) -> float | None:
        value = self.value(name)
        return float(value.ravel()[0]) if value is not None and value.size == 1 else None

    def param(self, base: str, value: np.ndarray) -> str:
        import paddle

        name = f"{base}_f{self.new_params}"          # short: every name is stored in the .nb's graph
        self.new_params += 1
        self.block.create_var(name=name, shape=list(value.shape), dtype="float32", persistable=True)
        self.scope.var(name).get_tensor().set(np.ascontiguousarray(value, np.float32), paddle.CPUPlace())
        return name

    def index(self, op) -> int | None:
        return next((i for i, o in enumerate(self.block.ops) if o is op), None)

    def remove(self, ops) -> None:
        for op in ops:
            self.block._remove_op(self.index(op))

    def remove_dead_constants(self) -> None:
        """fill_constant and reshape2 ops whose outputs nothing reads any more."""
        for op in list(self.block.ops):
            outputs = [n for n in op.output_arg_names if not n.endswith("XShape") and "xshape" not in n.lower()]
            if op.type in ("fill_constant", "reshape2") and not any(n in self.fetches or self.consumers(n) for n in outputs):
                self.remove([op])


def _channel_vector(graph: _Graph, op, cur: str, channels: int) -> np.ndarray | None:
    """The per-channel vector an elementwise op applies to `cur` (NCHW), or None when it is not one."""
    other = op.input("Y")[0] if op.input("X")[0] == cur else op.input("X")[0]
    if other == cur:
        return None
    value = graph.value(other)
    if value is None:
        return None
    if value.size == 1:
        return np.full(channels, float(value.ravel()[0]), np.float64)
    if value.size != channels:
        return None
    axis = op.attr("axis") if op.has_attr("axis") else -1
    shape = tuple(value.shape)
    if (len(shape) == 1 and axis == 1) or shape in ((1, channels, 1, 1), (channels, 1, 1)):
        return value.astype(np.float64).ravel()
    return None


def _affine_step(graph: _Graph, op, cur: str, channels: int, a: np.ndarray, c: np.ndarray):
    """(a, c) after `op`, for y = a * conv(x) + c per output channel; None when `op` is not per-channel affine."""
    kind = op.type
    if kind in ("elementwise_add", "elementwise_mul", "elementwise_sub"):
        if kind == "elementwise_sub" and op.input("X")[0] != cur:
            return None
        v = _channel_vector(graph, op, cur, channels)
        if v is None:
            return None
        if kind == "elementwise_mul":
            return a * v, c * v
        return (a, c + v) if kind == "elementwise_add" else (a, c - v)
    if kind == "batch_norm" and (op.attr("is_test") or op.attr("use_global_stats")):
        values = [graph.value(op.input(k)[0]) for k in ("Scale", "Bias", "Mean", "Variance")]
        if any(v is None or v.size != channels for v in values) or op.attr("data_layout") not in ("NCHW", "AnyLayout"):
            return None
        gamma, beta, mean, var = (v.astype(np.float64).ravel() for v in values)
        s = gamma / np.sqrt(var + op.attr("epsilon"))
        return a * s, (c - mean) * s + beta
    if kind == "scale" and not op.input("ScaleTensor"):
        s, b = op.attr("scale"), op.attr("bias")
        return (a * s, c * s + b) if op.attr("bias_after_scale") else (a * s, (c + b) * s)
    return None


def _fold_conv_chains(graph: _Graph) -> int:
    folded = 0
    for conv in [op for op in graph.block.ops if op.type in CONVS]:     # chains never contain a conv: none is removed
        weight = graph.value(conv.input("Filter")[0])
        layout = conv.attr("data_format") if conv.has_attr("data_format") else "NCHW"
        if weight is None or weight.ndim != 4 or layout not in ("NCHW", "AnyLayout"):
            continue
        channels = weight.shape[0]
        a, c = np.ones(channels), np.zeros(channels)
        cur, chain = conv.output("Output")[0], []
        while True:
            op = graph.sole_consumer(cur)
            if op is None:
                break
            step = _affine_step(graph, op, cur, channels, a, c)
            if step is None:
                break
            a, c = step
            chain.append(op)
            cur = op.output("Out" if op.type != "batch_norm" else "Y")[0]
        canonical = len(chain) == 1 and chain[0].type == "elementwise_add" and graph.block._find_var_recursive(
            chain[0].input("Y")[0]).persistable and chain[0].attr("axis") == 1
        lite_folds = [op.type for op in chain] == ["batch_norm"]     # opt's conv_bn_fuse_pass folds a lone BN itself
        if not chain or canonical or lite_folds:
            continue
        filter_name = conv.input("Filter")[0]
        conv._rename_input(filter_name, graph.param(filter_name, weight * a.reshape(-1, 1, 1, 1)))
        bias = graph.param(filter_name.replace(".w_", ".b_"), c)
        at = graph.index(chain[0])
        graph.remove(chain)
        graph.block._insert_op(at, type="elementwise_add", inputs={"X": [graph.block.var(conv.output("Output")[0])],
                                                                    "Y": [graph.block.var(bias)]},
                               outputs={"Out": [graph.block.var(cur)]}, attrs={"axis": 1})
        folded += 1
    return folded


def _recompose_activations(graph: _Graph) -> Counter:
    made: Counter = Counter()
    for op in list(graph.block.ops):
        if graph.index(op) is None or op.type != "clip":      # gone with an earlier rewrite (its desc is freed)
            continue
        lo = graph.scalar(op.input("Min")[0]) if op.input("Min") else op.attr("min")
        hi = graph.scalar(op.input("Max")[0]) if op.input("Max") else op.attr("max")
        src = graph.producer(op.input("X")[0])
        if src is None or graph.sole_consumer(src.output("Out")[0]) is not op:
            continue
        if (lo, hi) == (0.0, 1.0) and src.type == "scale" and src.attr("bias_after_scale") and not src.input("ScaleTensor"):
            x, out = src.input("X")[0], op.output("Out")[0]
            attrs = {"slope": float(src.attr("scale")), "offset": float(src.attr("bias"))}
            at = graph.index(src)
            graph.remove([src, op])          # their descs are freed: read everything before
            graph.block._insert_op(at, type="hard_sigmoid", inputs={"X": [graph.block.var(x)]},
                                   outputs={"Out": [graph.block.var(out)]}, attrs=attrs)
            made["hard_sigmoid"] += 1
        elif (lo, hi) == (0.0, 6.0) and src.type == "elementwise_add":
            x = _hardswish_input(graph, src, op)
            if x is None:
                continue
            mul = graph.sole_consumer(op.output("Out")[0])
            last = graph.sole_consumer(mul.output("Out")[0])
            divisor = graph.scalar(last.input("Y")[0]) if last.type == "elementwise_div" else None
            if divisor != 6.0:
                continue
            at = graph.index(src)
            out = last.output("Out")[0]
            graph.remove([src, op, mul, last])
            graph.block._insert_op(at, type="hard_swish", inputs={"X": [graph.block.var(x)]},
                                   outputs={"Out": [graph.block.var(out)]},
                                   attrs={"threshold": 6.0, "scale": 6.0, "offset": 3.0})
            made["hard_swish"] += 1
    # x * hard_sigmoid(x; 1/6, 1/2) (ONNX HardSwish as legalised, or an exporter's own form)
    for op in list(graph.block.ops):
        if graph.index(op) is None or op.type != "hard_sigmoid" or abs(op.attr("slope") - 1 / 6) > 1e-6 \
                or abs(op.attr("offset") - 0.5) > 1e-6:
            continue
        mul = graph.sole_consumer(op.output("Out")[0])
        x = op.input("X")[0]
        if mul is None or mul.type != "elementwise_mul" or sorted(mul.input_arg_names) != sorted([x, op.output("Out")[0]]):
            continue
        at = graph.index(op)
        out = mul.output("Out")[0]
        graph.remove([op, mul])
        graph.block._insert_op(at, type="hard_swish", inputs={"X": [graph.block.var(x)]}, outputs={"Out": [graph.block.var(out)]},
                               attrs={"threshold": 6.0, "scale": 6.0, "offset": 3.0})
        made["hard_swish"] += 1
    return made


def _hardswish_input(graph: _Graph, add, clip) -> str | None:
    """x when `add` is x + 3 and clip's sole consumer multiplies the clip by the same x, else None."""
    for x, three in ((add.input("X")[0], add.input("Y")[0]), (add.input("Y")[0], add.input("X")[0])):
        if graph.scalar(three) != 3.0:
            continue
        mul = graph.sole_consumer(clip.output("Out")[0])
        if mul is not None and mul.type == "elementwise_mul" and sorted(mul.input_arg_names) == sorted([x, clip.output("Out")[0]]):
            last = graph.sole_consumer(mul.output("Out")[0])
            if last is not None and last.type == "elementwise_div":
                return x
    return None


def fold_program(model: StaticModel, out_dir: Path) -> tuple[StaticModel, dict] | None:
    """The folded model written to `out_dir` and what was folded, or None when nothing applies (no check yet)."""
    with prog.editing(model.model_file) as (program, feed_names, fetch_vars, scope, exe):
        block = program.global_block()
        before = Counter(op.type for op in block.ops)
        graph = _Graph(block, scope, {v.name for v in fetch_vars})
        made = _recompose_activations(graph)
        chains = _fold_conv_chains(graph)
        graph.remove_dead_constants()
        after = Counter(op.type for op in block.ops)
        if before == after and not chains:
            return None
        folded_program, _, fetches = prog.save_edited(program, exe, out_dir, [block.var(n) for n in feed_names],
                                                      fetch_vars)
    folded = StaticModel(out_dir / "model.pdmodel", out_dir / "model.pdiparams", model.feeds, tuple(fetches), model.origin,
                         prog.op_types(folded_program), model.sources, model.check)
    report = {"conv_chains_folded": chains, "activations": dict(made),
              "ops": {"before": sum(before.values()), "after": sum(after.values())},   # feed/fetch included
              "op_types_before": dict(before), "op_types_after": dict(after)}
    return folded, report


def check(model: StaticModel, folded: StaticModel, samples: dict[str, np.ndarray]) -> SameCheck:
    """The folded model against the unfolded one on the same inputs: figures per output, and whether all pass."""
    from .runner import StaticRunner

    before = StaticRunner(model).run(samples)
    after = StaticRunner(folded).run(samples)
    return check_same(before, after, model.fetches, TOLERANCES["fold"], "folded vs unfolded")
