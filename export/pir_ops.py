"""PIR op -> legacy ProgramDesc op: one table, one small function per op family.

A PIR program (Paddle 3) and a legacy ProgramDesc (Paddle 2.6, what opt and PaddleSlim
read) describe the same kernels with different argument names: PIR's `pd_op.conv2d(input,
filter)` is the legacy `conv2d(Input, Filter) -> Output`; attributes that PIR turned into
operands (`reshape`'s shape, `scale`'s factor, `pool2d`'s kernel size) come from constant
ops (`pd_op.full`, `pd_op.full_int_array`) and go back into attributes. Each entry writes
exactly what Paddle 2.6's own export writes for the same layer, so the `.nb` opt makes is the
one a native export gives (and Lite never sees slots it misreads, like Paddle 3's empty
`BiasTensor` on `scale`).

The translators see an `Emitter` (`pir_translate.py`): `inp(op, name)` the legacy variable of
an operand, `const(op, name)` a constant operand's value, `out(op, i)` the variable for a
result, `temp(...)` an extra legacy output (XShape, saved statistics), `emit(...)` one op.
"""

from __future__ import annotations

from typing import Callable

UNARY = {   # PIR op -> (legacy op, attributes copied as (legacy name, PIR name, default))
    "relu": ("relu", ()), "relu6": ("relu6", (("threshold", None, 6.0),)), "sigmoid": ("sigmoid", ()),
    "tanh": ("tanh", ()), "hardswish": ("hard_swish", (("threshold", None, 6.0), ("scale", None, 6.0),
                                                        ("offset", None, 3.0))),
    "hardsigmoid": ("hard_sigmoid", (("slope", "slope", 0.1666667), ("offset", "offset", 0.5))),
    # Paddle 3's swish is x * sigmoid(x): Lite's silu. (Lite's swish needs a beta attribute Paddle 2.6 drops on save.)
    "swish": ("silu", ()), "silu": ("silu", ()), "gelu": ("gelu", (("approximate", "approximate", False),)),
    "leaky_relu": ("leaky_relu", (("alpha", "negative_slope", 0.02),)), "elu": ("elu", (("alpha", "alpha", 1.0),)),
    "exp": ("exp", ()), "sqrt": ("sqrt", ()), "rsqrt": ("rsqrt", ()), "abs": ("abs", ()), "log": ("log", ()),
    "square": ("square", ()), "floor": ("floor", ()), "erf": ("erf", ()), "sin": ("sin", ()), "cos": ("cos", ()),
    "mish": ("mish", (("threshold", "threshold", 20.0),)), "softplus": ("softplus", (("beta", "beta", 1.0),
                                                                                   ("threshold", "threshold", 20.0))),
    "hardtanh": ("brelu", (("t_min", "t_min", -1.0), ("t_max", "t_max", 1.0))),
    "logsigmoid": ("logsigmoid", ()), "reciprocal": ("reciprocal", ()),
}
BINARY = {"add": "elementwise_add", "subtract": "elementwise_sub", "multiply": "elementwise_mul",
          "divide": "elementwise_div", "maximum": "elementwise_max", "minimum": "elementwise_min",
          "elementwise_pow": "elementwise_pow", "remainder": "elementwise_mod", "floor_divide": "elementwise_floordiv"}
REDUCE = {"mean": "reduce_mean", "sum": "reduce_sum", "max": "reduce_max", "min": "reduce_min", "prod": "reduce_prod"}
COMPARE = {"equal": "equal", "not_equal": "not_equal", "less_than": "less_than", "less_equal": "less_equal",
           "greater_than": "greater_than", "greater_equal": "greater_equal"}
LOGICAL = {"logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor"}


def _copy(attrs: dict, *names: str) -> dict:
    return {n: attrs[n] for n in names if n in attrs}


def unary(e, op, legacy: str, table) -> None:
    attrs = {}
    for name, pir_name, default in table:
        attrs[name] = op["attrs"].get(pir_name, default) if pir_name else default
    e.emit(legacy, {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]}, attrs)


def binary(e, op, legacy: str) -> None:
    e.emit(legacy, {"X": [e.inp(op, "x")], "Y": [e.inp(op, "y")]}, {"Out": [e.out(op, 0)]}, {"axis": -1})


def conv(e, op, legacy: str) -> None:
    a = op["attrs"]
    e.emit(legacy, {"Input": [e.inp(op, "input")], "Filter": [e.inp(op, "filter")]}, {"Output": [e.out(op, 0)]},
           _copy(a, "strides", "paddings", "padding_algorithm", "dilations", "groups", "data_format"))


def conv_transpose(e, op, legacy: str) -> None:
    a = op["attrs"]
    attrs = _copy(a, "strides", "paddings", "output_padding", "padding_algorithm", "dilations", "groups", "data_format")
    size = e.const_or_none(op, "output_size")
    attrs["output_size"] = [int(v) for v in size] if size is not None else []
    e.emit(legacy, {"Input": [e.inp(op, "x")], "Filter": [e.inp(op, "filter")]}, {"Output": [e.out(op, 0)]}, attrs)


def batch_norm(e, op) -> None:
    a = op["attrs"]
    mean, variance = e.inp(op, "mean"), e.inp(op, "variance")
    # Paddle 2.6 writes the running statistics in place (MeanOut = Mean): opt's conv+BN fusion expects that shape
    outputs = {"Y": [e.out(op, 0)], "MeanOut": [mean], "VarianceOut": [variance],
               "SavedMean": [e.temp(op, "saved_mean", 3)], "SavedVariance": [e.temp(op, "saved_variance", 4)]}
    e.emit("batch_norm", {"X": [e.inp(op, "x")], "Scale": [e.inp(op, "scale")], "Bias": [e.inp(op, "bias")],
                          "Mean": [mean], "Variance": [variance]}, outputs,
           {"epsilon": a.get("epsilon", 1e-5), "momentum": a.get("momentum", 0.9), "is_test": True,
            "data_layout": a.get("data_format", "NCHW"), "use_global_stats": bool(a.get("use_global_stats", False)),
            "trainable_statistics": bool(a.get("trainable_statistics", False))})


def layer_norm(e, op) -> None:
    a = op["attrs"]
    inputs = {"X": [e.inp(op, "x")]}
    for legacy, pir in (("Scale", "scale"), ("Bias", "bias")):
        if e.has(op, pir):
            inputs[legacy] = [e.inp(op, pir)]
    e.emit("layer_norm", inputs, {"Y": [e.out(op, 0)], "Mean": [e.temp(op, "mean", 1)], "Variance": [e.temp(op, "variance", 2)]},
           {"epsilon": a.get("epsilon", 1e-5), "begin_norm_axis": a.get("begin_norm_axis", 1)})


def matmul(e, op) -> None:
    a = op["attrs"]
    e.emit("matmul_v2", {"X": [e.inp(op, "x")], "Y": [e.inp(op, "y")]}, {"Out": [e.out(op, 0)]},
           {"trans_x": bool(a.get("transpose_x", False)), "trans_y": bool(a.get("transpose_y", False))})


def scale(e, op) -> None:
    a = op["attrs"]
    # the factor is an operand in PIR; written as an attribute, with no BiasTensor slot (Lite 2.13 misreads it)
    factor = e.const(op, "scale")
    e.emit("scale", {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]},
           {"scale": float(factor[0] if isinstance(factor, list) else factor), "bias": float(a.get("bias", 0.0)),
            "bias_after_scale": bool(a.get("bias_after_scale", True))})


def with_xshape(e, op, legacy: str, attrs: dict, x: str = "x") -> None:
    e.emit(legacy, {"X": [e.inp(op, x)]}, {"Out": [e.out(op, 0)], "XShape": [e.xshape(op)]}, attrs)


def reshape(e, op) -> None:
    shape = _reshape_target(e, op)
    if shape is None:   # sizes computed at run time, as Paddle 2.6 writes them
        elements = e.list_of(op, "shape")
        rank = len(op["outputs"][0][2] or [])
        if len(elements) == 1 and rank > 1:      # the whole shape as one 1-D tensor: the Shape input (int32)
            inputs, attrs = {"X": [e.inp(op, "x")], "Shape": [e.tensor_of(op, elements[0], "int32")]}, {"shape": []}
        else:                                    # one tensor per dimension: ShapeTensor
            inputs = {"X": [e.inp(op, "x")], "ShapeTensor": [e.tensor_of(op, v, "int64") for v in elements]}
            # the constant sizes in the attribute too, as Paddle 2.6 writes it: its compile-time shape inference
            # reads them (0 = keep), so a conv after the reshape still sees its channel count
            attrs = {"shape": [int(e.const_value(v)) if e.is_const(v) else -1 for v in elements]}
        e.emit("reshape2", inputs, {"Out": [e.out(op, 0)], "XShape": [e.xshape(op)]}, attrs)
        return
    inferred = op["outputs"][0][2]
    if inferred is not None and all(d > 0 for d in inferred):
        shape = [int(d) for d in inferred]   # Paddle 2.6 writes the resolved shape ([1, 32, 1, 1], not [1, -1, 1, 1])
    with_xshape(e, op, "reshape2", {"shape": shape})


def _reshape_target(e, op) -> list[int] | None:
    """The target shape as numbers: constants, and `x.shape[i]` at position i written as 0 ("keep dimension i"),
    which is what `x.reshape([x.shape[0], -1])` means; None when a size is only known at run time."""
    source = dict(op["inputs"]).get("x")
    if not e.is_list(op, "shape"):
        return [int(v) for v in e.const(op, "shape")]
    shape = []
    for position, vid in enumerate(e.list_of(op, "shape")):
        if e.is_const(vid):
            shape.append(int(e.const_value(vid)))
        elif e.dims.get(vid) == (source, position):
            shape.append(0)
        else:
            return None
    return shape


def flatten(e, op) -> None:
    a = op["attrs"]
    with_xshape(e, op, "flatten_contiguous_range", {"start_axis": a.get("start_axis", 1), "stop_axis": a.get("stop_axis", -1)})


def transpose(e, op) -> None:
    with_xshape(e, op, "transpose2", {"axis": [int(v) for v in op["attrs"]["perm"]]})


def squeeze(e, op, legacy: str) -> None:
    with_xshape(e, op, legacy, {"axes": [int(v) for v in e.const(op, "axis")]})


def concat(e, op) -> None:
    e.emit("concat", {"X": e.inp_list(op, "x")}, {"Out": [e.out(op, 0)]}, {"axis": int(e.scalar(op, "axis"))})


def stack(e, op) -> None:
    axis = int(op["attrs"].get("axis", 0))
    elements = e.list_of(op, "x") if e.is_list(op, "x") else None
    scalars = elements is not None and all(e.rank_of(v) == 0 for v in elements)
    if not scalars:
        e.emit("stack", {"X": e.inp_list(op, "x")}, {"Y": [e.out(op, 0)]}, {"axis": axis})
        return
    # A stack of scalars (`x.reshape([0, 1, w, 120])` with w = shape(y)[3]): a shape built at run time. A reshape
    # reading it sees the scalars themselves (its ShapeTensor, what Paddle 2.6 writes for such a list); any other
    # reader gets the 1-D tensor, written as a concat of the scalars as [1] tensors (Paddle 2.6's stack refuses
    # to mix a 0-d slice with the [1] constants it writes). save_inference_model drops it when nothing reads it.
    dtype = op["outputs"][0][3]
    e.lists[op["outputs"][0][1]] = list(elements)
    e.emit("concat", {"X": [e.tensor_of(op, v, dtype, rank=1) for v in elements]}, {"Out": [e.out(op, 0)]}, {"axis": 0})


def split(e, op) -> None:
    """`pd_op.split`/`split_with_num` give one vector value; its elements come from the `builtin.split` after it."""
    attrs = {"axis": int(e.scalar(op, "axis"))}
    if op["op"].endswith("split_with_num"):
        attrs.update(num=int(op["attrs"]["num"]), sections=[])
    else:
        attrs.update(num=0, sections=[int(v) for v in e.const(op, "sections")])
    e.defer_vector(op, lambda outs: e.emit("split", {"X": [e.inp(op, "x")]}, {"Out": outs}, attrs))


def pool2d(e, op) -> None:
    a = op["attrs"]
    attrs = _copy(a, "strides", "paddings", "ceil_mode", "exclusive", "data_format", "pooling_type", "global_pooling",
                  "adaptive", "padding_algorithm")
    attrs["ksize"] = [int(v) for v in e.const(op, "kernel_size")]
    e.emit("pool2d", {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]}, attrs)


def softmax(e, op, legacy: str) -> None:
    e.emit(legacy, {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]}, {"axis": int(op["attrs"].get("axis", -1))})


def interp(e, op, legacy: str) -> None:
    a = op["attrs"]
    for name in ("out_size", "size_tensor", "scale_tensor"):
        if e.has(op, name):
            e.unsupported(op, f"a {name} operand (a size computed at run time); give the output size or scale as numbers")
    attrs = _copy(a, "out_d", "out_h", "out_w", "scale", "interp_method", "align_corners", "align_mode")
    attrs["data_layout"] = a.get("data_format", "NCHW")
    e.emit(legacy, {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]}, attrs)


def reduce(e, op, legacy: str) -> None:
    a = op["attrs"]
    axes = [int(v) for v in (e.const(op, "axis") if e.has(op, "axis") else a.get("axis", []))]
    # a reduction over everything is `dim: [], reduce_all: true`, as Paddle 2.6 writes it: Lite's ARM reduce_mean
    # crashes on `dim: [0], reduce_all: true` (x86 reads it right)
    e.emit(legacy, {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]},
           {"dim": axes, "keep_dim": bool(a.get("keepdim", False)), "reduce_all": not axes})


def clip(e, op) -> None:
    e.emit("clip", {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]},
           {"min": float(e.scalar(op, "min")), "max": float(e.scalar(op, "max"))})


def cast(e, op) -> None:
    e.emit("cast", {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]},
           {"in_dtype": e.var_dtype(e.dtype_of(op, "x")), "out_dtype": e.var_dtype(op["outputs"][0][3])})


def pow_(e, op) -> None:
    e.emit("pow", {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]}, {"factor": float(op["attrs"].get("y", 1.0))})


def slice_(e, op) -> None:
    a = op["attrs"]
    e.emit("slice", {"Input": [e.inp(op, "input")]}, {"Out": [e.out(op, 0)]},
           {"axes": [int(v) for v in a["axes"]], "starts": [int(v) for v in e.const(op, "starts")],
            "ends": [int(v) for v in e.const(op, "ends")], "infer_flags": [int(v) for v in a.get("infer_flags", [])],
            "decrease_axis": [int(v) for v in a.get("decrease_axis", [])]})
    _dim_of(e, op, "input", e.const(op, "starts"), e.const(op, "ends"), a["axes"])


def strided_slice(e, op) -> None:
    starts, ends, strides = (e.const(op, n) for n in ("starts", "ends", "strides"))
    e.emit("strided_slice", {"Input": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]},
           {"axes": [int(v) for v in op["attrs"]["axes"]], "starts": [int(v) for v in starts],
            "ends": [int(v) for v in ends], "strides": [int(v) for v in strides],
            "infer_flags": [1] * len(op["attrs"]["axes"]), "decrease_axis": []})
    if all(int(v) == 1 for v in strides):
        _dim_of(e, op, "x", starts, ends, op["attrs"]["axes"])


def gather(e, op) -> None:
    e.emit("gather", {"X": [e.inp(op, "x")], "Index": [e.inp(op, "index")]}, {"Out": [e.out(op, 0)]},
           {"axis": int(e.scalar(op, "axis")) if e.has(op, "axis") else 0})


def argmax(e, op) -> None:
    a = op["attrs"]
    e.emit("arg_max", {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]},
           {"axis": int(e.scalar(op, "axis")), "keepdims": bool(a.get("keepdims", False)),
            "flatten": bool(a.get("flatten", False)), "dtype": e.var_dtype(op["outputs"][0][3])})


def shape_(e, op) -> None:
    e.emit("shape", {"Input": [e.inp(op, "input")]}, {"Out": [e.out(op, 0)]}, {})
    e.shape_of[op["outputs"][0][1]] = dict(op["inputs"])["input"]


def _dim_of(e, op, source_operand: str, starts, ends, axes) -> None:
    """`shape(x)[i]`: remembered, so a reshape can say "keep dimension i" instead of computing it."""
    src = dict(op["inputs"]).get(source_operand)
    if src in e.shape_of and list(axes) == [0] and len(starts) == 1 and int(ends[0]) == int(starts[0]) + 1:
        e.dims[op["outputs"][0][1]] = (e.shape_of[src], int(starts[0]))


def pad3d(e, op) -> None:
    a = op["attrs"]
    e.emit("pad3d", {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]},
           {"paddings": [int(v) for v in e.const(op, "paddings")], "mode": a.get("mode", "constant"),
            "value": float(a.get("pad_value", 0.0)), "data_format": a.get("data_format", "NCDHW")})


def where(e, op) -> None:
    e.emit("where", {"Condition": [e.inp(op, "condition")], "X": [e.inp(op, "x")], "Y": [e.inp(op, "y")]},
           {"Out": [e.out(op, 0)]}, {})


def compare(e, op, legacy: str) -> None:
    e.emit(legacy, {"X": [e.inp(op, "x")], "Y": [e.inp(op, "y")]}, {"Out": [e.out(op, 0)]}, {"axis": -1})


def logical(e, op, legacy: str) -> None:
    e.emit(legacy, {"X": [e.inp(op, "x")], "Y": [e.inp(op, "y")]}, {"Out": [e.out(op, 0)]}, {})


def logical_not(e, op) -> None:
    e.emit("logical_not", {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]}, {})


def if_(e, op) -> None:
    """`pd_op.if` as Paddle 2.6's `static.nn.cond` writes a tensor-dependent `if` (what Lite 2.13 runs):

        conditional_block(Cond=[c], Input=[what block 1 reads], Out=[what it writes outside], Scope)  true ops + assign
        logical_not(c) -> n
        conditional_block(Cond=[n], ...)                                                             false ops + assign
        cast(c, int32) -> mask; per result: select_input(X=[false result, true result], Mask=mask)
    """
    if len(op["blocks"]) != 2:
        e.unsupported(op, f"an if with {len(op['blocks'])} blocks (edgekit knows a true and a false block)")
    for _, _, shape, _ in op["outputs"]:
        if shape is None:
            e.unsupported(op, "a result that is not a tensor (a list or an optional value)")
    here = e.position
    cond = e.inp(op, op["inputs"][0][0])
    cond_shape = e.block._var_recursive(cond).shape
    true_outs = _branch(e, op, 0, cond, here)
    not_cond = e.new_var("logical_not", cond_shape, "bool")
    e.emit("logical_not", {"X": [cond]}, {"Out": [not_cond]}, {})
    false_outs = _branch(e, op, 1, not_cond, here)
    if not op["outputs"]:
        return
    mask = e.new_var("cast", cond_shape, "int32")
    e.emit("cast", {"X": [cond]}, {"Out": [mask]}, {"in_dtype": e.var_dtype("bool"), "out_dtype": e.var_dtype("int32")})
    for index, (false_out, true_out) in enumerate(zip(false_outs, true_outs)):
        e.emit("select_input", {"X": [false_out, true_out], "Mask": [mask]}, {"Out": [e.out(op, index)]}, {})


def _branch(e, op, number: int, cond: str, here: str) -> list[str]:
    """One block of an `if` as a legacy sub-block under a `conditional_block`; returns the variables it fills."""
    ops = op["blocks"][number]
    if not ops or ops[-1]["op"] != "cf.yield" or len(ops[-1]["inputs"]) != len(op["outputs"]):
        e.unsupported(op, f"block {number} does not end by yielding one value per result of the if")
    outs = [e.new_var("cond_out", shape, dtype) for _, _, shape, dtype in op["outputs"]]
    with e.sub_block() as block:
        e.run(ops, f"{here}/{number}")
        e.position = here
        for (_, vid), name in zip(ops[-1]["inputs"], outs):
            e.block_result(op, vid, name)
    reads, writes = block_io(block)
    e.emit("conditional_block", {"Cond": [cond], "Input": reads}, {"Out": writes, "Scope": [e.step_scopes()]},
           {"sub_block": block, "is_scalar_condition": True})
    return outs


def while_(e, op) -> None:
    """`pd_op.while(cond, v1..vn)` as Paddle 2.6's `static.nn.while_loop` writes one (what Lite 2.13 runs):

        assign(cond) -> c; assign(vk) -> lk                 the loop's own variables (the operands stay as they are)
        while(X=[what the body reads], Condition=[c], Out=[what it writes outside], StepScopes)
            body ops, reading block argument k as lk; then assign(yield k) -> lk, assign(yield cond) -> c
        result k is lk after the loop
    """
    if len(op["blocks"]) != 1:
        e.unsupported(op, f"a while with {len(op['blocks'])} blocks (edgekit knows one body)")
    ops, args = op["blocks"][0], (op.get("block_args") or [None])[0]
    count = len(op["outputs"])
    if args is None or len(args) != count or len(op["inputs"]) != count + 1:
        e.unsupported(op, "its loop-carried values are not described (describe the program with this edgekit's "
                          "Paddle 3 child)")
    if not ops or ops[-1]["op"] != "cf.yield" or len(ops[-1]["inputs"]) != count + 1:
        e.unsupported(op, "its body does not end by yielding the condition and one value per result")
    for _, _, shape, _ in op["outputs"]:
        if shape is None:
            e.unsupported(op, "a loop-carried value that is not a tensor (a list or an optional value)")
    here = e.position
    cond = e.new_var("while_cond", [1], "bool")
    e.emit("assign", {"X": [e._var(op, op["inputs"][0][1])]}, {"Out": [cond]}, {})
    carried = []
    for (_, vid), (_, _, shape, dtype) in zip(op["inputs"][1:], op["outputs"]):
        name = e.new_var("while_var", shape, dtype)
        e.emit("assign", {"X": [e._var(op, vid)]}, {"Out": [name]}, {})
        carried.append(name)
    with e.sub_block() as block:
        for arg, name, (_, _, _, dtype) in zip(args, carried, op["outputs"]):
            e.values[arg], e.dtypes[arg] = name, dtype
        e.run(ops, f"{here}/0")
        e.position = here
        yielded = [vid for _, vid in ops[-1]["inputs"]]
        for vid, name in zip(yielded[1:], carried):
            if e.values.get(vid) != name:          # a value the body leaves as it was needs no copy
                e.block_result(op, vid, name)
        e.block_result(op, yielded[0], cond)
    reads, writes = block_io(block)
    e.emit("while", {"X": [n for n in reads if n != cond], "Condition": [cond]},
           {"Out": writes, "StepScopes": [e.step_scopes()]}, {"sub_block": block, "is_test": True})
    for (_, vid, _, dtype), name in zip(op["outputs"], carried):
        e.values[vid], e.dtypes[vid] = name, dtype


def block_io(block) -> tuple[list[str], list[str]]:
    """What a sub-block reads from and writes to its enclosing blocks, in first-use order (Paddle 2.6's
    `get_inputs_outputs_in_block` finds the same sets; a fixed order keeps rebuilt programs byte-identical)."""
    parent = block.program.block(block.parent_idx)
    produced: set[str] = set()
    reads: list[str] = []
    writes: list[str] = []
    for inner in block.ops:
        for slot in inner.input_names:
            reads += [n for n in inner.input(slot) if n not in produced and n not in reads]
        for slot in inner.output_names:
            for name in inner.output(slot):
                produced.add(name)
                if name not in writes:
                    writes.append(name)
    outside = parent._find_var_recursive
    return [n for n in reads if outside(n) is not None], [n for n in writes if outside(n) is not None]


def full_like(e, op) -> None:
    """`paddle.full_like` / `zeros_like`: the fill value is a constant operand in PIR, an attribute of Paddle 2.6's
    `fill_any_like` (which writes it so)."""
    e.emit("fill_any_like", {"X": [e.inp(op, "x")]}, {"Out": [e.out(op, 0)]},
           {"value": float(e.scalar(op, "value")), "dtype": e.var_dtype(op["outputs"][0][3])})


PIR_NMS = {   # PIR op -> (its attributes with their legacy types, the legacy name of its count output)
    "multiclass_nms3": ({"score_threshold": float, "nms_top_k": int, "keep_top_k": int, "nms_threshold": float,
                         "normalized": bool, "nms_eta": float, "background_label": int}, "NmsRoisNum"),
    "matrix_nms": ({"score_threshold": float, "post_threshold": float, "nms_top_k": int, "keep_top_k": int,
                    "use_gaussian": bool, "gaussian_sigma": float, "background_label": int, "normalized": bool},
                   "RoisNum"),
}


def nms(e, op, legacy: str) -> None:
    """PaddleDetection's NMS ops (`ppdet.modeling.ops.multiclass_nms`, `paddle.vision.ops.matrix_nms`) as Paddle 2's
    export writes them: BBoxes, Scores (and multiclass_nms3's RoisNum when given) in; Out rows [K, 6], Index and the
    count per image out. The attributes stay attributes, every one required (a missing one is refused by name); the
    build then keeps the op or cuts the graph before it (lite/nms.py)."""
    types, count = PIR_NMS[legacy]
    missing = [n for n in types if n not in op["attrs"]]
    if missing:
        e.unsupported(op, f"no attribute {', '.join(missing)} (this Paddle version's op differs from what edgekit knows)")
    inputs = {"BBoxes": [e.inp(op, "bboxes")], "Scores": [e.inp(op, "scores")]}
    if legacy == "multiclass_nms3" and e.has(op, "rois_num"):
        inputs["RoisNum"] = [e.inp(op, "rois_num")]
    e.emit(legacy, inputs, {"Out": [e.out(op, 0)], "Index": [e.out(op, 1)], count: [e.out(op, 2)]},
           {name: kind(op["attrs"][name]) for name, kind in types.items()})


def identity(e, op, operand: str = "x") -> None:
    """Ops that compute nothing at inference (dropout in eval mode, assign): the result is the operand."""
    e.alias(op, 0, operand)


def _build_table() -> dict[str, Callable]:
    table: dict[str, Callable] = {}
    for name, (legacy, attrs) in UNARY.items():
        table[name] = lambda e, op, legacy=legacy, attrs=attrs: unary(e, op, legacy, attrs)
    for name, legacy in BINARY.items():
        table[name] = lambda e, op, legacy=legacy: binary(e, op, legacy)
    for name, legacy in REDUCE.items():
        table[name] = lambda e, op, legacy=legacy: reduce(e, op, legacy)
    for name, legacy in COMPARE.items():
        table[name] = lambda e, op, legacy=legacy: compare(e, op, legacy)
    for name, legacy in LOGICAL.items():
        table[name] = lambda e, op, legacy=legacy: logical(e, op, legacy)
    table.update({
        "conv2d": lambda e, op: conv(e, op, "conv2d"),
        "depthwise_conv2d": lambda e, op: conv(e, op, "depthwise_conv2d"),
        "conv2d_transpose": lambda e, op: conv_transpose(e, op, "conv2d_transpose"),
        "depthwise_conv2d_transpose": lambda e, op: conv_transpose(e, op, "depthwise_conv2d_transpose"),
        "batch_norm": batch_norm, "layer_norm": layer_norm, "matmul": matmul, "scale": scale,
        "reshape": reshape, "flatten": flatten, "transpose": transpose,
        "squeeze": lambda e, op: squeeze(e, op, "squeeze2"), "unsqueeze": lambda e, op: squeeze(e, op, "unsqueeze2"),
        "concat": concat, "stack": stack, "split": split, "split_with_num": split, "pool2d": pool2d,
        "softmax": lambda e, op: softmax(e, op, "softmax"), "log_softmax": lambda e, op: softmax(e, op, "log_softmax"),
        "nearest_interp": lambda e, op: interp(e, op, "nearest_interp_v2"),
        "bilinear_interp": lambda e, op: interp(e, op, "bilinear_interp_v2"),
        "clip": clip, "cast": cast, "pow": pow_, "slice": slice_, "strided_slice": strided_slice, "gather": gather, "argmax": argmax,
        "shape": shape_, "shape64": shape_, "pad3d": pad3d, "where": where, "logical_not": logical_not,
        "dropout": identity, "assign": identity, "if": if_, "while": while_, "full_like": full_like,
        **{name: (lambda e, op, legacy=name: nms(e, op, legacy)) for name in PIR_NMS},
    })
    return table


TRANSLATORS = _build_table()
CONTROL_FLOW = ("pd_op.if", "pd_op.while")   # ops with blocks that translate


def lookup(pir_name: str) -> Callable | None:
    """`pd_op.relu_` (in place) translates like `pd_op.relu`."""
    name = pir_name.split(".", 1)[-1]
    return TRANSLATORS.get(name) or (TRANSLATORS.get(name[:-1]) if name.endswith("_") else None)
