"""The ONNX legalisation pass: each rewrite computes what the op computes (ONNX Runtime), leaves only ops X2Paddle
translates, and refusals name the node. Pure ONNX + ONNX Runtime; X2Paddle itself runs in tests/e2e."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgekit.core.errors import ExportError
from edgekit.export import legalize as lg


def _model(nodes, inputs, outputs, opset, initializers=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t[0] if t else TensorProto.FLOAT, s)
                                           for n, s, *t in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _draws(shape, n=2, seed=0):
    rng = np.random.default_rng(seed)
    return [{"x": (rng.standard_normal(shape) * 3).astype(np.float32)} for _ in range(n)]


def _legal_and_checked(model, shape):
    result = lg.legalise(model)
    check = lg.check_rewrites(model, result, _draws(shape))
    left = {n.op_type for n in result.model.graph.node} - lg.X2PADDLE_OPS
    assert not left, left
    onnx.checker.check_model(result.model)
    return result, check


def _unary(op, opset, shape=(2, 3, 4, 5), **attrs):
    return _model([helper.make_node(op, ["x"], ["y"], name=f"blk/{op}", **attrs)], [("x", shape)], [("y", shape)], opset)


@pytest.mark.parametrize("op,opset,attrs", [
    ("HardSwish", 14, {}), ("Gelu", 20, {}), ("Gelu", 20, {"approximate": "tanh"}), ("Mish", 18, {}),
    ("Selu", 13, {}), ("Selu", 13, {"alpha": 1.5, "gamma": 0.7}), ("Celu", 13, {"alpha": 2.0}),
])
def test_activation_rewrites_match_onnxruntime(op, opset, attrs):
    result, check = _legal_and_checked(_unary(op, opset, **attrs), (2, 3, 4, 5))
    assert [r["op"] for r in result.rewrites] == [op] and result.rewrites[0]["outputs"] == ["y"]
    assert check["passed"] and check["rewritten_max_abs"] <= 1e-5 * 30
    assert op not in {n.op_type for n in result.model.graph.node}


@pytest.mark.parametrize("axis,bias,opset", [(-1, True, 17), (-2, False, 17), (1, True, 17), (-1, True, 18)])
def test_layernorm_rewrite_matches_onnxruntime(axis, bias, opset):
    rng = np.random.default_rng(1)
    norm_shape = (4, 5) if axis in (-2, 1) else (5,)
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, norm_shape).astype(np.float32), "scale")]
    inputs = ["x", "scale"]
    if bias:
        inits.append(numpy_helper.from_array(rng.uniform(-0.2, 0.2, norm_shape).astype(np.float32), "bias"))
        inputs.append("bias")
    node = helper.make_node("LayerNormalization", inputs, ["y"], name="encoder/ln", axis=axis, epsilon=1e-5)
    model = _model([node], [("x", (2, 4, 5))], [("y", (2, 4, 5))], opset, inits)
    result, check = _legal_and_checked(model, (2, 4, 5))
    assert check["passed"] and check["rewritten_max_abs"] < 1e-5
    assert result.opset == (15 if opset > 15 else opset)
    if opset >= 18:            # the graph is at opset 15: every ReduceMean takes its axes as an attribute
        means = [n for n in result.model.graph.node if n.op_type == "ReduceMean"]
        assert means and all(len(n.input) == 1 and any(a.name == "axes" for a in n.attribute) for n in means)


def test_softmax_below_13_on_a_middle_axis_is_flattened_as_onnx_means():
    """X2Paddle softmaxes along axis 1 alone; ONNX < 13 softmaxes the flattened tail (e2e: 0.84 max abs without this)."""
    result, check = _legal_and_checked(_unary("Softmax", 11, axis=1), (2, 3, 4, 5))
    assert result.rewrites[0]["into"] == ["Flatten", "Softmax", "Shape", "Reshape"] and check["passed"]
    last_axis = lg.legalise(_unary("Softmax", 11, axis=3))           # the tail is the last axis: nothing to do
    assert not last_axis.rewrites and not last_axis.changed
    rankless = _model([helper.make_node("Reshape", ["x", "k"], ["r"]),       # a run-time shape: the rank is lost
                       helper.make_node("Softmax", ["r"], ["y"], name="head/softmax", axis=1)],
                      [("x", (2, 3, 4)), ("k", (2,), TensorProto.INT64)], [("y", (2, 12))], 11)
    unknown = lg.legalise(rankless)     # (PP-OCR cls: dynamic reshapes upstream) X2Paddle's reading, checked after
    assert not unknown.rewrites and "rank unknown" in unknown.notes[0]


def test_softmax_13_gets_its_default_axis_written_out():
    result, _ = _legal_and_checked(_unary("LogSoftmax", 13), (2, 3, 4, 5))
    (node,) = result.model.graph.node
    assert [(a.name, a.i) for a in node.attribute] == [("axis", -1)]
    assert not lg.legalise(_unary("Softmax", 13, axis=1)).rewrites


def test_dropout_and_castlike():
    dropout = _model([helper.make_node("Dropout", ["x"], ["y"], name="drop")], [("x", (2, 3))], [("y", (2, 3))], 13)
    result, _ = _legal_and_checked(dropout, (2, 3))
    assert [n.op_type for n in result.model.graph.node] == ["Identity"]
    with_mask = _model([helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop")], [("x", (2, 3))], [("y", (2, 3))], 13)
    with pytest.raises(ExportError, match="Dropout at node 'drop'.*mask output"):
        lg.legalise(with_mask)
    like = numpy_helper.from_array(np.zeros(1, np.float16), "like")
    cast = _model([helper.make_node("CastLike", ["x", "like"], ["h"], name="c"), helper.make_node("Cast", ["h"], ["y"], to=1)],
                  [("x", (2, 3))], [("y", (2, 3))], 15, [like])
    result, check = _legal_and_checked(cast, (2, 3))
    cast_node = result.model.graph.node[0]
    assert cast_node.op_type == "Cast" and cast_node.attribute[0].i == TensorProto.FLOAT16 and check["passed"]


def test_an_op_without_rewrite_is_refused_naming_the_node():
    model = _model([helper.make_node("Relu", ["x"], ["r"], name="stem/relu"),
                    helper.make_node("Einsum", ["r", "r"], ["y"], name="blocks.0/attn/Einsum", equation="ij,ij->ij")],
                   [("x", (2, 3))], [("y", (2, 3))], 13)
    with pytest.raises(ExportError) as info:
        lg.legalise(model)
    message = str(info.value)
    assert "Einsum" in message and "'blocks.0/attn/Einsum'" in message and "(output 'y')" in message
    assert "matmul" in info.value.hint and "\n" not in message


def test_opset_18_reductions_and_split_are_written_in_their_opset_15_form():
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    nodes = [helper.make_node("ReduceMax", ["x", "axes"], ["m"], name="rmax", keepdims=1),
             helper.make_node("Split", ["x"], ["a", "b"], name="split", axis=2, num_outputs=2),
             helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Add", ["s", "m"], ["y"])]
    model = _model(nodes, [("x", (2, 3, 4))], [("y", (2, 3, 2))], 18, [axes])
    result, check = _legal_and_checked(model, (2, 3, 4))
    assert result.opset == 15 and check["passed"] and check["outputs"]["y"]["max_abs"] == 0
    rmax = next(n for n in result.model.graph.node if n.op_type == "ReduceMax")
    assert list(rmax.input) == ["x"] and [list(a.ints) for a in rmax.attribute if a.name == "axes"] == [[2]]
    dynamic = _model([helper.make_node("ReduceMean", ["x", "k"], ["y"], name="rmean")],
                     [("x", (2, 3)), ("k", (1,))], [("y", (2, 1))], 18)
    with pytest.raises(ExportError, match="ReduceMean at node 'rmean'.*computed at run time"):
        lg.legalise(dynamic)


def test_a_split_whose_outputs_one_node_reads_together_becomes_slices():
    """X2Paddle 1.6.0 wires one output of a Split to every input of a node that reads several (paddle2onnx's
    Concat(split(scale_factor)[1], [0], [1], [0]) came out as four times [1]): such a Split becomes Slices; an even
    split read output by output stays as it is."""
    together = _model([helper.make_node("Split", ["x"], ["a", "b"], name="halves", axis=1),
                       helper.make_node("Concat", ["b", "a", "b", "a"], ["y"], axis=1)],
                      [("x", (3, 2))], [("y", (3, 4))], 13)
    result, check = _legal_and_checked(together, (3, 2))
    assert check["passed"] and [r["op"] for r in result.rewrites] == ["Split"]
    assert [n.op_type for n in result.model.graph.node if n.op_type != "Constant"] == ["Slice", "Slice", "Concat"]
    apart = _model([helper.make_node("Split", ["x"], ["a", "b"], name="halves", axis=1),
                    helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Neg", ["b"], ["nb"]),
                    helper.make_node("Sub", ["ra", "nb"], ["y"])], [("x", (3, 2))], [("y", (3, 1))], 13)
    assert not lg.legalise(apart).changed


def test_a_resize_attribute_without_an_opset_15_form_is_refused():
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode="linear", antialias=1)
    model = _model([node], [("x", (1, 2, 4, 4))], [("y", (1, 2, 8, 8))], 18, [scales])
    with pytest.raises(ExportError, match="Resize at node 'up'.*antialias=1"):
        lg.legalise(model)


def test_unchanged_models_stay_unchanged():
    model = _unary("Relu", 13)
    result = lg.legalise(model)
    assert not result.changed and result.report()["opset"] == {"source": 13, "converted_to": 13}

