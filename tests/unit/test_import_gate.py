"""The ONNX import gate's judgement (export/import_gate.py) and the Squeeze/Unsqueeze/Split rewrites X2Paddle's
shape inference needs (export/simplify.py via legalize.REWRITES). Pure numpy/ONNX + ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgekit.core.errors import InputModelError
from edgekit.export import import_gate as gate
from edgekit.export import legalize as lg
from edgekit.export import simplify
from edgekit.model.parity import Tolerance

LIMITS = Tolerance(1e-4, 0.9999)


def _noisy(scale: float, relative_noise: float, seed: int = 0, shape=(2, 1, 16, 16)):
    rng = np.random.default_rng(seed)
    ref = (rng.random(shape) * scale).astype(np.float32)
    return ref, (ref * (1 + rng.standard_normal(shape) * relative_noise)).astype(np.float32)


def test_a_near_zero_map_is_judged_in_absolute_terms_and_said_unchecked():
    ref, got = _noisy(1.5e-5, 0.05)                 # a DB map on noise: 5 % apart, cosine ~0.999
    figures = gate.judge("maps", ref, got, LIMITS)
    assert figures["cosine"] < 0.9999 and not figures["signal_above_noise"]
    assert figures["passed"] and figures["judged"].startswith("absolute")
    check = gate.compare([ref], [got], ["maps"], LIMITS, "random", 2)
    assert check["unchecked"] == ["maps"] and "not really checked" in check["probe_text"]


def test_closeness_is_relative_to_the_scale():
    ref, got = _noisy(50.0, 1e-6)
    figures = gate.judge("logits", ref, got, LIMITS)
    assert figures["passed"] and figures["max_abs"] > 1e-5 and figures["max_abs_limit"] == pytest.approx(1e-4 * figures["scale"])
    small = gate.judge("probs", *_noisy(0.01, 1e-3), LIMITS)     # 1e-3 relative, though only 4e-5 absolute
    assert small["relative"] > 1e-4 and small["max_abs"] < 1e-4 and not small["passed"]
    check = gate.compare([_noisy(0.01, 1e-3)[0]], [_noisy(0.01, 1e-3)[1]], ["probs"], LIMITS, "calibration", 2)
    with pytest.raises(InputModelError, match="float rounding") as info:
        gate.decide(check, None, "m.onnx")
    assert "import_max_abs" in info.value.hint and "--eval" in info.value.hint


def test_a_wrong_direction_is_refused_with_the_probe_named():
    ref, _ = _noisy(1.0, 0.0)
    wrong = np.flip(ref, axis=-1).copy()
    check = gate.compare([ref], [wrong], ["maps"], LIMITS, "evaluation", 2)
    assert not check["passed"]
    with pytest.raises(InputModelError, match="translated wrongly") as info:
        gate.decide(check, None, "det.onnx")
    assert "the evaluation samples" in str(info.value)


def test_with_truth_the_task_metric_decides():
    ref, got = _noisy(1.0, 0.3)                     # tensors far apart ...
    check = gate.compare([ref], [got], ["maps"], LIMITS, "evaluation", 2)
    assert not check["passed"]
    same = {"metric": "hmean", "onnxruntime": 98.0, "paddle": 98.0, "agreement": 100.0, "max_drop": 0.5}
    verdict = gate.decide(check, same, "det.onnx")  # ... but the task reads the same: accepted, the miss reported
    assert verdict["passed"] and not verdict["tensor_check_passed"] and verdict["decided_by"].startswith("task")
    with pytest.raises(InputModelError, match="reads 90.00 % hmean"):
        gate.decide(gate.compare([ref], [ref], ["maps"], LIMITS, "evaluation", 2), dict(same, paddle=90.0), "det.onnx")


# --- the rewrites ---------------------------------------------------------------------------------

def test_reshape_targets():
    assert simplify.reshape_target([-1, 96, 1, 40], [-1, 96, 40]) == [0, 96, 40]
    assert simplify.reshape_target([-1, 96, 1, 40], [-1, 1, 96, 1, 40]) == [0, 1, 96, 1, 40]
    assert simplify.reshape_target([4, -1, -1], [4, -1, 1, -1]) == [4, 0, 1, -1]
    assert simplify.reshape_target([-1, -1, 1, -1], [-1, -1, -1]) == [0, 0, -1]
    assert simplify.reshape_target([-1, 3, -1, -1], [1, -1, 3, -1, -1]) is None      # two dims would need -1
    assert simplify.squeeze_dims([-1, 96, 1, 40], [2], "Squeeze") == [-1, 96, 40]
    assert simplify.squeeze_dims([-1, 96, 3, 40], [2], "Squeeze") is None
    assert simplify.squeeze_dims([-1, 96, 40], [1, -1], "Unsqueeze") == [-1, 1, 96, 40, 1]


def _squeeze_model(opset: int):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8, 1, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3, 1, 5])
    parts = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 5, 1, 5])
    nodes = [helper.make_node("Unsqueeze", ["x", "one"], ["u"], name="unsq"),
             helper.make_node("Add", ["u", "pos"], ["a"]),
             helper.make_node("Squeeze", ["a", "one"], ["s"], name="sq"),
             helper.make_node("Split", ["s", "sizes"], ["y", "b"], axis=1, name="split")]
    inits = [numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(1, 1, 8, 1, 5), "pos"),
             numpy_helper.from_array(np.array([3, 5], np.int64), "sizes")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y, parts], inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("opset", [13, 14, 17])
def test_constant_axes_become_a_one_input_form_that_computes_the_same(opset):
    model = _squeeze_model(opset)
    result = lg.legalise(model)
    ops = [n.op_type for n in result.model.graph.node]
    assert "Squeeze" not in ops and "Unsqueeze" not in ops and "Split" not in ops
    assert ops.count("Reshape") == 2 and ops.count("Slice") == 2
    shapes = [numpy_helper.to_array(i).tolist() for i in result.model.graph.initializer if i.name.endswith("_shape_lg")]
    assert sorted(shapes) == [[0, 1, 8, 1, 5], [0, 8, 1, 5]]          # the dynamic batch copied, never baked in
    onnx.checker.check_model(result.model)
    rng = np.random.default_rng(0)
    draws = [{"x": rng.standard_normal((n, 8, 1, 5)).astype(np.float32)} for n in (1, 3)]
    check = lg.check_rewrites(model, result, draws)
    assert check["passed"] and check["rewritten_max_abs"] == 0.0


def test_attribute_axes_below_opset_13_are_left_alone():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])
    model = helper.make_model(helper.make_graph([helper.make_node("Squeeze", ["x"], ["y"], axes=[1])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 8
    assert not lg.legalise(model).rewrites


def _runtime_reshape_model(batch):
    """x -> Reshape(x, Concat(Shape(x)[0:1], [-1])): a reshape to a shape computed at run time, as torch's flatten."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "zero", "one"], ["n"]),
             helper.make_node("Concat", ["n", "rest"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "zero"), numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([-1], np.int64), "rest")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 24])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def test_the_simplifier_folds_shapes_of_fixed_dims_and_is_checked():
    draws = [{"x": np.random.default_rng(0).standard_normal((2, 4, 6)).astype(np.float32)}]
    folded, report = simplify.simplify(_runtime_reshape_model(2), draws)
    assert report["applied"] and report["check"]["passed"]
    assert [n.op_type for n in folded.graph.node] == ["Reshape"]        # Shape -> Slice -> Concat became a constant
    dynamic, report = simplify.simplify(_runtime_reshape_model("n"), draws)
    assert report["applied"] and "Shape" in [n.op_type for n in dynamic.graph.node]   # Shape(x)[0] stays computed
