"""The import checks' ONNX Runtime sessions print nothing of their own when a node fails: the caller catches the
exception and words it (export/simplify.py drops a simplification ONNX Runtime refuses; the user saw a red
`[E:onnxruntime:...] Non-zero status code ... Reshape node` line before the build went on as it should)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest

from export import onnxrt


def _bad_reshape() -> bytes:
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    shape = oh.make_tensor("s", onnx.TensorProto.INT64, [2], [2, 3])
    graph = oh.make_graph([oh.make_node("Reshape", ["x", "s"], ["y"])], "g", [x], [y], [shape])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.mark.parametrize("as_written", [False, True])
def test_a_failing_node_raises_without_a_line_on_stderr(capfd, as_written):
    session = onnxrt.session(_bad_reshape(), as_written=as_written)
    with pytest.raises(Exception, match="cannot be reshaped"):
        session.run(None, {"x": np.zeros(5, np.float32)})
    assert capfd.readouterr().err == ""


def test_the_width_free_check_session_is_quiet_too(capfd):
    from export.width_free import _session

    with pytest.raises(Exception, match="cannot be reshaped"):
        _session(_bad_reshape(), "m.onnx").run(None, {"x": np.zeros(5, np.float32)})
    assert capfd.readouterr().err == ""


def test_onnx_runtime_errors_inside_answers_become_one_input_model_error():
    """export/onnx_nms.py's checks run the whole source in ONNX Runtime: a refusal there is one line, no traceback."""
    from edgekit.core.errors import InputModelError

    session = onnxrt.session(_bad_reshape())
    with pytest.raises(InputModelError, match=r"^ONNX Runtime cannot run m.onnx: .*Reshape node") as caught:
        with onnxrt.answers("ONNX Runtime cannot run m.onnx", "check the model"):
            session.run(None, {"x": np.zeros(5, np.float32)})
    assert "\n" not in caught.value.message and caught.value.hint == "check the model"
