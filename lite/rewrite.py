"""Program rewrites that let opt 2.13rc0 convert models it would otherwise crash on or get wrong.

`lite_safe` applies them all before every conversion, each checked numerically against the
program as it was (docs/toolchain.md lists what was measured):

- `restore_attributes`: attributes Paddle 2.6 drops on save and opt requires (relu6's threshold);
- `zero_d_constants`: 0-D `fill_constant`s, which Lite aborts on, become [1];
- `zero_d_reshapes`: `reshape2` to 0-D (an empty `shape` and no shape tensor: ONNX `Reshape(x, [])` through X2Paddle),
  which Lite's runtime aborts on, x86 and ARM alike, reshapes to [1];
- `whole_tensor_reductions`: reductions over every element, which Lite's ARM kernels get wrong;
- `constant_pad_value`: `pad3d` with a constant value, which Lite pads with zeros;
- `scale_after_activation`: a `scale` after a conv-fused activation, which opt folds into the conv;
- `depthwise_even_stride` (ARM): a depthwise conv with strides (2, 1) or (1, 2), common in OCR models, has no
  depthwise kernel in Lite (they need equal strides) and runs as a scalar im2col plus one tiny GEMM per channel
  (PP-OCR cls: 6.35 M of 20 M instructions per inference, INT8 and FP32 alike; docs/costs.md). It becomes the same
  conv at stride 1 (Lite's SIMD depthwise kernels) and a `strided_slice` keeping every second row (or column),
  placed after what Lite fuses into the conv (dequantize, bias, activation), so nothing else changes;
- `scalar_constants_per_channel` (ARM): `x * a` and `x + b` with a learned one-element `a`, `b` (PP-LCNetV3's
  learnable affine blocks, every layer of PP-OCRv4 det and rec) run on Lite's generic broadcast path, value by value
  (PP-OCRv4 det: 581 M of 917 M instructions per inference); with the constant repeated per channel (axis 1) they
  take the vectorised per-channel path (same outputs, bit for bit, on Lite's ARM kernels);
- `two_row_pools` (ARM): a 2x2 stride-2 pool over a tensor two rows high (PP-OCR cls's last max pool, on
  [N, 200, 2, 96]) misses Lite's NEON 2x2 kernel, which wants the input larger than the window both ways, and runs
  the scalar `pooling_basic`, which compares the pooling type as a string per value (cls: 4.34 M of 11.7 M INT8
  instructions, the per-op profile). The input is stacked on itself (a `concat` along H: [N, C, 4, W], a memcpy),
  pooled on the NEON path into two equal rows, and the first kept (a `split` along H, a memcpy): the same values;
- `flatten_to_reshape` (x86; for arm only when opt crashed without it: lite/safe.py convert_safe
  retries, measured on MobileNetV2): opt segfaults on Paddle 2.6's `flatten_contiguous_range`
  (Lite's op expects an `XShape` output Paddle 2.6 no longer writes); `reshape2` with shape
  `[0]*start + [-1] + [0]*(ndim-stop-1)` computes the same tensor.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgekit.model.artifacts import StaticModel
from edgekit.core.errors import ConversionError
from edgekit.export import program as prog
from edgekit.export.runner import StaticRunner
from edgekit.model.parity import check_same
from edgekit.model.parity import SameCheck
from edgekit.model.passes import TOLERANCES, Pass, PassResult, run_passes


@dataclass(frozen=True)
class OpRewrite:
    """A rewrite op by op, the form of most rewrites here; called as every rewrite is: (model, out_dir, samples).

    The program is parsed and every op of every block that `matches(block, op)` is rewritten by `replace(block, index,
    op)`, which returns the index after what it wrote. When no op matched, the model comes back as it was; else the
    program is saved beside its parameters, checked against the one before (`what` names the rewrite in a failed
    check) and recorded: `rewrite`, `reason`, how many `ops`, the check's `max_abs`. A new rewrite of this form is its
    two functions, one `OpRewrite` and one row in REWRITES.
    """
    what: str
    matches: Callable[..., bool]                  # (block, op)
    replace: Callable[..., int]                   # (block, index, op) -> the index after what it wrote
    rewrite: str
    reason: str

    def __call__(self, model: StaticModel, out_dir: Path, samples: dict[str, np.ndarray]) -> PassResult[StaticModel]:
        program = prog.parse_program(model.model_file)
        replaced = _each_op(program, self.matches, self.replace)
        if not replaced:
            return PassResult(model)
        rewritten, found = _publish(program.desc.serialize_to_string(), prog.op_types(program), model, out_dir,
                                    samples, self.what)
        return PassResult(rewritten, found, {"rewrite": self.rewrite, "reason": self.reason, "ops": replaced,
                                             "max_abs": found.worst_max_abs})


def _each_op(program, matches, replace) -> int:
    """Every op of every block that `matches(block, op)` is rewritten by `replace(block, index, op)`, which returns the
    index after what it wrote; returns how many were."""
    replaced = 0
    for block in program.blocks:
        index = 0
        while index < len(block.ops):
            op = block.ops[index]
            if matches(block, op):
                index = replace(block, index, op)
                replaced += 1
            else:
                index += 1
    return replaced


def _replace_flatten(block, index: int, op) -> int:
    x_name, out_name = op.input("X")[0], op.output("Out")[0]
    x_var = block.var(x_name)
    ndim = len(x_var.shape)
    start, stop = op.attr("start_axis"), op.attr("stop_axis")
    start, stop = start % ndim if ndim else 0, stop % ndim if ndim else 0
    shape = [0] * start + [-1] + [0] * (ndim - stop - 1)
    xshape = block.create_var(name=f"{out_name}.edgekit_xshape", shape=[0, *x_var.shape], dtype=x_var.dtype,
                              stop_gradient=True)
    block._insert_op(index, type="reshape2", inputs={"X": [x_var]},
                     outputs={"Out": [block.var(out_name)], "XShape": [xshape]}, attrs={"shape": shape})
    block._remove_op(index + 1)
    return index + 1


flatten_to_reshape = OpRewrite(
    "the flatten->reshape2 rewrite", lambda block, op: op.type == "flatten_contiguous_range", _replace_flatten,
    rewrite="flatten_contiguous_range -> reshape2",
    reason="paddle_lite_opt 2.13rc0 crashes on flatten_contiguous_range (x86; arm on some programs)")


# Activations Paddle-Lite 2.13 fuses into a preceding conv (conv_activation_fuse_pass and its kin).
CONV_FUSED_ACTIVATIONS = ("relu", "relu6", "leaky_relu", "hard_swish", "hard_sigmoid", "sigmoid", "tanh", "swish",
                          "abs", "prelu", "silu", "gelu", "elu")


CONV_FUSED_BEFORE_ACTIVATION = ("elementwise_add", "batch_norm")   # what opt folds into a conv ahead of its activation
CONVS = ("conv2d", "depthwise_conv2d", "conv2d_transpose", "depthwise_conv2d_transpose")


def _misfused_scale(block, op) -> bool:
    return (op.type == "scale" and not op.input("ScaleTensor") and _after_conv_activation(block, op.input("X")[0])
            and not (float(op.attr("scale")) == 1.0 and float(op.attr("bias")) == 0.0))   # an identity folds harmlessly


def _after_conv_activation(block, name: str) -> bool:
    """Is `name` the output of an activation Lite fuses into a conv (conv -> [bias add, BN] -> act)?"""
    producers = {out: op for op in block.ops for out in op.output_arg_names}
    act = producers.get(name)
    if act is None or act.type not in CONV_FUSED_ACTIVATIONS:
        return False
    source = producers.get(act.input("X")[0])
    while source is not None and source.type in CONV_FUSED_BEFORE_ACTIVATION:
        source = producers.get(source.input("X")[0])
    return source is not None and source.type in CONVS


def _replace_scale(block, index: int, op) -> int:
    """Insert the equivalent elementwise ops at `index`, remove the scale; returns the index after them."""
    x_var, out_var = block.var(op.input("X")[0]), block.var(op.output("Out")[0])
    a, b, after = float(op.attr("scale")), float(op.attr("bias")), bool(op.attr("bias_after_scale"))
    steps = ([("elementwise_mul", a)] if a != 1.0 else []) + ([("elementwise_add", b if after else b * a)] if b != 0.0 else [])
    current = x_var
    for position, (kind, value) in enumerate(steps):
        const = block.create_var(name=f"{out_var.name}.edgekit_{kind}_c", shape=[1], dtype=x_var.dtype, stop_gradient=True)
        block._insert_op(index, type="fill_constant", outputs={"Out": [const]},
                         attrs={"shape": [1], "value": value, "dtype": x_var.dtype, "str_value": ""})
        last = position == len(steps) - 1
        target = out_var if last else block.create_var(name=f"{out_var.name}.edgekit_{kind}", shape=out_var.shape,
                                                        dtype=x_var.dtype, stop_gradient=True)
        block._insert_op(index + 1, type=kind, inputs={"X": [current], "Y": [const]}, outputs={"Out": [target]},
                         attrs={"axis": -1})
        current, index = target, index + 2
    block._remove_op(index)
    return index


# `act -> scale` becomes `act -> elementwise_mul/elementwise_add` by constants.
#
# opt 2.13rc0 fuses an activation into the conv before it, and then a following `scale`
# into the same conv's weights and bias (`ConvScaleFuser` does not check that the conv
# already carries an activation): `scale(act(conv(x)))` becomes `act(scale(conv(x)))`, a
# silently wrong model (conv-BN-hard_swish-scale: max abs 1.18 against Paddle). Lite fuses
# no elementwise op after an activation, so the same arithmetic written that way is kept.
scale_after_activation = OpRewrite(
    "the scale -> elementwise rewrite", _misfused_scale, _replace_scale,
    rewrite="scale after a conv-fused activation -> elementwise_mul/elementwise_add",
    reason="paddle_lite_opt 2.13rc0 folds such a scale into the conv before the activation (ConvScaleFuser), which "
           "changes what the model computes")


def _publish(data: bytes, op_types: tuple[str, ...], model: StaticModel, out_dir: Path, samples: dict[str, np.ndarray],
             what: str) -> tuple[StaticModel, SameCheck]:
    """The rewritten program beside a copy of the parameters, checked against the program as it was."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "model.pdmodel"
    target.write_bytes(data)
    shutil.copyfile(model.params_file, out_dir / "model.pdiparams")
    rewritten = StaticModel(target, out_dir / "model.pdiparams", model.feeds, model.fetches, model.origin, op_types,
                            model.sources, model.check)
    before = StaticRunner(model).run(samples)
    after = StaticRunner(rewritten).run(samples)
    return rewritten, check_same(before, after, model.fetches, TOLERANCES["lite-rewrite"], what)


def _replace_pad(block, index: int, op) -> int:
    value = float(op.attr("value"))
    x_var, out_var = block.var(op.input("X")[0]), block.var(op.output("Out")[0])
    shifted = block.create_var(name=f"{out_var.name}.edgekit_shifted", shape=x_var.shape, dtype=x_var.dtype,
                               stop_gradient=True)
    padded = block.create_var(name=f"{out_var.name}.edgekit_padded", shape=out_var.shape, dtype=x_var.dtype,
                              stop_gradient=True)
    block._insert_op(index, type="scale", inputs={"X": [x_var]}, outputs={"Out": [shifted]},
                     attrs={"scale": 1.0, "bias": -value, "bias_after_scale": True})
    op._rename_input(x_var.name, shifted.name)
    op._rename_output(out_var.name, padded.name)
    op._set_attr("value", 0.0)
    block._insert_op(index + 2, type="scale", inputs={"X": [padded]}, outputs={"Out": [out_var]},
                     attrs={"scale": 1.0, "bias": value, "bias_after_scale": True})
    return index + 3


# `pad3d(x, mode="constant", value=v)` becomes `pad3d(x - v, value=0) + v`.
#
# Paddle-Lite 2.13 pads with zeros whatever `value` says (x86 and ARM alike: a pad of 0.5 came
# out 0.0 on a Paddle 2.6 export); padding with zero is what it does right.
constant_pad_value = OpRewrite(
    "the constant-pad rewrite", lambda block, op: op.type == "pad3d" and op.attr("mode") == "constant"
    and float(op.attr("value")) != 0.0 and not op.input("Paddings"), _replace_pad,
    rewrite="pad3d(value=v) -> scale(-v), pad3d(value=0), scale(+v)",
    reason="Paddle-Lite 2.13 pads with zeros whatever pad3d's value is")


# Attributes Lite 2.13's ops read unconditionally but Paddle 2.6's save drops as "extra" (opt aborts: "No attributes
# called threshold found for relu6", e.g. on every MobileNetV2 exported by Paddle 2.6).
LITE_REQUIRED_ATTRS = {"relu6": ("threshold",), "swish": ("beta",), "hard_swish": ("threshold", "scale", "offset"),
                       "hard_sigmoid": ("slope", "offset"), "leaky_relu": ("alpha",), "elu": ("alpha",),
                       "mish": ("threshold",), "softplus": ("beta", "threshold"), "gelu": ("approximate",)}


def restore_attributes(model: StaticModel, out_dir: Path,
                       samples: dict[str, np.ndarray]) -> PassResult[StaticModel]:
    """Write back, with Paddle's own defaults, the attributes Lite needs that the saved program lacks."""
    from paddle.base.proto import framework_pb2

    raw = framework_pb2.ProgramDesc()
    raw.ParseFromString(model.model_file.read_bytes())
    full = framework_pb2.ProgramDesc()    # Paddle 2.6 fills every attribute's default when it parses a program
    full.ParseFromString(prog.parse_program(model.model_file).desc.serialize_to_string())
    restored: dict[str, int] = {}
    for raw_block, full_block in zip(raw.blocks, full.blocks):
        for raw_op, full_op in zip(raw_block.ops, full_block.ops):
            wanted = LITE_REQUIRED_ATTRS.get(raw_op.type, ())
            have = {a.name for a in raw_op.attrs}
            for attr in full_op.attrs:
                if attr.name in wanted and attr.name not in have:
                    raw_op.attrs.add().CopyFrom(attr)
                    key = f"{raw_op.type}.{attr.name}"
                    restored[key] = restored.get(key, 0) + 1
    if not restored:
        return PassResult(model)
    rewritten, found = _publish(raw.SerializeToString(), model.op_types, model, out_dir, samples, "restoring attributes")
    return PassResult(rewritten, found, {"rewrite": "attributes Lite requires restored with Paddle's defaults",
                                         "attributes": restored, "max_abs": found.worst_max_abs,
                                         "reason": "Paddle 2.6 saves programs without them; opt 2.13rc0 aborts"})


REDUCES = ("reduce_mean", "reduce_sum", "reduce_max", "reduce_min")


def _reduces_everything(block, op) -> bool:
    if op.type not in REDUCES:
        return False
    rank = len(block._var_recursive(op.input("X")[0]).shape)
    return rank >= 2 and (op.attr("reduce_all") or sorted({d % rank for d in op.attr("dim")}) == list(range(rank)))


def _replace_reduction(block, index: int, op) -> int:
    x_name = op.input("X")[0]
    x_var, out_var = block._var_recursive(x_name), block.var(op.output("Out")[0])
    rank = len(x_var.shape)
    flat = block.create_var(name=f"{out_var.name}.edgekit_flat", shape=[1, -1], dtype=x_var.dtype, stop_gradient=True)
    xshape = block.create_var(name=f"{out_var.name}.edgekit_flat_xshape", shape=[0, *x_var.shape],
                              dtype=x_var.dtype, stop_gradient=True)
    block._insert_op(index, type="reshape2", inputs={"X": [x_var]}, outputs={"Out": [flat], "XShape": [xshape]},
                     attrs={"shape": [1, -1]})
    op._rename_input(x_name, flat.name)
    op._set_attr("dim", [1])
    op._set_attr("reduce_all", False)
    if not op.attr("keep_dim"):
        return index + 2
    # [1, 1] back to the rank the model expects ([1] * rank)
    reduced = block.create_var(name=f"{out_var.name}.edgekit_reduced", shape=[1, 1], dtype=x_var.dtype,
                               stop_gradient=True)
    op._rename_output(out_var.name, reduced.name)
    shape_out = block.create_var(name=f"{out_var.name}.edgekit_xshape", shape=[0, 1, 1], dtype=x_var.dtype,
                                 stop_gradient=True)
    block._insert_op(index + 2, type="reshape2", inputs={"X": [reduced]},
                     outputs={"Out": [out_var], "XShape": [shape_out]}, attrs={"shape": [1] * rank})
    return index + 3


# A reduction over every element becomes `reshape2(x, [1, -1])` reduced over axis 1.
#
# Lite 2.13's ARM `reduce_mean` with `reduce_all` returns a wrong value (measured: max abs 0.63 on a
# mean of ~0.9; x86 is right), and it refuses more than two explicit dims; over one flattened
# axis it is exact.
whole_tensor_reductions = OpRewrite(
    "the whole-tensor reduction rewrite", _reduces_everything, _replace_reduction,
    rewrite="reduction over every element -> reshape2(x, [1, -1]) reduced over axis 1",
    reason="Paddle-Lite 2.13's ARM reduce_mean with reduce_all computes a wrong value")


def _zero_d_constant(block, op) -> bool:
    computed = any(op.input(name) for name in ("ShapeTensor", "ShapeTensorList") if name in op.input_names)
    return op.type == "fill_constant" and not list(op.attr("shape")) and not computed


def _shape_one(block, index: int, op) -> int:
    """The op's `shape` attribute and its output's shape become [1], in place."""
    op._set_attr("shape", [1])
    out = op.output("Out")[0]
    # a fill_constant's output is looked up in its own block only (block.var raises for a parent block's), a
    # reshape's in the enclosing blocks too: as each rewrite did before they shared this function
    (block.var(out) if op.type == "fill_constant" else block._var_recursive(out)).desc.set_shape([1])
    return index + 1


# `fill_constant` with shape [] (Paddle 2.6 writes a Python float that way) becomes shape [1]: Lite 2.13 aborts
# on it (`FillConstantOp::InferShapeImpl: no valid out_shape`, SIGABRT, in the process that loads the .nb).
zero_d_constants = OpRewrite(
    "the 0-D constant rewrite", _zero_d_constant, _shape_one, rewrite="fill_constant shape [] -> [1]",
    reason="Paddle-Lite 2.13 aborts on a 0-D fill_constant")


def _to_zero_d(block, op) -> bool:
    """A reshape whose target is the empty attribute alone (a reshape to 0-D)."""
    if op.type not in ("reshape2", "reshape"):
        return False
    computed = any(op.input(name) for name in ("Shape", "ShapeTensor") if name in op.input_names)
    return not computed and not list(op.attr("shape") or [])


# `reshape2(x, shape=[])` (x of one element, out 0-D) becomes `reshape2(x, shape=[1])`.
#
# Lite 2.13's ReshapeOp reads an empty `shape` attribute with no Shape/ShapeTensor input as "no shape given" and
# stops the process (`LOG(FATAL) input shape error` in InferShape, SIGABRT) when the predictor first runs; opt
# converts such a program without a word. Paddle 2.6 runs it (a 0-D tensor). X2Paddle writes it for ONNX
# `Reshape(x, [])`, as paddle2onnx exports the scalar of a PIR `stack` over shape values (the public
# PP-OCRv6_rec_small.onnx: a reshape to 0-D and one back to [1] feeding the `concat` that builds a reshape target).
# Lite has no 0-D tensors at all, so [1] is the only shape it can hold; the check holds the outputs to the program's.
zero_d_reshapes = OpRewrite(
    "the 0-D reshape rewrite", _to_zero_d, _shape_one, rewrite="reshape2 shape [] -> [1]",
    reason="Paddle-Lite 2.13 aborts on a reshape to 0-D (input shape error)")


DEPTHWISE = ("depthwise_conv2d", "conv2d")
# what follows a conv channel by channel and is fused into it by opt: slicing after them computes the same tensor
PER_CHANNEL_FOLLOWERS = ("fake_channel_wise_dequantize_max_abs", "fake_dequantize_max_abs", "dequantize_linear",
                         "elementwise_add", *CONV_FUSED_ACTIVATIONS)


def _uneven_depthwise(block, op) -> bool:
    if op.type not in DEPTHWISE or "Filter" not in op.input_names:
        return False
    strides, groups = list(op.attr("strides")), int(op.attr("groups") or 1)
    dilations = list(op.attr("dilations") or [1, 1])
    shape = list(block._var_recursive(op.input("Filter")[0]).shape)
    return (len(strides) == 2 and sorted(strides) == [1, 2] and dilations == [1, 1] and len(shape) == 4
            and shape[1] == 1 and groups == shape[0] > 1 and op.attr("padding_algorithm") in ("EXPLICIT", None, ""))


def _sole_consumer(block, name: str, after: int):
    users = [(i, op) for i, op in enumerate(block.ops) if i > after and name in op.input_arg_names]
    return users[0] if len(users) == 1 else (None, None)


def _main_output(op) -> str:
    for slot in ("Output", "Out", "Y"):
        if slot in op.output_names and op.output(slot):
            return op.output(slot)[0]
    return op.output_arg_names[0]


def _stride1_length(block, op, axis: int) -> int:
    """The conv's output length along `axis` at stride 1, from the program's static shapes; a large end (the slice
    clamps it) when the input's size there is not fixed."""
    size = list(block._var_recursive(op.input("Input")[0]).shape)[axis]
    kernel = list(block._var_recursive(op.input("Filter")[0]).shape)[axis]
    pads = list(op.attr("paddings") or [0, 0])
    before, after = (pads[axis - 2], pads[axis - 2]) if len(pads) == 2 else (pads[2 * (axis - 2)], pads[2 * (axis - 2) + 1])
    return size + before + after - kernel + 1 if size and size > 0 else 2 ** 31 - 1


def _replace_uneven_depthwise(block, index: int, op) -> int:
    axis = 2 if list(op.attr("strides"))[0] == 2 else 3
    length = _stride1_length(block, op, axis)
    op._set_attr("strides", [1, 1])
    # walk forward over what opt fuses into the conv (each the sole consumer of the one before)
    last_index, last = index, op
    while True:
        at, user = _sole_consumer(block, _main_output(last), last_index)
        if user is None or user.type not in PER_CHANNEL_FOLLOWERS or (
                user.type == "elementwise_add" and not block._var_recursive(user.input("Y")[0]).persistable):
            break
        last_index, last = at, user
    out_name = _main_output(last)
    out_var = block.var(out_name)
    shape = list(out_var.shape)
    shape[axis] = length if length < 2 ** 31 - 1 else -1
    full = block.create_var(name=f"{out_name}.edgekit_stride1", shape=shape, dtype=out_var.dtype, stop_gradient=True)
    last._rename_output(out_name, full.name)
    width = _stride1_length(block, op, 3)
    if axis == 2 and width < 2 ** 31 - 1 and 1 < length < 2 ** 31 - 1:
        return _keep_even_rows(block, last_index + 1, full, out_var, length, width)
    # every second element to the end, whatever the size at run time (the slice clamps the end): a line model's width
    # is not the program's
    block._insert_op(last_index + 1, type="strided_slice", inputs={"Input": [full]}, outputs={"Out": [out_var]},
                     attrs={"axes": [axis], "starts": [0], "ends": [2 ** 31 - 1], "strides": [2],
                            "infer_flags": [1], "decrease_axis": []})
    return last_index + 2


def _keep_even_rows(block, index: int, full, out_var, length: int, width: int) -> int:
    """Rows 0, 2, 4, ... of `full` [N, C, length, width] into `out_var`, with ops Lite runs as memcpy of whole rows
    (its strided_slice and slice copy value by value: measured 1.4 M and 1.8 M instructions on PP-OCR cls's four such
    convs): [N, C, 2m, W] viewed as [N, C, m, 2W] (a reshape, no copy) split into its first and second W columns;
    an odd length keeps its last row aside (split along H) and puts it back (concat)."""
    def var(suffix, shape):
        return block.create_var(name=f"{out_var.name}.edgekit_{suffix}", shape=shape, dtype=out_var.dtype,
                                stop_gradient=True)

    def op(kind, inputs, outputs, attrs):
        nonlocal index
        block._insert_op(index, type=kind, inputs=inputs, outputs=outputs, attrs=attrs)
        index += 1

    pairs, channels = length // 2, out_var.shape[1]
    head, last = full, None
    if length % 2:
        head, last = var("head_rows", [-1, channels, 2 * pairs, width]), var("last_row", [-1, channels, 1, width])
        op("split", {"X": [full]}, {"Out": [head, last]}, {"axis": 2, "num": 0, "sections": [2 * pairs, 1]})
    # the width stays free (-1, and halves by count): a line model runs at widths other than the program's
    viewed, xshape = var("row_pairs", [-1, channels, pairs, 2 * width]), var("row_pairs_xshape", [0, *full.shape])
    op("reshape2", {"X": [head]}, {"Out": [viewed], "XShape": [xshape]}, {"shape": [0, 0, pairs, -1]})
    even = var("even_rows", [-1, channels, pairs, width]) if last is not None else out_var
    op("split", {"X": [viewed]}, {"Out": [even, var("odd_rows", [-1, channels, pairs, width])]},
       {"axis": 3, "num": 2, "sections": []})
    if last is not None:
        op("concat", {"X": [even, last]}, {"Out": [out_var]}, {"axis": 2})
    return index


# A depthwise conv with strides (2, 1) / (1, 2) becomes the conv at stride 1 and a strided_slice (module doc).
depthwise_even_stride = OpRewrite(
    "the depthwise even-stride rewrite", _uneven_depthwise, _replace_uneven_depthwise,
    rewrite="depthwise conv strides (2,1)/(1,2) -> stride 1 + strided_slice",
    reason="Paddle-Lite 2.13's ARM depthwise kernels need equal strides; the fallback is a scalar im2col and a GEMM "
           "per channel")


def _two_row_pool(block, op) -> bool:
    if op.type != "pool2d" or op.attr("pooling_type") not in ("max", "avg"):
        return False
    if op.attr("global_pooling") or op.attr("adaptive") or op.attr("ceil_mode"):
        return False
    if (op.attr("data_format") or "NCHW") not in ("NCHW", "AnyLayout"):
        return False
    if op.attr("padding_algorithm") not in ("EXPLICIT", None, "") or any(int(p) for p in op.attr("paddings") or []):
        return False
    shape = list(block._var_recursive(op.input("X")[0]).shape)
    return (list(op.attr("ksize")) == [2, 2] and list(op.attr("strides")) == [2, 2] and len(shape) == 4
            and shape[2] == 2 and (shape[3] < 0 or shape[3] > 2))


def _replace_two_row_pool(block, index: int, op) -> int:
    x = block._var_recursive(op.input("X")[0])
    out = block.var(op.output("Out")[0])
    n, channels, _, width = x.shape

    def var(suffix, shape):
        return block.create_var(name=f"{out.name}.edgekit_{suffix}", shape=shape, dtype=out.dtype, stop_gradient=True)

    stacked = var("stacked", [n, channels, 4, width])
    block._insert_op(index, type="concat", inputs={"X": [x, x]}, outputs={"Out": [stacked]}, attrs={"axis": 2})
    pooled = var("two_rows", [n, channels, 2, out.shape[3]])
    op.desc.set_input("X", [stacked.name])
    op.desc.set_output("Out", [pooled.name])
    block._insert_op(index + 2, type="split", inputs={"X": [pooled]},
                     outputs={"Out": [out, var("second_row", [n, channels, 1, out.shape[3]])]},
                     attrs={"axis": 2, "num": 2, "sections": []})
    return index + 3


# A 2x2 stride-2 pool over two rows pools the input stacked twice and keeps the first row (module doc).
two_row_pools = OpRewrite(
    "the two-row pool rewrite", _two_row_pool, _replace_two_row_pool,
    rewrite="pool2d 2x2/2 over H = 2 -> concat [x, x] along H, the pool, the first row",
    reason="Paddle-Lite 2.13's ARM 2x2 pool kernel needs the input larger than the window in both dimensions; the "
           "fallback is a scalar loop with a string compare per value")


SCALAR_ELEMENTWISE = ("elementwise_add", "elementwise_mul", "elementwise_sub", "elementwise_div")
COMMUTATIVE = ("elementwise_add", "elementwise_mul")


def scalar_constants_per_channel(model: StaticModel, out_dir: Path,
                                 samples: dict[str, np.ndarray]) -> PassResult[StaticModel]:
    """An elementwise op between an NCHW tensor and a one-element parameter gets the parameter repeated per channel
    (axis 1); for add and mul the constant may be either operand (module doc)."""
    import paddle

    replaced = 0
    with prog.editing(model.model_file) as (program, feed_names, fetch_vars, scope, exe):
        block = program.global_block()
        for op in list(block.ops):
            operands = _tensor_and_scalar(block, op)
            if operands is None:
                continue
            tensor, scalar, channels = operands
            value = np.array(scope.find_var(scalar).get_tensor(), dtype=np.float32).reshape(-1)
            name = f"{scalar}.edgekit_per_channel_{channels}"
            if not block.has_var(name):
                block.create_var(name=name, shape=[channels], dtype=block.var(scalar).dtype, persistable=True)
                scope.var(name).get_tensor().set(np.full([channels], value[0], np.float32), paddle.CPUPlace())
            if op.input("X")[0] != tensor:                  # commutative: the tensor becomes X
                op.desc.set_input("X", [tensor])
            op.desc.set_input("Y", [name])
            op._set_attr("axis", 1)
            replaced += 1
        if not replaced:
            return PassResult(model)
        saved, _, fetches = prog.save_edited(program, exe, out_dir, [block.var(n) for n in feed_names], fetch_vars)
    rewritten = StaticModel(out_dir / "model.pdmodel", out_dir / "model.pdiparams", model.feeds, tuple(fetches),
                            model.origin, prog.op_types(saved), model.sources, model.check)
    found = check_same(StaticRunner(model).run(samples), StaticRunner(rewritten).run(samples), model.fetches,
                       TOLERANCES["lite-rewrite"], "the per-channel constant rewrite")
    return PassResult(rewritten, found, {
        "rewrite": "elementwise op with a one-element parameter -> the parameter per channel, axis 1",
        "ops": replaced, "max_abs": found.worst_max_abs,
        "reason": "Paddle-Lite 2.13's ARM elementwise kernels broadcast a one-element operand value by value; per "
                  "channel they are vectorised"})


def _tensor_and_scalar(block, op) -> tuple[str, str, int] | None:
    """(tensor, one-element parameter, channels) of an elementwise op that qualifies, else None."""
    if op.type not in SCALAR_ELEMENTWISE or op.attr("axis") not in (-1, None):
        return None
    x, y = op.input("X")[0], op.input("Y")[0]
    pairs = [(x, y)] + ([(y, x)] if op.type in COMMUTATIVE else [])
    for tensor, scalar in pairs:
        t, c = block._var_recursive(tensor), block._var_recursive(scalar)
        shape = list(t.shape)
        if (c.persistable and not t.persistable and int(np.prod(c.shape or [1])) == 1 and len(shape) == 4
                and shape[1] > 0):
            return tensor, scalar, shape[1]
    return None


def lite_safe(model: StaticModel, out_dir: Path, samples: dict[str, np.ndarray], x86: bool) -> tuple[StaticModel, tuple[dict, ...]]:
    """Every rewrite the program needs before opt, as passes of the pass manager (each checked against its input):
    the attributes Lite requires, 0-D constants and reshapes, whole-tensor reductions, the pad value and the scale trap always, the
    ARM speed-ups (unequal depthwise strides, one-element constants) unless EDGEKIT_SKIP_REWRITES names them, the
    flatten crash for x86 (the pad rewrite writes scales, so the scale rewrite runs after it). Returns the program and
    the record of each rewrite that changed it."""
    skipped = {n.strip() for n in os.environ.get(SKIP_ENV, "").split(",") if n.strip()}
    passes = [rewrite_pass(name, rewrite_program, out_dir, samples) for name, rewrite_program, only in REWRITES
              if (only is None or only == ("x86" if x86 else "arm")) and not (name in OPTIONAL and name in skipped)]
    model, records = run_passes(model, passes)
    return model, tuple(r.facts for r in records if r.changed)


def rewrite_pass(name: str, rewrite_program, out_dir: Path, samples: dict[str, np.ndarray]) -> Pass[StaticModel]:
    """One rewrite as a pass: its work folder is `out_dir/name`; a failed check fails the conversion."""
    return Pass("lite-rewrite", lambda m: rewrite_program(m, out_dir / name, samples), error=ConversionError,
                hint="report the model with this message: it cannot be converted safely")


# Rewrites that only make the .nb faster, and EDGEKIT_SKIP_REWRITES=name,... leaves out (to measure what they gain,
# docs/costs.md); the others are needed for a correct .nb and always run.
SKIP_ENV = "EDGEKIT_SKIP_REWRITES"
OPTIONAL = ("depthwise-stride", "per-channel-constants", "two-row-pools")

# In order: (folder, rewrite, only for "x86" / "arm" or None). The pad rewrite writes scales, so the scale rewrite
# comes after it.
REWRITES = (("attributes", restore_attributes, None), ("constants", zero_d_constants, None),
            ("zero-d-reshapes", zero_d_reshapes, None),
            ("reductions", whole_tensor_reductions, None), ("pad", constant_pad_value, None),
            ("scale", scale_after_activation, None), ("depthwise-stride", depthwise_even_stride, "arm"),
            ("per-channel-constants", scalar_constants_per_channel, "arm"),
            ("two-row-pools", two_row_pools, "arm"),
            ("flatten", flatten_to_reshape, "x86"))
