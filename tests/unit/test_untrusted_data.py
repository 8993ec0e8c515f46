"""Untrusted data (issue 22): .npz/.npy, images, preprocess specs, .nb programs and ONNX external data are checked
against edgekit/core/limits.py, or refused, before anything large is allocated or any file outside is read."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import numpy as np
import pytest

from edgekit.core import limits
from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.core.images import decode_image, image_size
from edgekit.model.data import load_tensors, read_npy
from edgekit.core.errors import BundleError, DataError, InputModelError, ToolError

CRAFTED = Path(__file__).resolve().parents[1] / "data" / "untrusted"     # written by make.py there


# --- 8. .npz / .npy: headers and expansion checked before reading -----------------------------------------------------

def test_a_zip_bomb_npz_is_refused_by_its_expansion_ratio_before_decompression(monkeypatch):
    read = []
    monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__", lambda self, key: read.append(key))
    with pytest.raises(DataError, match=r"expansion ratio of member 'x.npy' .* beyond the limit MAX_NPZ_RATIO = 100"):
        load_tensors(CRAFTED / "ratio_bomb.npz", ["x"])
    assert read == []                                       # no member was decompressed


def test_an_npz_member_declaring_4_tib_is_refused_from_its_header():
    with pytest.raises(DataError, match=r"member 'x.npy' .* \(1048576x1048576\) in elements is 1,099,511,627,776, "
                                        r"beyond the limit MAX_TENSOR_ELEMENTS"):
        load_tensors(CRAFTED / "header_bomb.npz", ["x"])


def test_an_npz_member_whose_declared_size_exceeds_the_tensor_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_TENSOR_BYTES", 1000)
    np.savez(tmp_path / "d.npz", x=np.zeros((10, 100), np.float32))
    with pytest.raises(DataError, match="member 'x.npy' .* uncompressed, in bytes is 4,128, beyond the limit "
                                        "MAX_TENSOR_BYTES = 1,000"):
        load_tensors(tmp_path / "d.npz", ["x"])


def test_a_npy_declaring_more_than_it_holds_is_refused():
    with pytest.raises(DataError, match="MAX_TENSOR_ELEMENTS"):
        load_tensors(CRAFTED / "header_bomb.npy", ["x"])


def test_read_npy_checks_size_and_what_the_caller_expects(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(6, dtype=np.int32).reshape(2, 3))
    assert read_npy(tmp_path / "a.npy", BundleError, (2, 3), "int32").tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(BundleError, match=r"is int32 \[2, 3\], but the manifest says float32 \[2, 3\]"):
        read_npy(tmp_path / "a.npy", BundleError, (2, 3), "float32")
    data = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(data[:-4])
    with pytest.raises(DataError, match=r"declares \[2, 3\] int32 \(24 bytes\) but holds 20 bytes"):
        read_npy(tmp_path / "short.npy")


def test_genuine_npz_data_still_loads(tmp_path):
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    np.savez_compressed(tmp_path / "d.npz", x=x, labels=np.arange(4))
    samples = load_tensors(tmp_path / "d.npz", ["x"])
    np.testing.assert_array_equal(samples.inputs["x"], x)
    assert samples.labels.tolist() == [0, 1, 2, 3]


# --- 8. images: dimensions from the header before decoding -------------------------------------------------------------

@pytest.mark.parametrize("name", ["huge_20000.png", "huge_20000.bmp", "huge_20000.jpg"])
def test_an_image_whose_header_claims_400_mpx_is_refused_before_decoding(name, monkeypatch):
    import cv2

    monkeypatch.setattr(cv2, "imdecode", lambda *a: pytest.fail("decoded"))
    monkeypatch.setattr(cv2, "imread", lambda *a: pytest.fail("decoded"))
    assert image_size((CRAFTED / name).read_bytes()) == (20000, 20000)
    with pytest.raises(DataError, match=r"\(20000x20000\) in pixels is 400,000,000, beyond the limit MAX_IMAGE_PIXELS"):
        decode_image(CRAFTED / name)


def test_run_refuses_the_image_with_the_same_error():
    from edgekit.consumers.predict import read_image

    with pytest.raises(DataError, match="MAX_IMAGE_PIXELS"):
        read_image(CRAFTED / "huge_20000.png")


def test_image_sizes_of_real_files_agree_with_opencv(tmp_path):
    import cv2

    image = np.random.default_rng(1).integers(0, 255, (37, 53, 3), np.uint8)
    for suffix in (".png", ".jpg", ".bmp", ".webp"):
        path = tmp_path / f"i{suffix}"
        assert cv2.imwrite(str(path), image)
        assert image_size(path.read_bytes()) == (53, 37), suffix
        assert decode_image(path).shape == (37, 53, 3)
    assert cv2.imwrite(str(tmp_path / "lossless.webp"), image, [cv2.IMWRITE_WEBP_QUALITY, 101])
    assert image_size((tmp_path / "lossless.webp").read_bytes()) == (53, 37)


@pytest.mark.parametrize("data", [b"", b"GIF89a....", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff\xda\x00\x02", b"BM12"])
def test_unknown_or_truncated_headers_are_not_decoded(tmp_path, data):
    (tmp_path / "x.png").write_bytes(data)
    with pytest.raises(DataError, match="cannot decode image"):
        decode_image(tmp_path / "x.png")


# --- 8. preprocess.json sizes and types ---------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, needle", [
    ({"resize": [1e6, 1e6]}, r"preprocess.resize \[1000000, 1000000\]: its larger side is 1,000,000, beyond the limit "
                             r"MAX_RESIZE_SIDE = 8,192"),
    ({"resize": [32, 32], "crop": [9000, 9000]}, "preprocess.crop .* MAX_RESIZE_SIDE"),
    ({"resize": ["a", 2]}, "preprocess.resize is"),
    ({"resize": 5}, "preprocess.resize is 5"),
    ({"mean": [float("nan")]}, "preprocess.mean is"),
    ({"std": None}, "preprocess.std is None"),
    ({"pad_value": "x"}, "preprocess.pad_value is 'x'"),
])
def test_preprocess_specs_from_a_bundle_are_bounded_and_typed(raw, needle):
    with pytest.raises(DataError, match=needle):
        PreprocessSpec.from_mapping(raw)


# --- 4. the .nb kernel scan is linear ----------------------------------------------------------------------------------

def test_the_crafted_nb_that_took_a_minute_is_scanned_at_once():
    from edgekit.lite.nbfile import kernels

    start = time.monotonic()
    assert kernels(CRAFTED / "quadratic_kernels.nb") == []
    assert time.monotonic() - start < 2          # 24 s with the quadratic regex on this machine


@pytest.mark.parametrize("unit", [b"a", b"a/", b"\0a", b"a/b/1/", b"\0ab/cd/1/2/"])
def test_a_1_mb_crafted_program_parses_in_well_under_a_few_seconds(tmp_path, unit):
    from edgekit.lite.nbfile import kernels

    program = unit * ((1 << 20) // len(unit))
    path = tmp_path / "m.nb"
    path.write_bytes(struct.pack("<H16sQ", 2, b"v2.13-rc", len(program)) + program)
    start = time.monotonic()
    kernels(path)
    assert time.monotonic() - start < 3


# --- 3. ONNX external data stays in the model's folder ------------------------------------------------------------------

def _onnx_with_external(folder: Path, location: str) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in {"location": location, "offset": "0", "length": "16"}.items():
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [weight])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


@pytest.mark.parametrize("kind", ["link", "absolute", "dotdot", "linked-folder"])
def test_external_data_outside_the_model_folder_is_refused(tmp_path, kind):
    from edgekit.export.onnx_import import load_onnx

    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"TOPSECRET-0123456789")
    folder = tmp_path / "model"
    folder.mkdir()
    location = {"link": "link.bin", "absolute": str(secret), "dotdot": "../secret.bin", "linked-folder": "up/secret.bin"}
    if kind == "link":
        (folder / "link.bin").symlink_to(secret)
    if kind == "linked-folder":
        (folder / "up").symlink_to(tmp_path)
    path = _onnx_with_external(folder, location[kind])
    with pytest.raises(InputModelError, match="keeps its data at .*outside the model's folder"):
        load_onnx(path)


def test_external_data_beside_the_model_is_read(tmp_path):
    from edgekit.export.onnx_import import load_onnx

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    (folder / "alias.bin").symlink_to(folder / "w.bin")          # a link that stays inside is fine
    for name in ("w.bin", "alias.bin"):
        model = load_onnx(_onnx_with_external(folder, name))
        assert np.frombuffer(model.graph.initializer[0].raw_data, np.float32).tolist() == [0, 1, 2, 3]


# --- 9. the hint after a failed native build names no deleted folder ---------------------------------------------------

def test_a_failed_native_build_hints_at_a_folder_that_exists(tmp_path, monkeypatch):
    from edgekit.lite import native

    seen = []

    class Failed:
        returncode = 2

        def tail(self, lines):
            return "CMake Error: boom"

    def run(argv, **kwargs):
        seen.append(argv)
        return Failed()
    monkeypatch.setattr(native, "check_tools", lambda abi: None)
    monkeypatch.setattr(native, "build_key", lambda abi, runtime: ("k" * 40, {}))
    monkeypatch.setattr(native.proc, "run", run)
    with pytest.raises(ToolError) as info:
        native.build("host", None, tmp_path)
    scratch = seen[0][seen[0].index("-B") + 1]
    assert not Path(scratch).exists() and scratch not in info.value.hint
    assert "-B BUILD_DIR" in info.value.hint and info.value.hint.startswith("rerun by hand with a build folder")
