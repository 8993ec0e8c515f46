"""Untrusted input, second round (issue 32): the readers added since the first probe (PIR programs, inference.yml,
matrices, signed sets), each finding of the probe as a regression test: refused in one line, nothing written
outside the output folder, no traceback."""

from __future__ import annotations

import json
import math
import os
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from untrusted_bundles import make_bundle, rewrite_manifest

from edgekit.contracts import files as contracts
from edgekit.core import limits
from edgekit.matrix import cells as matrix
from edgekit.cli import app
from edgekit.contracts.settings import InputSpec
from edgekit.core.errors import BundleError, ConfigError, DataError, InputModelError

MB = 1 << 20


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _one_line_error(result, code: int, needle: str) -> None:
    assert result.exit_code == code, result.output
    assert needle in result.output, result.output
    assert "Traceback" not in result.output
    assert [line for line in result.output.splitlines() if line.startswith("error:")] and "fix:" in result.output


# --- 1. regexes over user text run in linear time ---------------------------------------------------------------------

def _linear(run, worst: str, *, budget: float = 1.0) -> None:
    """`run` on 2 KiB, 8 KiB, ... 1 MiB of `worst` (the character class its quantifiers span, then a character that
    makes the match fail: the backtracking case), each step within `budget` seconds of CPU (a linear pattern takes
    milliseconds for the megabyte). The cubic scale pattern took 1.1 s for 1,000 spaces and 8.7 s for 2,000: it
    fails at the first step instead of hanging."""
    size = 2048
    while size <= MB:
        text = (worst * (size // len(worst) + 1))[:size]
        start = time.process_time()
        run(text)
        spent = time.process_time() - start
        assert spent < budget, f"{size:,} characters took {spent:.1f} s: not linear"
        size *= 4 if size < MB else 2


def _refused(call):
    def run(text):
        try:
            call(text)
        except Exception as exc:       # noqa: BLE001 -- the point is the time, the refusals are tested elsewhere
            return exc
    return run


def _regex_readers():
    from edgekit.core import proc
    from edgekit.export import onnx_import, paddlex
    from edgekit.lite import nbfile
    from edgekit.contracts.prune import parse_prune

    def record(text):
        return proc.ProcessRecord(("x2paddle",), 1, 0.0, text, "")

    return {
        # inference.yml NormalizeImage.scale: the probe's cubic pattern (issue 32 #1)
        "scale: spaces": (_refused(lambda t: paddlex._scale(t + "x", "scale")), " "),
        "scale: space-digit": (_refused(lambda t: paddlex._scale("1" + t + "/x", "scale")), " "),
        "scale: spaces, then a fraction": (_refused(lambda t: paddlex._scale("1" + t + "/" + t + "x", "scale")), " "),
        "scale: digits": (_refused(lambda t: paddlex._scale(t + "x", "scale")), "1"),
        "scale: dots": (_refused(lambda t: paddlex._scale(t, "scale")), "."),
        "scale: digits and e": (_refused(lambda t: paddlex._scale(t, "scale")), "1e"),
        "angle labels": (_refused(lambda t: paddlex._degrees([t + "x"], "labels", [])), "1"),
        # X2Paddle's printed output (the model's names end up in it)
        "printed error": (lambda t: onnx_import._error_line(record(t + ":")), "Error."),
        "printed error, no colon": (lambda t: onnx_import._error_line(record(t)), "Error."),
        "unsupported op line": (lambda t: onnx_import._UNSUPPORTED_OP_LINE.match(t), "="),
        "unsafe onnx names": (lambda t: onnx_import._UNSAFE_CHAR.sub("_", t), "@"),
        # names and specs typed by users or read from edgekit.toml / matrix files
        "name rule": (lambda t: contracts.safe_name(t), "a"),
        "factory spec": (lambda t: matrix.FACTORY.fullmatch(t + "!"), "a."),
        "input spec": (_refused(lambda t: InputSpec.parse("x:" + t)), "1x"),
        "prune spec": (_refused(lambda t: parse_prune(t + "%x")), "1."),
        "prune target": (_refused(lambda t: parse_prune("flops:" + t)), ":"),
        # .nb programs: the kernel scan
        "nb kernels": (lambda t: nbfile._KERNEL.findall(b"\0" + t.encode()), "a"),
        "nb kernels, slashes": (lambda t: nbfile._KERNEL.findall(b"\0" + t.encode()), "a/"),
    }


@pytest.mark.parametrize("name", sorted(_regex_readers()))
def test_every_regex_over_user_text_is_linear_on_a_megabyte_of_its_worst_class(name):
    run, worst = _regex_readers()[name]
    _linear(run, worst)


def test_a_scale_of_thousands_of_spaces_is_refused_in_one_line(tmp_path):
    from edgekit.export import paddlex

    (tmp_path / "inference.yml").write_text("Global:\n  model_name: m\nPreProcess:\n  transform_ops:\n"
                                            "  - NormalizeImage:\n      scale: '" + " " * 5000 + "'\n"
                                            "      mean: [0.5]\n      std: [0.5]\n      order: hwc\n")
    start = time.process_time()
    with pytest.raises(InputModelError, match=r"scale is '\s+\.\.\.', not a number or a fraction like 1\./255\."):
        paddlex.read_model_yml(tmp_path / "inference.yml")
    assert time.process_time() - start < 3
    assert paddlex._scale(" 1. / 255. ", "s") == pytest.approx(1 / 255)
    assert paddlex._scale("0.00392156862745098", "s") == pytest.approx(1 / 255)


# --- 2, 3. a name is a file name everywhere; paths built from names stay inside their root ---------------------------

@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "a\\b", "", "x" * 65, "é"])
def test_one_rule_decides_every_name(name):
    assert not contracts.safe_name(name)
    with pytest.raises(ConfigError, match="is not usable as a folder name"):
        contracts.check_name(name, "model name")


def test_a_model_file_whose_name_is_dot_dot_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    victim = tmp_path / "arm64-fp32"                  # what OUT/../arm64-fp32 would replace
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    model = tmp_path / "...onnx"                       # its stem is ".."
    model.write_bytes(b"not read")
    result = _invoke("build", "--model", model, "--target", "arm64", "--quant", "fp32", "--out", out)
    _one_line_error(result, 2, "model name '..' is not usable as a folder name")
    assert (victim / "keep.txt").read_text() == "mine" and not out.exists()
    result = _invoke("build", "--model", tmp_path / "m.pdmodel", "--name", "..", "--out", out)
    _one_line_error(result, 2, "model name '..' is not usable as a folder name")


def test_a_bundle_folder_reached_through_a_link_out_of_the_root_is_refused(tmp_path):
    from edgekit.build.config import resolve
    from edgekit.build.pipeline import build

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "m").symlink_to(elsewhere)
    (tmp_path / "m.pdmodel").write_bytes(b"x")
    cfg = resolve(None, {"model": str(tmp_path / "m.pdmodel"), "name": "m", "out_dir": str(out)}, environ={})
    with pytest.raises(ConfigError, match=r"the bundle folder .* resolves to .*elsewhere.*, outside"):
        build(cfg)
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in out.iterdir()) == ["m"]


@pytest.mark.parametrize("table", ['[[model]]\nname = ".."\nmodel = "m.pdmodel"\n',
                                   '[[model]]\nname = "m"\nmodel = "m.pdmodel"\n[[setting]]\nname = ".."\n'])
def test_matrix_names_follow_the_one_rule(tmp_path, table):
    (tmp_path / "m.toml").write_text(table)
    result = _invoke("matrix", tmp_path / "m.toml", "--out", tmp_path / "out")
    _one_line_error(result, 2, "'..' is not usable as a folder name")
    assert not (tmp_path / "out").exists()


def test_the_matrix_removes_nothing_outside_its_out_folder(tmp_path):
    """Cells made without `matrix.load` (its names checked there): the run itself refuses paths leaving --out."""
    out, victim = tmp_path / "out", tmp_path / "arm64-fp32"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    entry = matrix.ModelEntry("..", None, "m.pdmodel", None, None, (), (), ())
    cell = matrix.Cell(entry, "arm64", "fp32", matrix.Setting(".."))
    assert cell.bundle_dir(out).resolve() == victim            # bundles/../../arm64-fp32
    bad = matrix.Matrix((cell,), tmp_path / "m.toml", 60)
    with pytest.raises(ConfigError, match="outside"):
        matrix.run(bad, out, executor=None, source="src")
    with pytest.raises(ConfigError, match="outside"):
        matrix._remove(cell.bundle_dir(out), out)
    assert (victim / "keep.txt").read_text() == "mine"


# --- 4. the x86 twin of an untrusted bundle runs in a child process --------------------------------------------------

@pytest.mark.e2e           # starts the twin's process (Paddle-Lite's x86 runtime)
def test_a_twin_that_crashes_paddle_lite_is_exit_3_in_one_line(tmp_path):
    """One byte of host/model_x86.nb changed (here: the program's first bytes 0xff, which Paddle-Lite 2.13's loader
    dereferences: SIGSEGV), the manifest re-hashed: `parity` and `run` used to die with exit 139 and no message."""
    import cv2

    from untrusted_bundles import nb_bytes

    bundle = make_bundle(tmp_path)
    (bundle / "host" / "model_x86.nb").write_bytes(nb_bytes(program=b"\xff" * 8))
    rewrite_manifest(bundle, lambda m: None)
    cv2.imwrite(str(tmp_path / "a.png"), np.zeros((8, 8), np.uint8))
    for command in (("parity", bundle), ("run", bundle, tmp_path / "a.png", "--engine", "twin")):
        result = _invoke(*command)
        _one_line_error(result, 3, "Paddle-Lite's x86 runtime crashed on")
        assert "died from SIGSEGV" in result.output


# --- 5, 13. links in model and data folders ---------------------------------------------------------------------------

PIR = {"base_code": {"magic": "pir", "version": 1}, "program": {"regions": []}}


@pytest.mark.parametrize("linked", ["inference.json", "inference.pdiparams", "inference.yml"])
def test_a_pir_folder_holding_a_link_out_of_it_is_refused(tmp_path, linked):
    from edgekit.export import paddlex, pir

    folder, outside = tmp_path / "model", tmp_path / "secret"
    folder.mkdir()
    outside.mkdir()
    files = {"inference.json": json.dumps(PIR), "inference.pdiparams": "params", "inference.yml": "Global: {}\n"}
    for name, text in files.items():
        (outside if name == linked else folder).joinpath(name).write_text(text)
    (folder / linked).symlink_to(outside / linked)
    with pytest.raises(InputModelError, match=rf"{linked} is a symbolic link"):
        if linked == "inference.yml":
            paddlex.find_model_yml(folder)
        else:
            pir.locate(folder, None)


def test_an_evaluation_folder_holding_links_is_refused(tmp_path):
    from edgekit.core.images import image_files

    import cv2

    data, elsewhere = tmp_path / "eval", tmp_path / "photos"
    (data / "0").mkdir(parents=True)
    elsewhere.mkdir()
    cv2.imwrite(str(elsewhere / "photo.png"), np.zeros((8, 8), np.uint8))
    cv2.imwrite(str(data / "0" / "b.png"), np.zeros((8, 8), np.uint8))
    assert [p.name for p in image_files(data)] == ["b.png"]
    (data / "0" / "a.png").symlink_to(elsewhere / "photo.png")
    with pytest.raises(DataError, match=r"a\.png in the data folder .* is a symbolic link"):
        image_files(data)
    (data / "0" / "a.png").unlink()
    (data / "1").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(DataError, match=r"1 in the data folder .* is a symbolic link"):
        image_files(data)
    (data / "1").unlink()
    os.mkfifo(data / "0" / "c.png")
    with pytest.raises(DataError, match="is a special file"):
        image_files(data)


# --- 6. PIR input dims bounded before synthetic data ------------------------------------------------------------------

@pytest.mark.parametrize("dims", [(-1, 3, 1 << 62, 4), (-1, 3, 100_000, 100_000), (-1, 3, -5, 4), (-1, 0, 8, 8)])
def test_synthetic_data_is_bounded_by_the_limits(dims):
    from edgekit.model.evalset import synthetic

    with pytest.raises(InputModelError, match="MAX_TENSOR_ELEMENTS|positive sizes"):
        synthetic([InputSpec("x", dims, "float32")], 16)
    assert synthetic([InputSpec("x", (-1, 3, 4, 4), "float32")], 2).inputs["x"].shape == (2, 3, 4, 4)


# --- 7. is_pir_json within the limits ---------------------------------------------------------------------------------

def test_is_pir_json_reads_within_the_json_limits(tmp_path, monkeypatch):
    from edgekit.export.program import is_pir_json

    deep = tmp_path / "deep.json"
    deep.write_text("{\"a\":" * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(InputModelError, match="MAX_JSON_DEPTH"):
        is_pir_json(deep)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(PIR))
    monkeypatch.setattr(limits, "MAX_JSON_BYTES", 16)
    parsed = []
    monkeypatch.setattr(json, "loads", lambda *a, **k: parsed.append(1))
    with pytest.raises(InputModelError, match="in bytes is .*, beyond the limit MAX_JSON_BYTES = 16"):
        is_pir_json(big)
    assert parsed == []                             # refused from its size, before parsing


# --- 8. npy header never closed ---------------------------------------------------------------------------------------

def test_an_npy_header_dict_never_closed_is_refused(tmp_path):
    from edgekit.model.data import load_tensors, read_npy

    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,"
    header += b" " * (64 - 10 - len(header) - 1) + b"\n"
    (tmp_path / "x.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\0" * 8)
    with pytest.raises(DataError, match="not a .npy array numpy can read"):
        read_npy(tmp_path / "x.npy")
    with pytest.raises(DataError, match="not a .npy array numpy can read"):
        load_tensors(tmp_path / "x.npy", ["x"])


# --- 9. emulation.instruction_counts typed in the contract reader -----------------------------------------------------

@pytest.mark.parametrize("counts", [{"ran": True}, 5, {"ran": True, "paths": {"default": {"per_inference": 3}}},
                                    {"ran": True, "paths": {"default": {"per_inference": {"total": 1},
                                                                        "first_inference": 1}}},
                                    {"ran": "yes"}])
def test_malformed_instruction_counts_are_a_bundle_error(tmp_path, counts):
    bundle = make_bundle(tmp_path)
    rewrite_manifest(bundle, lambda m: m.update(emulation={"ran": True, "instruction_counts": counts}))
    for command in (("inspect", bundle), ("bench", bundle)):
        _one_line_error(_invoke(*command), 10, "instruction_counts")


def test_well_formed_instruction_counts_still_read(tmp_path):
    from edgekit.consumers import costs

    one = {"total": 100, "simd_fp": 50, "load_store": 20, "branch": 10, "other": 20, "dot_product": 0}
    counts = {"ran": True, "paths": {"default": {"per_inference": one, "first_inference": 150, "kernel_path": "x"}}}
    bundle = make_bundle(tmp_path)
    rewrite_manifest(bundle, lambda m: m.update(emulation={"ran": True, "instruction_counts": counts}))
    assert costs.bench_bundles([bundle])["bundles"][0]["paths"]["default"]["total"] == 100
    rewrite_manifest(bundle, lambda m: m.update(emulation={"ran": True, "instruction_counts": {"ran": False,
                                                                                               "reason": "no qemu"}}))
    result = _invoke("bench", bundle)
    _one_line_error(result, 3, "records no instruction counts (no qemu)")


# --- 10. keep_top_k: .inf ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1.0e+400"])
def test_non_finite_numbers_in_inference_yml_are_refused(value):
    import yaml

    from edgekit.export import paddlex

    raw = yaml.safe_load(f"NMS:\n  keep_top_k: {value}\n")
    with pytest.raises(paddlex._Refusal, match="not a finite number"):
        paddlex._detection_task(raw, [], [])


# --- 12. non-finite numbers in bundle JSON ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", ['{"scale": 1e999}', '{"pad": NaN}', '{"a": [Infinity]}', '{"a": -Infinity}',
                                  '{"a": -1e400}'])
def test_non_finite_numbers_in_edgekit_json_are_refused(tmp_path, text):
    (tmp_path / "f.json").write_text(text)
    with pytest.raises(BundleError, match="not valid JSON .*(not finite|not a JSON number)"):
        limits.read_json(tmp_path / "f.json", BundleError, "rebuild")
    assert limits.read_json(tmp_path / "f.json", BundleError, "", finite=False) is not None


def test_a_preprocess_json_with_an_overflowing_scale_is_refused_by_run(tmp_path):
    import cv2

    bundle = make_bundle(tmp_path)
    spec = (bundle / "preprocess.json").read_text().replace('"scale": 1.0', '"scale": 1e999')
    assert "1e999" in spec
    (bundle / "preprocess.json").write_text(spec)
    rewrite_manifest(bundle, lambda m: None)
    cv2.imwrite(str(tmp_path / "a.png"), np.zeros((8, 8), np.uint8))
    _one_line_error(_invoke("run", bundle, tmp_path / "a.png", "--engine", "twin"), 10, "not finite")


# --- 11. the signed-set rule: what Python's package --verify refuses (C++: tests/native/test_signed_assets.py) ---------

def _asset_set(tmp_path):
    from edgekit.consumers.package import Platform, package

    bundle = make_bundle(tmp_path / "b")
    package([bundle], Platform.linux, tmp_path / "set")
    return tmp_path / "set"


def _reindex(folder: Path, edit) -> None:
    index = json.loads((folder / "assets.json").read_text())
    edit(index)
    (folder / "assets.json").write_text(json.dumps(index, indent=2) + "\n")


@pytest.mark.parametrize("edit, needle", [
    (lambda i: i["models"][0].update(dir="../../.."), "dir"),
    (lambda i: i.update(runtime_required=None), "runtime_required"),
    (lambda i: i.update(models=[]), "models"),
    (lambda i: i["models"][0].update(name=".."), "name"),
    (lambda i: i["files"][next(iter(i["files"]))].update(sha256="AB" * 32), "sha256"),
    (lambda i: i["files"][next(iter(i["files"]))].update(bytes=1.5), "bytes"),
])
def test_package_verify_refuses_what_the_app_loader_refuses(tmp_path, edit, needle):
    folder = _asset_set(tmp_path)
    assert _invoke("package", "--verify", folder).exit_code == 0
    _reindex(folder, edit)
    _one_line_error(_invoke("package", "--verify", folder), 10, needle)


def test_package_verify_refuses_links_special_and_unlisted_files(tmp_path):
    folder = _asset_set(tmp_path)
    model = json.loads((folder / "assets.json").read_text())["models"][0]["dir"]
    cases = {"extra.txt": lambda p: p.write_text("x"),
             "hostname": lambda p: p.symlink_to("/etc/hostname"),
             "dirlink": lambda p: p.symlink_to(folder / model, target_is_directory=True),
             "fifo": lambda p: os.mkfifo(p)}
    for name, make in cases.items():
        make(folder / model / name)
        result = _invoke("package", "--verify", folder)
        assert result.exit_code == 10 and name in result.output, (name, result.output)
        (folder / model / name).unlink()
    assert _invoke("package", "--verify", folder).exit_code == 0


@pytest.mark.parametrize("change", [
    lambda r: r.update(signed="model.nb"),
    lambda r: r.update(public_key=" ".join(r["public_key"][i:i + 2] for i in range(0, 64, 2))),
    lambda r: r.update(signature=r["signature"].upper()),
    lambda r: r.update(public_key=r["public_key"] + "00"),
])
def test_a_signature_record_is_spelled_one_way(tmp_path, change):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    from edgekit.consumers.package import signature_record

    key = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "k.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    (tmp_path / "k.pub.pem").write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    folder = _asset_set(tmp_path)
    record = signature_record((folder / "assets.json").read_bytes(), tmp_path / "k.pem")
    (folder / "assets.json.sig").write_text(json.dumps(record))
    assert _invoke("package", "--verify", folder, "--pubkey", tmp_path / "k.pub.pem").exit_code == 0
    change(record)
    (folder / "assets.json.sig").write_text(json.dumps(record))
    _one_line_error(_invoke("package", "--verify", folder, "--pubkey", tmp_path / "k.pub.pem"), 16,
                    "is not an edgekit.signature/1 record")
    assert _invoke("package", "--verify", folder).exit_code == 16


# --- every reader of user files within the limits: toml and ground truth too --------------------------------------------

def test_config_files_are_read_within_the_limits(tmp_path, monkeypatch):
    from edgekit.contracts.settings import load_toml

    (tmp_path / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match="MAX_JSON_DEPTH"):
        load_toml(tmp_path / "deep.toml")
    monkeypatch.setattr(limits, "MAX_CONFIG_BYTES", 64)
    (tmp_path / "big.toml").write_text("[model]\nname = \"" + "m" * 100 + "\"\n")
    with pytest.raises(ConfigError, match="beyond the limit MAX_CONFIG_BYTES = 64"):
        load_toml(tmp_path / "big.toml")


def test_ground_truth_is_read_within_the_limits(tmp_path):
    from edgekit.tasks.truth import read_truth

    (tmp_path / "truth.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataError, match="MAX_JSON_DEPTH"):
        read_truth(tmp_path / "truth.json")


# --- the probe's reproducers through the CLI: one line, exit 3, nothing written outside --out ---------------------------

def _pir_folder(folder: Path, yml: str | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "inference.json").write_text(json.dumps(PIR))
    (folder / "inference.pdiparams").write_bytes(b"")
    if yml is not None:
        (folder / "inference.yml").write_text(yml)
    return folder


def _outside(tmp_path: Path, out: Path) -> list:
    return sorted(p.name for p in tmp_path.iterdir() if p != out)


@pytest.mark.e2e          # `build` of a Paddle 3 folder looks for the Paddle 3 interpreter (a process) first
@pytest.mark.parametrize("case", ["scale of spaces", "linked params", "deep program", "keep_top_k inf"])
def test_the_probe_reproducers_are_refused_by_build_in_one_line(tmp_path, case):
    paddlex_data = Path(__file__).resolve().parents[1] / "data" / "paddlex"
    model = tmp_path / "model"
    if case == "scale of spaces":
        _pir_folder(model, "Global:\n  model_name: m\nPreProcess:\n  transform_ops:\n  - NormalizeImage:\n"
                           "      scale: '1" + " " * 5000 + "x'\n      mean: [0.5]\n      std: [0.5]\n      order: hwc\n")
        needle = "NormalizeImage.scale is '1 "
    elif case == "linked params":
        _pir_folder(model)
        (model / "inference.pdiparams").unlink()
        (model / "inference.pdiparams").symlink_to("/etc/hostname")
        needle = "inference.pdiparams is a symbolic link"
    elif case == "deep program":
        _pir_folder(model)
        (model / "inference.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
        needle = "MAX_JSON_DEPTH"
    else:
        yml = (paddlex_data / "PicoDet-S" / "inference.yml").read_text().replace("keep_top_k: 100", "keep_top_k: .inf")
        assert ".inf" in yml
        _pir_folder(model, yml)
        needle = "NMS.keep_top_k is inf, not a finite number"
    out = tmp_path / "out"
    before = _outside(tmp_path, out)
    start = time.process_time()
    _one_line_error(_invoke("build", "-m", model, "--out", out), 3, needle)
    assert time.process_time() - start < 20
    assert _outside(tmp_path, out) == before
    assert not out.exists() or [p for p in out.rglob("*")] == []
