"""Real toolchain on small models built in the test: flatten, paddle.vision, exported models."""

import numpy as np
import pytest

from bundles import manifest

pytestmark = pytest.mark.e2e


def _save_calib(path, shape, n=32, seed=0):
    rng = np.random.default_rng(seed)
    np.savez(path, x=rng.standard_normal((n, *shape)).astype(np.float32))
    return path


def test_flatten_model_builds_for_x86_through_the_rewrite(tmp_path, cli):
    """opt 2.13rc0 segfaults on flatten_contiguous_range for x86; the rewrite makes it work, verified."""
    out = tmp_path / "out"
    cli("build", "--model", "tinymodels:flatten_net", "--input", "x:-1x3x8x8", "--target", "x86", "--out", out, "--quiet")
    m = manifest(out / "flatten_net" / "x86-fp32")
    assert "flatten_contiguous_range" in m["model"]["source_ops"]
    (rewrite,) = m["host_twin"]["rewrites"]
    assert rewrite["ops"] == 1 and rewrite["max_abs"] <= 1e-6
    (stats,) = m["parity"]["outputs"]["A"]
    assert stats["max_abs"] <= 1e-5 and stats["cosine"] > 0.999999
    assert m["data"]["evaluation"]["source"].startswith("synthetic")


def test_flatten_model_int8_arm(tmp_path, cli):
    calib = _save_calib(tmp_path / "calib.npz", (3, 8, 8))
    out = tmp_path / "out"
    cli("build", "--model", "tinymodels:flatten_net", "--input", "x:-1x3x8x8", "--quant", "int8",
        "--calib", calib, "--out", out, "--quiet")
    m = manifest(out / "flatten_net" / "arm64-int8")
    (b,) = m["parity"]["outputs"]["B"]
    assert b["cosine"] >= 0.99                   # no labels: the gate is output cosine
    assert m["quantization"]["calibration_samples"] == 32
    fp32_weight_bytes = 4 * (8 * 3 * 3 * 3 + 8 + 512 * 5 + 5)
    assert m["model"]["params_bytes"] < 0.35 * fp32_weight_bytes


def test_paddle_vision_mobilenet_v3_parity(tmp_path, cli):
    out = tmp_path / "out"
    cli("build", "--model", "tinymodels:mobilenet_v3_small", "--input", "image:-1x3x64x64", "--out", out, "--quiet")
    m = manifest(out / "mobilenet_v3_small" / "arm64-fp32")
    ops = set(m["model"]["source_ops"])
    assert {"hard_swish", "depthwise_conv2d"} & ops
    (stats,) = m["parity"]["outputs"]["A"]
    assert stats["max_abs"] <= 1e-4 and stats["cosine"] >= 0.99999
    assert m["model"]["bytes"] > 1_000_000       # ~1.5 M parameters in fp32


def _jit_save_flatten_net(prefix):
    """Export the flatten model the way a user would, outside edgekit."""
    import paddle

    import tinymodels

    paddle.disable_static()
    layer = tinymodels.flatten_net()
    layer.eval()
    static = paddle.jit.to_static(layer, input_spec=[paddle.static.InputSpec([-1, 3, 8, 8], "float32", "x")], full_graph=True)
    paddle.jit.save(static, str(prefix))


def test_exported_inference_model_is_cross_checked(tmp_path, cli):
    """An already exported model: feeds read from the program, reference checked against Paddle Inference."""
    _jit_save_flatten_net(tmp_path / "exported" / "inference")
    out = tmp_path / "out"
    cli("build", "--model", tmp_path / "exported", "--name", "exported", "--out", out, "--quiet")
    m = manifest(out / "exported" / "arm64-fp32")
    assert m["model"]["origin"] == "inference"
    assert m["model"]["inputs"] == [{"name": "x", "shape": [-1, 3, 8, 8], "dtype": "float32"}]
    assert any("Paddle Inference" in n for n in m["parity"]["notes"])
    assert m["source"]["model_file"]["sha256"]


def test_relative_paths_from_the_working_directory(tmp_path, cli, monkeypatch):
    """The README's command uses the default ./build; PaddleSlim changes directory while it runs."""
    monkeypatch.chdir(tmp_path)
    _save_calib(tmp_path / "calib.npz", (3, 8, 8))
    cli("build", "--model", "tinymodels:flatten_net", "--input", "x:-1x3x8x8", "--quant", "int8", "--calib", "calib.npz",
        "--target", "armv7", "--quiet")
    m = manifest(tmp_path / "build" / "flatten_net" / "armv7-int8")
    assert m["model"]["abi"] == "armeabi-v7a" and m["parity"]["passed"]


def test_separate_params_layout(tmp_path, cli):
    """The old `__model__` + one-file-per-parameter layout opt also accepts is normalised, not refused."""
    import paddle

    _jit_save_flatten_net(tmp_path / "combined" / "model")
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    legacy = tmp_path / "legacy"
    with paddle.static.scope_guard(scope):
        program, _, _ = paddle.static.load_inference_model(str(tmp_path / "combined" / "model"), exe)
        params = [v for v in program.list_vars() if v.persistable and v.name not in ("feed", "fetch")]
        paddle.static.save_vars(exe, str(legacy), program, vars=params)
    (legacy / "__model__").write_bytes(program.desc.serialize_to_string())
    assert len([p for p in legacy.iterdir() if p.name != "__model__"]) == len(params) == 4
    out = tmp_path / "out"
    cli("build", "--model", legacy, "--name", "legacy", "--out", out, "--quiet")
    m = manifest(out / "legacy" / "arm64-fp32")
    (stats,) = m["parity"]["outputs"]["A"]
    assert stats["max_abs"] <= 1e-5
