"""edgekit.export.onnx_import: name sanitising, shape fixing and failure messages (onnx only, no Paddle)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgekit.core.errors import ConfigError, ExportError, InputModelError
from edgekit.export.onnx_import import (
    _dynamic_hint, _probe_inputs, _x2paddle_failure, fix_input_shapes, graph_inputs, input_shape, load_onnx, sanitize_names,
    sanitized_names,
)
from edgekit.core.proc import ProcessRecord

SAFE = re.compile(r"[A-Za-z0-9_]+")


def _weird_model() -> onnx.ModelProto:
    """Names in the styles real exporters write: PyTorch `onnx::`/`/a/b`, Paddle2ONNX `@`, TF `:0`, dots."""
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "fc.weight@0")
    b = numpy_helper.from_array(np.zeros(4, np.float32), "fc:b")
    ten = numpy_helper.from_array(np.array(10.0, np.float32), "fc_b")      # already the sanitised form of "fc:b"
    cond = helper.make_tensor_value_info("flag.0", TensorProto.BOOL, [])
    then_branch = helper.make_graph([helper.make_node("Mul", ["/fc/Gemm_output_0", "fc_b"], ["then@out"], name="then.mul")],
                                    "then", [], [helper.make_tensor_value_info("then@out", TensorProto.FLOAT, ["N", 4])])
    else_branch = helper.make_graph([helper.make_node("Identity", ["/fc/Gemm_output_0"], ["else:out"], name="else.id")],
                                    "else", [], [helper.make_tensor_value_info("else:out", TensorProto.FLOAT, ["N", 4])])
    nodes = [
        helper.make_node("Gemm", ["input.1", "fc.weight@0", "fc:b"], ["/fc/Gemm_output_0"], name="/fc/Gemm", transB=1),
        helper.make_node("If", ["flag.0"], ["onnx::If_7"], name="If@0", then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Relu", ["onnx::If_7"], ["logits:0"], name="relu.0"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["N", 3]), cond],
                              [helper.make_tensor_value_info("logits:0", TensorProto.FLOAT, ["N", 4])], [w, b, ten],
                              value_info=[helper.make_tensor_value_info("/fc/Gemm_output_0", TensorProto.FLOAT, ["N", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _all_names(graph) -> list[str]:
    names = [vi.name for vi in list(graph.input) + list(graph.output) + list(graph.value_info)]
    names += [init.name for init in graph.initializer]
    for node in graph.node:
        names += [node.name, *node.input, *node.output]
        for attr in node.attribute:
            if attr.HasField("g"):
                names += _all_names(attr.g)
    return [n for n in names if n]


def test_safe_names_are_kept_and_unsafe_ones_rewritten():
    mapping = sanitized_names(["x", "123", "conv_1", "Conv@0", "onnx::Add_3", "/blk/conv/Conv_output_0", "a.b", "x"])
    assert "x" not in mapping and "123" not in mapping and "conv_1" not in mapping
    assert mapping == {"Conv@0": "Conv_0", "onnx::Add_3": "onnx__Add_3", "/blk/conv/Conv_output_0": "_blk_conv_Conv_output_0",
                       "a.b": "a_b"}


def test_sanitising_is_collision_free_and_deterministic():
    names = ["a.b", "a_b", "a:b", "a@b", "a_b_1", "é", "ü", ""]
    mapping = sanitized_names(names)
    assert mapping == {"a.b": "a_b_2", "a:b": "a_b_3", "a@b": "a_b_4", "é": "_", "ü": "__1"}
    kept = {n for n in names if n and n not in mapping}
    assert kept == {"a_b", "a_b_1"}
    assert len(set(mapping.values())) == len(mapping)                 # injective
    assert not set(mapping.values()) & kept                          # never equal to a name kept as it is
    assert all(SAFE.fullmatch(v) for v in mapping.values())
    assert sanitized_names(names) == mapping                          # same input, same answer
    assert "" not in mapping                                          # empty = an omitted optional input


def test_sanitize_model_rewrites_every_place_and_leaves_the_original_alone():
    model = _weird_model()
    before = model.SerializeToString()
    clean, mapping = sanitize_names(model)
    assert model.SerializeToString() == before
    assert all(SAFE.fullmatch(n) for n in _all_names(clean.graph)), _all_names(clean.graph)
    onnx.checker.check_model(clean)                                   # still a valid, consistently wired graph
    assert mapping["fc:b"] == "fc_b_1"                                # "fc_b" is a real initializer name
    assert mapping["logits:0"] == "logits_0" and mapping["input.1"] == "input_1"
    assert [vi.name for vi in clean.graph.output] == ["logits_0"]
    then_branch = clean.graph.node[1].attribute[0].g if clean.graph.node[1].attribute[0].name == "then_branch" \
        else clean.graph.node[1].attribute[1].g
    assert list(then_branch.node[0].input) == ["_fc_Gemm_output_0", "fc_b"]  # outer-scope names rewritten too
    # the mapping is the way back: undoing it gives the original model exactly
    back = {v: k for k, v in mapping.items()}
    restored, _ = sanitize_names(clean)
    from edgekit.export.onnx_import import _rename_graph

    _rename_graph(restored.graph, back)
    assert restored.SerializeToString() == before


def test_model_without_unsafe_names_is_unchanged():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])])
    model = helper.make_model(graph)
    clean, mapping = sanitize_names(model)
    assert mapping == {}
    assert clean.SerializeToString() == model.SerializeToString()


def _dynamic_model(extra_input_initializer: bool = False) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"]),
              helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1])]
    inits = []
    if extra_input_initializer:   # IR < 4 exporters list weights as graph inputs too
        inits = [numpy_helper.from_array(np.ones(1, np.float32), "scale")]
    graph = helper.make_graph([helper.make_node("Mul", ["x", "scale"], ["y"])], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, "H", "W"])], inits)
    return helper.make_model(graph)


def test_fix_input_shapes_sets_dims_and_keeps_minus_one_dynamic():
    model = _dynamic_model()
    fixed = fix_input_shapes(model, {"x": (-1, 3, 48, 320)})
    assert input_shape(fixed.graph.input[0]) == (-1, 3, 48, 320)
    dims = fixed.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "N" and not dims[2].dim_param and dims[2].dim_value == 48
    assert input_shape(model.graph.input[0]) == (-1, 3, -1, -1)    # the original is untouched
    assert input_shape(fix_input_shapes(model, {"x": (1, 3, 48, 320)}).graph.input[0]) == (1, 3, 48, 320)


def test_fix_input_shapes_gives_shape_to_an_input_declared_without_one():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    fixed = fix_input_shapes(helper.make_model(graph), {"x": (2, 5)})
    assert input_shape(fixed.graph.input[0]) == (2, 5)


def test_wrong_input_name_names_the_real_inputs():
    model = _dynamic_model(extra_input_initializer=True)
    assert [vi.name for vi in graph_inputs(model)] == ["x"]        # the weight listed as input is not an input
    with pytest.raises(InputModelError, match=r"input\(s\) image not in the ONNX model; its inputs are x$") as info:
        fix_input_shapes(model, {"image": (1, 3, 48, 320)})
    assert "--input" in info.value.hint
    with pytest.raises(InputModelError, match=r"input\(s\) scale not in"):
        fix_input_shapes(model, {"scale": (1,)})


@pytest.mark.parametrize("shape, needle", [((1, 3, 48), "rank 4"), ((1, 4, 48, 320), r"shape \[\?, 3, \?, \?\]")])
def test_shapes_that_do_not_fit_the_model(shape, needle):
    with pytest.raises(InputModelError, match=needle):
        fix_input_shapes(_dynamic_model(), {"x": shape})


def test_probe_inputs_are_seeded_and_fill_only_the_batch():
    graph = helper.make_graph([helper.make_node("Gather", ["table", "ids"], ["y"])], "g",
                              [helper.make_tensor_value_info("table", TensorProto.FLOAT, ["N", 3, 8, 8]),
                               helper.make_tensor_value_info("ids", TensorProto.INT64, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph)
    shapes = {vi.name: input_shape(vi) for vi in graph_inputs(model)}
    draws = _probe_inputs(model, shapes, {}, seed=0)
    assert len(draws) == 2 and draws[0]["table"].shape == (2, 3, 8, 8) and draws[0]["table"].dtype == np.float32
    assert draws[0]["ids"].dtype == np.int64 and set(np.unique(draws[0]["ids"])) <= {0, 1}
    assert not np.array_equal(draws[0]["table"], draws[1]["table"])
    again = _probe_inputs(model, shapes, {}, seed=0)
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(draws, again) for k in a)
    assert _probe_inputs(model, shapes, {"table": (1, 3, 8, 8)}, seed=0)[0]["table"].shape == (1, 3, 8, 8)
    with pytest.raises(InputModelError, match="does not fit"):
        _probe_inputs(model, shapes, {"table": (1, 4, 8, 8)}, seed=0)
    spatial = {"table": (-1, 3, -1, -1), "ids": (4,)}
    with pytest.raises(ConfigError, match="keeps dynamic dimension") as info:
        _probe_inputs(model, spatial, {}, seed=0)
    assert "--input table:?x3x?x?" in info.value.hint
    assert _probe_inputs(model, spatial, {"table": (1, 3, 32, 64)}, seed=0)[0]["table"].shape == (1, 3, 32, 64)


def test_dynamic_hint_only_for_dims_past_the_batch():
    assert _dynamic_hint({"x": (-1, 3, 48, 320)}) == ""
    assert "--input x:?x3x?x?" in _dynamic_hint({"x": (-1, 3, -1, -1)})


def test_load_onnx_errors(tmp_path):
    with pytest.raises(InputModelError, match="does not exist") as info:
        load_onnx(tmp_path / "missing.onnx")
    assert info.value.exit_code == 3
    (tmp_path / "garbage.onnx").write_bytes(b"\xff\xfe\x00garbage" * 40)
    with pytest.raises(InputModelError, match="not a readable ONNX model|not a valid ONNX model"):
        load_onnx(tmp_path / "garbage.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(InputModelError, match="is empty"):
        load_onnx(tmp_path / "empty.onnx")


def _record(returncode: int, stdout: str = "", stderr: str = "") -> ProcessRecord:
    return ProcessRecord(("python", "-m", "child"), returncode, 1.0, stdout, stderr)


def test_failure_messages_say_what_x2paddle_did(tmp_path):
    src = tmp_path / "m.onnx"
    crash = _x2paddle_failure(src, _record(-11, stderr="Converting node 3 ..."), None, "")
    assert isinstance(crash, ExportError) and "died from SIGSEGV" in str(crash) and crash.exit_code == 5
    ops = _x2paddle_failure(src, _record(1, "\n========= 2 OPs are not supported yet ===========\n"
                                            "========== Hardmax ============\n========== Celu ============\n"),
                            {"type": "Exception", "message": "Model is not supported yet."}, "")
    assert "no translation for ONNX op(s) Celu, Hardmax" in str(ops)
    exit0 = _x2paddle_failure(src, _record(0, "...\n    ValueError: Given normalized_shape is [120], expected input\n\n",
                                           "warnings.warn("),
                              {"type": "SystemExit", "message": "X2Paddle exited before writing a model"},
                              _dynamic_hint({"x": (-1, 3, -1, -1)}))
    assert str(exit0).endswith("ValueError: Given normalized_shape is [120], expected input")
    assert exit0.hint.startswith("the model keeps dynamic dimensions: fix them with --input x:?x3x?x?")
    syntax = _x2paddle_failure(src, _record(1), {"type": "SyntaxError", "message": "invalid decimal literal",
                                                  "code_line": "x2paddle_Constant@0 = paddle.full(...)"}, "")
    assert "does not compile" in str(syntax) and "x2paddle_Constant@0" in str(syntax)
    for error in (crash, ops, exit0, syntax):
        assert "\n" not in str(error) and error.hint
