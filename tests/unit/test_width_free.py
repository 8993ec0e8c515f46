"""The ONNX import's width-free reshapes (export/width_free.py) on small graphs built with onnx.helper: computed
Reshape targets become constants that hold at every width, checked in ONNX Runtime; a target with two varying
dims is refused naming the node and what was measured."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from edgekit.core.errors import InputModelError  # noqa: E402
from edgekit.export.width_free import computed_reshapes, probe_widths, rewrite  # noqa: E402

WIDTHS = (32, 8, 128)          # resize width, width_step, max_width


def _const(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def model(second_target_dims=("batch", 24, "width")):
    """x [N, 3, 8, W] -> Reshape to a target computed from Shape(x) -> Transpose -> Reshape([N, W, 24]) -> y."""
    parts, nodes, inits = [], [helper.make_node("Shape", ["x"], ["shape"])], [_const("i0", [0]), _const("i3", [3])]
    nodes += [helper.make_node("Gather", ["shape", "i0"], ["n"], axis=0),
              helper.make_node("Gather", ["shape", "i3"], ["w"], axis=0)]
    for k, dim in enumerate(second_target_dims):
        if dim == "batch":
            parts.append("n")
        elif dim == "width":
            parts.append("w")
        elif dim == "2batch":
            inits.append(_const("two", [2]))
            nodes.append(helper.make_node("Mul", ["n", "two"], [f"p{k}"]))
            parts.append(f"p{k}")
        else:
            inits.append(_const(f"c{k}", [dim]))
            parts.append(f"c{k}")
    nodes += [helper.make_node("Concat", parts, ["target"], axis=0),
              helper.make_node("Reshape", ["x", "target"], ["r"], name="flatten_rows"),
              helper.make_node("Relu", ["r"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c"])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def run(m, x):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_a_computed_target_becomes_a_constant_that_holds_at_every_width():
    source = model()
    assert [n.name for n in computed_reshapes(source)] == ["flatten_rows"]
    out, report = rewrite(source, "x", 3, 8, WIDTHS, "tiny.onnx")
    (change,) = report["reshapes"]
    assert change["node"] == "flatten_rows" and change["constant"] == [0, 24, -1]
    assert report["dropped_nodes"] == 4 and report["max_abs"] == 0.0         # Shape, 2 Gathers, Concat
    assert computed_reshapes(out) == [] and not any(n.op_type == "Shape" for n in out.graph.node)
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 200)).astype(np.float32)   # a width no probe used
    assert np.array_equal(run(out, x), run(source, x)) and run(out, x).shape == (2, 24, 200)


def test_constant_targets_are_left_alone():
    source = model()
    fixed, _ = rewrite(source, "x", 3, 8, WIDTHS, "tiny.onnx")
    again, report = rewrite(fixed, "x", 3, 8, WIDTHS, "tiny.onnx")
    assert report is None and again is fixed


def test_a_target_varying_in_two_dims_is_refused_with_what_was_measured():
    with pytest.raises(InputModelError, match=r"Reshape 'flatten_rows' has targets \[\[2, 32, 12\], \[4, 72, 12\]"):
        rewrite(model(("2batch", "width", 12)), "x", 3, 8, WIDTHS, "tiny.onnx")


def test_probes_and_checks_are_widths_the_preprocessing_makes():
    probes, checks = probe_widths(320, 32, 1280)
    assert probes == ((1, 320), (2, 480), (1, 640)) and checks == ((1, 800), (3, 416), (1, 1280), (2, 320))
    assert all(w % 32 == 0 and 320 <= w <= 1280 for _, w in probes + checks)
