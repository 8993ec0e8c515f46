"""Paddle 3 models in: PIR programs and Paddle 3 model code, built with the real Paddle 3, Paddle 2.6, opt and Lite.

Paddle 3 runs in its own interpreter (EDGEKIT_PADDLE3_PYTHON; `./run tests` makes .venv-paddle3). Every
entry of `paddle3_zoo.py` (layers CV and OCR models use) is exported by Paddle 3 as PIR and built; tier A
(the x86 twin .nb) and the translation are measured against Paddle 3's own inference.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bundles import leftovers, manifest, paddle3_python, run_paddle3

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
ZOO_NAMES = ["conv_bias", "depthwise_bn_relu6", "conv_transpose", "activations", "pooling", "linear_head",
             "scale_trap", "interpolate", "concat_split", "transpose_reshape", "softmax", "attention", "reductions",
             "slice_pad"]
TOKENS = ("attention",)                     # [B, 8, 16] inputs; the others take images [B, 3, 16, 16]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    out = tmp_path_factory.mktemp("paddle3-zoo")
    run_paddle3(HERE / "paddle3_zoo.py", out)
    rng = np.random.RandomState(0)
    np.savez(out / "images.npz", x=rng.randn(6, 3, 16, 16).astype("float32"))
    np.savez(out / "tokens.npz", x=rng.randn(6, 8, 16).astype("float32"))
    return out


def _data(zoo: Path, name: str) -> Path:
    return zoo / ("tokens.npz" if name in TOKENS else "images.npz")


@pytest.mark.parametrize("name", ZOO_NAMES)
def test_zoo_entry_builds_within_1e4_of_paddle3(zoo, cli, tmp_path, name):
    cli("build", "-m", zoo / name, "--eval", _data(zoo, name), "--target", "arm64", "--quant", "fp32",
        "--no-emulation", "--out", tmp_path, "--quiet")
    m = manifest(tmp_path / name / "arm64-fp32")
    assert m["model"]["origin"] == "pir"
    assert m["paddle3"]["paddle"].startswith("3.")
    assert m["paddle3"]["check"]["max_abs"] <= 1e-4         # the translated program vs Paddle 3 on the source
    tier_a = {c["metric"]: c["value"] for c in m["parity"]["checks"] if c["tier"] == "A"}
    assert tier_a["max_abs"] <= 1e-4, tier_a                # measured <= 9.5e-7 on every entry
    assert tier_a["cosine"] >= 0.99999, tier_a


def test_venv_edgekit_finds_paddle3_beside_its_environment(zoo, tmp_path):
    """The README's `.venv/bin/edgekit`, called directly (no ./run, so no EDGEKIT_PADDLE3_PYTHON): it finds
    .venv-paddle3 beside its own environment and builds a PIR program."""
    import subprocess
    import sys

    from edgekit.core import sibling_envs

    sibling = sibling_envs.locate("EDGEKIT_PADDLE3_PYTHON", sibling_envs.PADDLE3, environ={})
    if sibling.python is None:                  # EDGEKIT_PADDLE3_PYTHON points elsewhere and no .venv-paddle3 exists
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(
            f"no .venv-paddle3 in {' or '.join(sibling.searched)}")
    venv_bin = Path(sys.prefix) / "bin"
    env = {k: v for k, v in os.environ.items()
           if k not in ("EDGEKIT_PADDLE3_PYTHON", "EDGEKIT_PADDLE3_UNAVAILABLE", "EDGEKIT_NO_PADDLE3", "VIRTUAL_ENV",
                        "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != venv_bin)
    out = tmp_path / "out"
    done = subprocess.run([str(venv_bin / "edgekit"), "build", "-m", str(zoo / "conv_bias"), "--eval",
                           str(zoo / "images.npz"), "--target", "arm64", "--quant", "fp32", "--no-emulation",
                           "--out", str(out), "--quiet"], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    m = manifest(out / "conv_bias" / "arm64-fp32")
    assert m["paddle3"]["python"] == sibling.python and m["paddle3"]["paddle"].startswith("3."), m["paddle3"]
    tier_a = {c["metric"]: c["value"] for c in m["parity"]["checks"] if c["tier"] == "A"}
    assert tier_a["max_abs"] <= 1e-4, tier_a


def test_scale_trap_is_wrong_without_its_rewrite(zoo, tmp_path):
    """opt folds `scale` after a conv-fused activation into the conv, before the activation: without
    `lite_safe` the x86 .nb is far off; with it, within 1e-4."""
    from edgekit import lite
    from edgekit.contracts.settings import ModelConfig
    from edgekit.export import StaticRunner
    from edgekit.export.pir import load_pir
    from edgekit.lite.rewrite import lite_safe
    from edgekit.lite.runtime import LiteRunner

    (tmp_path / "t").mkdir()
    static, _ = load_pir(ModelConfig(name="t", model_file=zoo / "scale_trap"), tmp_path / "t", timeout=300)
    with np.load(zoo / "images.npz") as data:
        x = {"x": data["x"]}
    reference = StaticRunner(static).run(x)[0]
    raw = lite.convert(static, "x86", tmp_path / "raw.nb", timeout=300, target="x86", precision="fp32")
    wrong = np.abs(LiteRunner(raw.nb_file, ("x",)).run(x)[0].reshape(reference.shape) - reference).max()
    safe, rewrites = lite_safe(static, tmp_path / "safe", x, x86=True)
    assert [r["rewrite"] for r in rewrites] == ["scale after a conv-fused activation -> elementwise_mul/elementwise_add"]
    fixed = lite.convert(safe, "x86", tmp_path / "safe.nb", timeout=300, target="x86", precision="fp32")
    right = np.abs(LiteRunner(fixed.nb_file, ("x",)).run(x)[0].reshape(reference.shape) - reference).max()
    assert wrong > 0.1, wrong                                # measured 1.18 (hard_swish(x) * 2 - 1)
    assert right <= 1e-4, right


def test_factory_written_for_paddle3(zoo, cli, tmp_path, monkeypatch):
    """`--paddle 3`: Paddle 3 exports the dynamic graph as PIR (checked against it there); edgekit translates."""
    monkeypatch.chdir(HERE)
    cli("build", "-m", "paddle3_zoo:Attention", "--paddle", "3", "--input", "x:-1x8x16", "--eval", zoo / "tokens.npz",
        "--no-emulation", "--out", tmp_path, "--quiet")
    m = manifest(tmp_path / "attention" / "arm64-fp32")
    assert m["model"]["origin"] == "paddle3-dygraph"
    assert m["paddle3"]["export_check"]["max_abs"] <= 1e-4
    assert m["source"]["factory"]["path"].endswith("paddle3_zoo.py") and m["source"]["factory"]["sha256"]
    tier_a = {c["metric"]: c["value"] for c in m["parity"]["checks"] if c["tier"] == "A"}
    assert tier_a["max_abs"] <= 1e-4


def test_legacy_export_of_paddle3_loses_unknown_slots(zoo, cli, tmp_path):
    """Paddle 3's legacy mode (FLAGS_enable_pir_api=0) writes `scale` with a BiasTensor slot Paddle 2.6 does not
    declare: dropped before anything reads the program, and recorded."""
    script = ("import sys, paddle, paddle3_zoo\n"
              "paddle.seed(0); net = paddle3_zoo.ScaleAfterPool(); net.eval()\n"
              "spec = [paddle.static.InputSpec([None, 3, 16, 16], 'float32', 'x')]\n"
              "paddle.jit.save(paddle.jit.to_static(net, input_spec=spec, full_graph=True), sys.argv[1])\n")
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    run_paddle3("-c", script, tmp_path / "legacy" / "model", env=env, timeout=300)
    assert (tmp_path / "legacy" / "model.pdmodel").is_file()
    cli("build", "-m", tmp_path / "legacy" / "model.pdmodel", "--input", "x:-1x3x16x16", "--eval", zoo / "images.npz",
        "--no-emulation", "--out", tmp_path / "out", "--name", "legacy", "--quiet")
    reference = manifest(tmp_path / "out" / "legacy" / "arm64-fp32")["model"]["reference_check"]
    assert reference["written_by_program_version"] >= 3000000, reference
    assert {(d["type"], d["slot"]) for d in reference["slots_dropped"]} == {("scale", "BiasTensor")}, reference
    m = manifest(tmp_path / "out" / "legacy" / "arm64-fp32")
    tier_a = {c["metric"]: c["value"] for c in m["parity"]["checks"] if c["tier"] == "A"}
    assert tier_a["max_abs"] <= 1e-4


@pytest.mark.parametrize("case", ["not_pir", "no_params", "wrong_params", "untranslatable", "no_paddle3"])
def test_bad_paddle3_input_is_one_line_and_writes_nothing(zoo, cli, tmp_path, monkeypatch, case):
    model = tmp_path / "model"
    model.mkdir()
    expect = {"not_pir": "is JSON but not a PIR program", "no_params": "no model.pdiparams beside model.json",
              "wrong_params": "Paddle 3 could not read", "untranslatable": "pd_op.cumsum",
              "no_paddle3": "cannot import paddle"}[case]
    source = zoo / ("cumsum" if case == "untranslatable" else "conv_bias")
    (model / "model.json").write_bytes((source / "model.json").read_bytes())
    if (source / "model.pdiparams").is_file():      # Paddle 3 writes none for a program without parameters
        (model / "model.pdiparams").write_bytes((source / "model.pdiparams").read_bytes())
    if case == "not_pir":
        (model / "model.json").write_text(json.dumps({"base_code": {"magic": "onnx"}, "program": {}}))
    elif case == "no_params":
        (model / "model.pdiparams").unlink()
    elif case == "wrong_params":
        (model / "model.pdiparams").write_bytes((zoo / "attention" / "model.pdiparams").read_bytes())
    elif case == "no_paddle3":
        monkeypatch.setenv("EDGEKIT_PADDLE3_PYTHON", "/bin/false")
    out = tmp_path / "out"
    result = cli("build", "-m", model, "--eval", zoo / "images.npz", "--no-emulation", "--out", out, ok=False)
    assert result.exit_code == 3, result.output
    assert expect in result.output, result.output
    assert "fix:" in result.output
    assert leftovers(out) == []


@pytest.fixture(scope="module")
def paddlex_cls(tmp_path_factory):
    """PP-OCR's direction classifier as PaddleOCR 3.x ships it: a PIR program written by Paddle 3 and its
    inference.yml (`edgekit.examples.ppocr.paddle3`: the rapidocr ONNX model imported, re-saved by Paddle 3)."""
    from edgekit.examples.ppocr import make_data, paddle3

    paddle3_python()
    root = tmp_path_factory.mktemp("paddlex-cls")
    make_data.make_data(root / "data", seed=0, counts=make_data.Counts(det_calib=1, det_eval=1, rec_calib=1, rec_eval=1,
                                                                       cls_calib=8, cls_eval=12))
    paddle3.make(root, ["cls"])
    (root / "model").symlink_to(root / "cls")
    return root


def test_paddlex_folder_builds_int8_with_no_toml(paddlex_cls, cli, tmp_path):
    """`edgekit build -m DIR`: preprocessing, task and labels come from inference.yml; tier A against Paddle 3."""
    data = paddlex_cls / "data"
    cli("build", "-m", paddlex_cls / "model", "--calib", data / "cls_calib.npz", "--eval", data / "cls_eval.npz",
        "--quant", "int8", "--out", tmp_path, "--name", "cls", "--quiet")
    bundle = tmp_path / "cls" / "arm64-int8"
    m = manifest(bundle)
    assert m["source"]["description"]["path"].endswith("inference.yml")
    assert m["task"]["kind"] == "ocr_cls"
    assert json.loads((bundle / "task.json").read_text())["options"]["labels"] == ["0", "180"]
    pre = json.loads((bundle / "preprocess.json").read_text())["preprocess"]
    assert (pre["resize"], pre["resize_mode"]) == ([48, 192], "fit_height")
    tier_a = {c["metric"]: c["value"] for c in m["parity"]["checks"] if c["tier"] == "A"}
    assert tier_a["max_abs"] <= 1e-4                           # the x86 twin vs Paddle 3 on the source program
    accuracy = m["parity"]["accuracy"]
    assert accuracy["fp32 reference"] >= 90.0, accuracy        # measured 100 on these 24 crops
    assert accuracy["fp32 reference"] - accuracy["int8 simulated"] <= 1.0, accuracy
    emulated = [k for k in accuracy if "emulated" in k]
    if os.environ.get("EDGEKIT_LITE_ARM"):                     # tier C agrees with tier B in the task's metric
        assert emulated and accuracy[emulated[0]] == accuracy["int8 simulated"], accuracy
    upright, rotated = sorted((data / "cls_images").glob("*.png"))[:2]   # make_data writes lines upright, rotated, ...
    assert json.loads(cli("run", bundle, upright).output)["label"] == "0"
    assert json.loads(cli("run", bundle, rotated).output)["label"] == "180"


def test_paddlex_yml_contradicting_the_program_is_refused(paddlex_cls, cli, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("inference.json", "inference.pdiparams"):
        (folder / name).write_bytes((paddlex_cls / "model" / name).read_bytes())
    (folder / "inference.yml").write_text((paddlex_cls / "model" / "inference.yml").read_text().replace("192", "100"))
    result = cli("build", "-m", folder, "--eval", paddlex_cls / "data" / "cls_eval.npz", "--no-emulation",
                 "--out", tmp_path / "out", ok=False)
    assert result.exit_code == 3, result.output
    assert "192" in result.output and "100" in result.output, result.output
    assert leftovers(tmp_path / "out") == []


OCR_STYLE = {"detector": (3, 64, 64), "recogniser": (3, 32, 128)}


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("model", sorted(OCR_STYLE))
def test_pir_route_is_as_good_as_a_native_export(cli, tmp_path, monkeypatch, model, precision):
    """The same PP-OCR-style code exported by Paddle 2.6 (legacy ProgramDesc) and by Paddle 3 (PIR, translated):
    the .nb files have the same ops and bytes within 5 %, and both pass tier A."""
    from edgekit.lite.nbfile import kernels

    paddle3_python()
    monkeypatch.chdir(HERE)
    rng = np.random.RandomState(0)
    shape = OCR_STYLE[model]
    np.savez(tmp_path / "eval.npz", x=rng.rand(8, *shape).astype("float32"))
    np.savez(tmp_path / "calib.npz", x=rng.rand(16, *shape).astype("float32"))
    built = {}
    for major in ("2", "3"):
        cli("build", "-m", f"paddle3_ocr_style:{model}", "--paddle", major, "--input", "x:-1x" + "x".join(map(str, shape)),
            "--eval", tmp_path / "eval.npz", "--calib", tmp_path / "calib.npz", "--quant", precision, "--no-fallback",
            "--max-drop", "0.5", "--no-emulation", "--out", tmp_path / major, "--quiet")
        bundle = tmp_path / major / model / f"arm64-{precision}"
        m = manifest(bundle)
        tier_a = {c["metric"]: c["value"] for c in m["parity"]["checks"] if c["tier"] == "A"}
        assert tier_a["max_abs"] <= 1e-4, (major, tier_a)
        built[major] = (m["model"]["bytes"], sorted(k.op for k in kernels(bundle / "model.nb")))
    (native_bytes, native_ops), (pir_bytes, pir_ops) = built["2"], built["3"]
    assert abs(pir_bytes / native_bytes - 1) <= 0.05, built    # measured 0.990-1.000
    assert pir_ops == native_ops                                 # measured: the same ops, one for one
