"""ONNX import: real X2Paddle (child process), ONNX Runtime and Paddle on ONNX models built in the test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgekit.model.artifacts import sha256_file
from edgekit.core.errors import ConfigError, ExportError, InputModelError, ToolError
from edgekit.export.onnx_import import check_against_onnxruntime, import_onnx
from edgekit.export.runner import StaticRunner
from edgekit.model.parity import Tolerance, cosine, max_abs

pytestmark = pytest.mark.e2e

# names in the styles real exporters write (Paddle2ONNX `Conv@0`, TF `:0`, PyTorch `input.1`, `onnx::`, `/a/b`)
PLAIN = {"x": "x", "w": "w", "b": "b", "c": "c", "r": "r", "g": "g", "f": "f", "gw": "gw", "gb": "gb", "y": "y",
         "conv": "conv", "relu": "relu"}
WEIRD = {"x": "input.1", "w": "conv.weight@0", "b": "conv:b", "c": "Conv@0:out.0", "r": "onnx::Relu_3", "g": "pool@g",
         "f": "/flatten/Flatten_output_0", "gw": "fc.weight", "gb": "fc_bias", "y": "logits:0",
         "conv": "Conv@0", "relu": "relu.0"}


def cnn(path: Path, names: dict, seed: int = 0) -> Path:
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm, dynamic batch `N`."""
    rng = np.random.default_rng(seed)
    n = names.__getitem__
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.5, n(key))
               for key, shape in (("w", (8, 3, 3, 3)), ("b", (8,)), ("gw", (5, 8)), ("gb", (5,)))]
    nodes = [
        helper.make_node("Conv", [n("x"), n("w"), n("b")], [n("c")], name=n("conv"), kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", [n("c")], [n("r")], name=n("relu")),
        helper.make_node("GlobalAveragePool", [n("r")], [n("g")], name="pool"),
        helper.make_node("Flatten", [n("g")], [n("f")], name="flatten"),
        helper.make_node("Gemm", [n("f"), n("gw"), n("gb")], [n("y")], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info(n("x"), TensorProto.FLOAT, ["N", 3, 16, 16])],
                              [helper.make_tensor_value_info(n("y"), TensorProto.FLOAT, ["N", 5])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def onnxruntime_run(path: Path, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    root = tmp_path_factory.mktemp("onnx-plain")
    source = cnn(root / "cnn.onnx", PLAIN)
    model, report = import_onnx(source, root / "export", None, timeout=300)
    return source, model, report


def test_converted_model_matches_onnxruntime(plain):
    source, model, report = plain
    assert model.model_file == model.model_file.parent / "model.pdmodel" and model.params_file.name == "model.pdiparams"
    assert sorted(p.name for p in model.model_file.parent.iterdir()) == ["model.pdiparams", "model.pdmodel"]  # no scratch left
    assert model.origin == "onnx" and model.feed_names == ("x2paddle_x",) and model.feeds[0].shape == (-1, 3, 16, 16)
    assert report["feeds"] == {"x": "x2paddle_x"} and list(report["fetches"]) == ["y"] and report["renamed"] == {}
    assert {"conv2d", "pool2d", "relu"} <= set(model.op_types)
    # the figures the import recorded
    (figures,) = report["check"]["outputs"]
    assert figures["passed"] and figures["max_abs"] < 1e-4 and figures["cosine"] > 0.9999
    assert model.check["max_abs"] == figures["max_abs"] and report["check"]["samples"] == 4
    assert report["versions"]["x2paddle"] == "1.6.0" and report["x2paddle"]["returncode"] == 0
    # and an independent replay: other inputs, another batch size, the saved files
    x = np.random.default_rng(7).standard_normal((3, 3, 16, 16)).astype(np.float32)
    (expected,) = onnxruntime_run(source, {"x": x})
    (got,) = StaticRunner(model).run({"x2paddle_x": x})
    assert got.shape == (3, 5)
    assert max_abs(expected, got) < 1e-4 and cosine(expected, got) > 0.99999


def test_reimport_gives_the_same_files(plain, tmp_path):
    source, model, report = plain
    again, again_report = import_onnx(source, tmp_path / "again", None, timeout=300)
    assert sha256_file(again.model_file) == sha256_file(model.model_file)
    assert sha256_file(again.params_file) == sha256_file(model.params_file)
    assert again_report["x2paddle"]["argv"] == report["x2paddle"]["argv"]        # no scratch paths in the record


def test_names_x2paddle_cannot_use_are_rewritten_and_kept(tmp_path, monkeypatch):
    source = cnn(tmp_path / "weird.onnx", WEIRD)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    model, report = import_onnx(source, tmp_path / "export", {"input.1": (1, 3, 16, 16)}, timeout=300)
    assert list(cwd.iterdir()) == []                                  # nothing written where the user stands
    renamed = report["renamed"]
    for original in ("input.1", "conv.weight@0", "conv:b", "Conv@0:out.0", "onnx::Relu_3", "pool@g", "logits:0", "Conv@0"):
        assert original in renamed, original
    assert renamed["Conv@0:out.0"] == "Conv_0_out_0" and renamed["Conv@0"] == "Conv_0"
    assert "fc_bias" not in renamed                                   # safe names stay as they are
    assert report["feeds"] == {"input.1": "x2paddle_input_1"} and list(report["fetches"]) == ["logits:0"]
    assert model.feeds[0].shape == (1, 3, 16, 16) and report["input_shapes"] == {"input.1": [1, 3, 16, 16]}
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    (expected,) = onnxruntime_run(source, {"input.1": x})
    (got,) = StaticRunner(model).run({"x2paddle_input_1": x})
    assert max_abs(expected, got) < 1e-4 and cosine(expected, got) > 0.99999


def test_disagreement_with_onnxruntime_is_an_error(plain, tmp_path):
    _, model, report = plain
    other = cnn(tmp_path / "other.onnx", PLAIN, seed=1)              # same interface, other weights
    draws = [{"x": np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)}]
    with pytest.raises(InputModelError, match="disagrees with ONNX Runtime on output 'y'") as info:
        check_against_onnxruntime(model, other, draws, report["feeds"], report["fetches"])
    assert info.value.exit_code == 3 and "translated wrongly" in str(info.value) and "Paddle directly" in info.value.hint
    assert info.value.check["outputs"][0]["max_abs"] > 1e-2
    assert any(line.startswith("  ✗ [y]") for line in info.value.report_lines)


def test_wrong_input_name_and_missing_file(plain, tmp_path):
    source, _, _ = plain
    with pytest.raises(InputModelError, match=r"input\(s\) image not in the ONNX model; its inputs are x") as info:
        import_onnx(source, tmp_path / "a", {"image": (1, 3, 16, 16)}, timeout=300)
    assert info.value.exit_code == 3
    with pytest.raises(InputModelError, match="does not exist"):
        import_onnx(tmp_path / "nope.onnx", tmp_path / "b", None, timeout=300)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_dynamic_dims_need_sizes_for_the_check(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, "H", "W"])])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    with pytest.raises(ConfigError, match="keeps dynamic dimension") as info:
        import_onnx(path, tmp_path / "out", None, timeout=300)
    assert "--input x:?x3x?x?" in info.value.hint


def test_float_noise_is_worded_as_such_and_the_tolerance_is_the_users(plain, tmp_path):
    """A max-abs miss at cosine ~1 is rounding, not a wrong op: the error says so and names the setting."""
    source, model, report = plain
    draws = [{"x": np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)}]
    with pytest.raises(InputModelError, match="float rounding accumulated over the graph, not a wrongly translated op") as info:
        check_against_onnxruntime(model, source, draws, report["feeds"], report["fetches"], Tolerance(1e-9, 0.9999))
    assert "import_max_abs" in info.value.hint and "--max-abs" in info.value.hint
    check = check_against_onnxruntime(model, source, draws, report["feeds"], report["fetches"], Tolerance(1e-3, 0.9999))
    assert check["outputs"][0]["max_abs_limit"] >= 1e-3


def test_softmax_x2paddle_mistranslates_below_opset_13_is_legalised(tmp_path):
    """ONNX < 13 softmaxes the flattened tail; X2Paddle softmaxes axis 1 alone (max abs 0.84 unlegalised)."""
    w = numpy_helper.from_array(np.linspace(0.5, 2, 60, dtype=np.float32).reshape(4, 3, 5), "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["t"], name="scale"),
             helper.make_node("Softmax", ["t"], ["y"], name="head/softmax", axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 5])], [w])
    path = tmp_path / "softmax11.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.save(model, str(path))
    imported, report = import_onnx(path, tmp_path / "out", None, timeout=300)
    assert [r["into"] for r in report["legalise"]["rewrites"]] == [["Flatten", "Softmax", "Shape", "Reshape"]]
    assert report["check"]["max_abs"] < 1e-6
    x = np.random.default_rng(5).standard_normal((1, 4, 3, 5)).astype(np.float32)
    (expected,) = onnxruntime_run(path, {"x": x})
    (got,) = StaticRunner(imported).run({"x2paddle_x": x})
    assert max_abs(expected, got) < 1e-6


def test_unsupported_op_and_timeout(plain, tmp_path):
    graph = helper.make_graph([helper.make_node("Hardmax", ["x"], ["y"], name="head/hardmax", axis=-1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    path = tmp_path / "hardmax.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    with pytest.raises(ExportError, match="no translation for ONNX op.s. Hardmax and edgekit no rewrite: first at node "
                       "'head/hardmax' .output 'y'.") as info:
        import_onnx(path, tmp_path / "out", None, timeout=300)
    assert info.value.exit_code == 5 and "\n" not in str(info.value)
    with pytest.raises(ToolError, match="did not finish within"):
        import_onnx(plain[0], tmp_path / "out2", None, timeout=0.05)
    assert [p for p in (tmp_path / "out2").iterdir()] == []           # the scratch folder is gone
    assert not (tmp_path / "out").exists()                            # refused before anything is written


def test_edgekit_build_of_an_onnx_model_with_unsafe_names(tmp_path, monkeypatch):
    """`edgekit build --model m.onnx`: import, int8 with data named after the ONNX input, parity, bundle."""
    import json

    from typer.testing import CliRunner

    from edgekit.cli import app

    source = cnn(tmp_path / "weird.onnx", WEIRD)
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "calib.npz", **{"input.1": rng.standard_normal((32, 3, 16, 16)).astype(np.float32)})
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["build", "--model", str(source), "--input", "input.1:-1x3x16x16", "--quant", "int8",
                                      "--calib", str(tmp_path / "calib.npz"), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    m = json.loads((out / "weird" / "arm64-int8" / "manifest.json").read_text())
    assert m["model"]["origin"] == "onnx"
    assert m["onnx_import"]["renamed"]["conv.weight@0"] != "conv.weight@0"
    assert m["source"]["onnx"]["sha256"] == sha256_file(source)
    assert all(c["passed"] for c in m["parity"]["checks"])
    assert any("ONNX Runtime" in n for n in m["parity"]["notes"])


def test_edgekit_import_onnx_command(tmp_path):
    from typer.testing import CliRunner

    from edgekit.cli import app

    source = cnn(tmp_path / "weird.onnx", WEIRD)
    out = tmp_path / "paddle"
    result = CliRunner().invoke(app, ["import", "onnx", str(source), "--out", str(out), "--input", "input.1:-1x3x16x16"])
    assert result.exit_code == 0, result.output
    assert "✓ [logits:0]" in result.output and "input.1 -> x2paddle_input_1" in result.output
    from edgekit.export.program import feeds_and_fetches, parse_program

    found, _ = feeds_and_fetches(parse_program(out / "model.pdmodel"))
    assert [f[0] for f in found] == ["x2paddle_input_1"]
    import json

    report = json.loads((out / "import.json").read_text())
    assert report["source"]["sha256"] == sha256_file(source)
    again = CliRunner().invoke(app, ["import", "onnx", str(source), "--out", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output


def test_the_op_table_is_x2paddles_own():
    """X2PADDLE_OPS is what the installed X2Paddle 1.6.0 maps (its OpSet15 mapper, which opsets 15+ use). Here, not in
    tests/unit: importing X2Paddle imports Paddle, which starts `ldd` (the fast tier starts no process)."""
    from edgekit.export import legalize as lg

    mapper = pytest.importorskip("x2paddle.op_mapper.onnx2paddle.opset15")

    class _Decoder:
        graph = None

    opset = mapper.OpSet15(_Decoder(), None)
    mapped = {n for n in dir(mapper.OpSet15) if n[:1].isupper()} | set(opset.directly_map_ops) | set(opset.elementwise_ops)
    assert mapped == set(lg.X2PADDLE_OPS)
    # rewrites target what X2Paddle lacks, or mistranslates (Softmax), or whose opset-13 form its shape inference
    # cannot read (Squeeze/Unsqueeze/Split with an axes/split input)
    assert not set(lg.REWRITES) & mapped - {"Softmax", "LogSoftmax", "Squeeze", "Unsqueeze", "Split"}
