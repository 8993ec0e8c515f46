"""The app core's loader, OCR geometry, decoder and C API (native/app, native/capi).

Host: the Lite-free build, through edgekit-app-tests' helper modes and libedgekit_c.so
over ctypes (the loader verifies; runs answer "unavailable"); the tests that need real
bundles (built by the CLI) are e2e. ARM (e2e): the C API with
the real Paddle-Lite runtime under qemu, through edgekit-capi (a C program over the API):
the loader against the runtime's version and the golden self-test an app runs.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import shutil
import subprocess
import threading

import numpy as np
import pytest

from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.consumers.predict import crop, sort_boxes, _box_to_image, _det_geometry, _quad_to_image
from edgekit.core.errors import BundleError

ARM = [pytest.param("aarch64", marks=pytest.mark.e2e), pytest.param("armhf", marks=pytest.mark.e2e)]


# ------------------------------------------------------------------ helpers

class EkImage(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_uint8)), ("width", ctypes.c_int32), ("height", ctypes.c_int32),
                ("stride", ctypes.c_int32), ("format", ctypes.c_int32)]


def c_api(build):
    """libedgekit_c.so of a host build, with the prototypes of edgekit_c.h."""
    lib = ctypes.CDLL(str(build.root / "libedgekit_c.so"))
    handle, text = ctypes.c_void_p, ctypes.c_char_p
    for name, restype, argtypes in [
        ("ek_version", text, []), ("ek_last_error", text, []), ("ek_status_name", text, [ctypes.c_int]),
        ("ek_open", ctypes.c_int, [text, text, ctypes.POINTER(handle)]), ("ek_close", None, [handle]),
        ("ek_describe", ctypes.c_int, [handle, ctypes.POINTER(ctypes.c_void_p)]),
        ("ek_model_count", ctypes.c_int32, [handle]), ("ek_model_name", text, [handle, ctypes.c_int32]),
        ("ek_model_task", text, [handle, ctypes.c_int32]),
        ("ek_run", ctypes.c_int, [handle, text, ctypes.POINTER(EkImage), ctypes.POINTER(ctypes.c_void_p)]),
        ("ek_selftest", ctypes.c_int, [handle, text, ctypes.POINTER(ctypes.c_void_p)]),
        ("ek_image_decode", ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(EkImage)]),
        ("ek_image_free", None, [ctypes.POINTER(EkImage)]), ("ek_free", None, [ctypes.c_void_p])]:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def open_assets(lib, path, options=None):
    handle = ctypes.c_void_p()
    status = lib.ek_open(str(path).encode(), options.encode() if options else None, ctypes.byref(handle))
    return status, handle, lib.ek_last_error().decode()


def take_json(lib, pointer):
    text = ctypes.cast(pointer, ctypes.c_char_p).value.decode()
    lib.ek_free(pointer)
    return json.loads(text)


def capi(run_native, abi, runtime, build, *args):
    """edgekit-capi (C, over the API) under qemu: (exit code, parsed stdout lines, stderr)."""
    done = run_native(abi, runtime, build, [build.root / "edgekit-capi", *args])
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines, done.stderr


def tampered_copies(assets, tmp_path):
    """Copies of a packaged asset set with one thing wrong each, and the refusal each must get."""
    index = json.loads((assets / "assets.json").read_text())
    model = index["models"][0]["dir"]
    cases = {}

    def copy(name):
        dst = tmp_path / name
        shutil.copytree(assets, dst)
        return dst

    flipped = copy("byte")                     # one byte of model.nb
    nb = flipped / model / "model.nb"
    data = bytearray(nb.read_bytes())
    data[len(data) // 2] ^= 0x01
    nb.write_bytes(bytes(data))
    cases["byte"] = (flipped, "checksum mismatch", f"{model}/model.nb has sha256")

    missing = copy("missing")                  # a listed file removed
    (missing / model / "preprocess.json").unlink()
    cases["missing"] = (missing, "missing file", f"{model}/preprocess.json is listed in assets.json but absent")

    patched = copy("version")                  # the .nb header says v2.12 and assets.json agrees on the checksum
    nb = patched / model / "model.nb"
    data = nb.read_bytes()
    nb.write_bytes(data[:2] + b"v2.12".ljust(16, b"\0") + data[18:])
    table = json.loads((patched / "assets.json").read_text())
    table["files"][f"{model}/model.nb"] = {"sha256": hashlib.sha256(nb.read_bytes()).hexdigest(), "bytes": len(data)}
    (patched / "assets.json").write_text(json.dumps(table))
    cases["version"] = (patched, "version mismatch", "converted by opt v2.12")

    schema = copy("schema")
    table = json.loads((schema / "assets.json").read_text())
    table["schema"] = "edgekit.assets/0"
    (schema / "assets.json").write_text(json.dumps(table))
    cases["schema"] = (schema, "schema", "expected edgekit.assets/1")
    return cases


# ------------------------------------------------------------------ host: pure logic against Python

@pytest.mark.e2e
def test_sha256_equals_hashlib(emulation, digits_fp32, tmp_path):
    _, build = emulation("host")
    rng = np.random.default_rng(5)
    files = []
    for size in (0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 65535, 65536, 65537, 1 << 20):
        path = tmp_path / f"f{size}.bin"
        path.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        files.append(path)
    files += sorted(p for p in digits_fp32.rglob("*") if p.is_file())     # model.nb, npy, png, json
    done = subprocess.run([str(build.root / "edgekit-app-tests"), "--sha256", *map(str, files)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = dict(reversed(line.split("  ", 1)) for line in done.stdout.splitlines())
    assert len(got) == len(files) >= 30
    for path in files:
        assert got[str(path)] == hashlib.sha256(path.read_bytes()).hexdigest(), path


def det_cases(rng, count):
    """Detector results on pages of random sizes through stretch (with and without a centre crop), letterbox (the
    PaddleOCR 3.x det input) and the modes a detector cannot undo; boxes as numpy floats, quads as integers."""
    for i in range(count):
        size = [int(v) for v in rng.integers(16, 1000, 2)]
        mode = ("stretch", "letterbox", "letterbox", "crop", "fit_height", "none")[i % 6]
        spec = {"resize": size, "resize_mode": "stretch" if mode in ("crop", "none") else mode}
        if mode == "crop":
            spec["crop"] = [int(rng.integers(1, size[0] + 1)), int(rng.integers(1, size[1] + 1))]
        if mode == "none":
            del spec["resize"]
        spec = PreprocessSpec.from_mapping(spec)
        tensor = spec.crop or spec.resize or (64, 64)
        boxes = []
        for _ in range(5):
            quad = [[int(rng.integers(0, tensor[1] + 1)), int(rng.integers(0, tensor[0] + 1))] for _ in range(4)]
            box = [float(np.round(v, 2)) for v in rng.uniform(0, max(tensor), 4)]
            boxes.append({"box": box, "quad": quad, "score": 0.5})
        yield {"boxes": boxes, "spec": spec.to_json(), "height": int(rng.integers(1, 2000)),
               "width": int(rng.integers(1, 2000))}, spec


def predicted(case, spec):
    """predict.py's mapping of one case, or None when it refuses the detector."""
    det = type("Det", (), {"spec": spec, "path": "det"})()
    try:
        g = _det_geometry(det, np.zeros((case["height"], case["width"]), np.uint8))
    except BundleError:
        return None
    # the detector's boxes are numpy floats (numpy's round), its quads integers (Python's round)
    return [dict(b, box=_box_to_image([np.float64(v) for v in b["box"]], g), quad=_quad_to_image(b["quad"], g))
            for b in case["boxes"]]


def test_ocr_geometry_equals_predict_py(emulation, tmp_path):
    """sort_boxes, crop (floor/ceil, clamped) and the detector's boxes and quads mapped back to the page (stretch,
    centre crop, letterbox; refusals) against edgekit/consumers/predict.py."""
    _, build = emulation("host")
    rng = np.random.default_rng(7)
    sorts = []
    for _ in range(300):
        n = int(rng.integers(0, 12))
        # tops on a coarse grid, so ties and near-ties (< 10 px) are frequent
        x0, y0 = rng.integers(0, 400, n).astype(float), (rng.integers(0, 30, n) * 4.5 + rng.choice([0, 0.01], n))
        sorts.append([[float(a), float(b), float(a + 50), float(b + 20)] for a, b in zip(x0, y0)])
    crops = []
    for _ in range(500):
        h, w = int(rng.integers(1, 60)), int(rng.integers(1, 60))
        # DB boxes are never negative (clamped at 0); they may end past the image by rounding
        a, b = sorted(rng.uniform(0, w + 10, 2)), sorted(rng.uniform(0, h + 10, 2))
        box = [round(float(a[0]), 2), round(float(b[0]), 2), round(float(a[1]), 2), round(float(b[1]), 2)]
        crops.append({"box": box, "height": h, "width": w})
    scales, specs = zip(*det_cases(rng, 300))
    (tmp_path / "in.json").write_text(json.dumps({"sort": sorts, "crop": crops, "scale": scales}))
    done = subprocess.run([str(build.root / "edgekit-app-tests"), "--ocr-geometry", str(tmp_path / "in.json"),
                           str(tmp_path / "out.json")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["sort"] == [sort_boxes(b) for b in sorts]
    assert sum(any(abs(b[1] - a[1]) < 10 and b[0] < a[0] for a, b in zip(s, s[1:])) for s in sorts) > 50
    image = np.zeros((60, 60), np.uint8)
    for case, (top, left, h, w) in zip(crops, out["crop"]):
        want = crop(image[:case["height"], :case["width"]], case["box"])
        assert (h, w) == want.shape, case
        if want.size:
            assert (top, left) == (max(0, math.floor(case["box"][1])), max(0, math.floor(case["box"][0])))
    refused, clamped = 0, 0
    for case, spec, got in zip(scales, specs, out["scale"]):
        want = predicted(case, spec)
        if want is None:
            refused += 1
            assert isinstance(got, str) and "cannot be mapped back to the page" in got, (case, got)
            continue
        assert got == want, case
        clamped += sum(v in (0.0, case["width"], case["height"]) for b in want for v in b["box"])
    assert refused == 100 and clamped > 100, (refused, clamped)   # the letterbox border maps off the page: clamped


def test_decoder_equals_cv2_for_lossless_files(emulation, tmp_path):
    """ek_image_decode (stb_image) against edgekit's decode_image (cv2.imread): PNG and BMP in every colour type
    exactly; JPEG decoders differ by a few levels (measured and bounded here); 16-bit refused as Python does."""
    import cv2
    from PIL import Image

    from edgekit.core.images import decode_image
    from edgekit.core.errors import DataError

    _, build = emulation("host")
    lib = c_api(build)
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (37, 53, 4), dtype=np.uint8)
    smooth = cv2.GaussianBlur(rng.integers(0, 256, (64, 96, 3), dtype=np.uint8), (9, 9), 3)
    cv2.imwrite(str(tmp_path / "rgba.png"), img)
    cv2.imwrite(str(tmp_path / "rgb.png"), img[:, :, :3])
    cv2.imwrite(str(tmp_path / "gray.png"), img[:, :, 0])
    cv2.imwrite(str(tmp_path / "x.bmp"), img[:, :, :3])
    Image.fromarray(img[:, :, :2], "LA").save(tmp_path / "gray_alpha.png")
    Image.fromarray(img[:, :, :3]).convert("P", palette=Image.ADAPTIVE, colors=50).save(tmp_path / "palette.png")
    cv2.imwrite(str(tmp_path / "photo.jpg"), smooth, [cv2.IMWRITE_JPEG_QUALITY, 90])
    cv2.imwrite(str(tmp_path / "deep.png"), img[:, :, 0].astype(np.uint16) * 257)

    def decoded(path):
        data, image = path.read_bytes(), EkImage()
        status = lib.ek_image_decode(data, len(data), ctypes.byref(image))
        if status:
            return status, lib.ek_last_error().decode()
        channels = image.stride // image.width
        pixels = np.ctypeslib.as_array(image.data, (image.height, image.stride)).copy()
        fmt = image.format
        lib.ek_image_free(ctypes.byref(image))
        assert not image.data                      # freed and cleared
        pixels = pixels.reshape(pixels.shape[0], -1, channels)
        as_bgr = {0: pixels[:, :, 0], 2: pixels[:, :, ::-1], 4: pixels[:, :, 2::-1]}[fmt]
        return 0, as_bgr

    for name in ("rgba.png", "rgb.png", "gray.png", "x.bmp", "gray_alpha.png", "palette.png"):
        status, got = decoded(tmp_path / name)
        want = decode_image(tmp_path / name)
        if want.ndim == 3 and got.ndim == 2:       # gray kept as gray; cv2 repeats it (same tensors either way)
            got = np.repeat(got[:, :, None], 3, axis=2)
        assert status == 0 and got.shape == want.shape and np.array_equal(got, want), name
    status, got = decoded(tmp_path / "photo.jpg")
    diff = np.abs(got.astype(int) - decode_image(tmp_path / "photo.jpg").astype(int))
    assert status == 0 and diff.max() <= 4 and (diff > 0).mean() < 0.2, (diff.max(), (diff > 0).mean())
    status, message = decoded(tmp_path / "deep.png")
    with pytest.raises(DataError):
        decode_image(tmp_path / "deep.png")
    assert status == 5 and "16-bit" in message


# ------------------------------------------------------------------ host: the loader through the C API

@pytest.mark.e2e
def test_c_api_on_the_host_verifies_and_reports(emulation, digits_assets):
    _, build = emulation("host")
    lib = c_api(build)
    version = json.loads(lib.ek_version())
    assert version["api"] == 1 and version["runtime"] is None and version["decoder"] == "stb_image"
    status, handle, error = open_assets(lib, digits_assets, '{"threads": 2, "top_k": 3}')
    assert (status, error) == (0, "")
    try:
        names = [lib.ek_model_name(handle, i).decode() for i in range(lib.ek_model_count(handle))]
        assert sorted(names) == ["digits", "digits-fp32"]
        assert lib.ek_model_task(handle, 0) == b"classification" and lib.ek_model_name(handle, 5) is None
        out = ctypes.c_void_p()
        assert lib.ek_describe(handle, ctypes.byref(out)) == 0
        described = take_json(lib, out)
        index = json.loads((digits_assets / "assets.json").read_text())
        assert described["kind"] == "assets" and described["files"] == len(index["files"])
        assert described["bytes"] == sum(f["bytes"] for f in index["files"].values())
        assert described["runtime_version"] is None and described["opt_version"] == "v2.13-rc"
        model = next(m for m in described["models"] if m["name"] == "digits-fp32")
        assert len(model["golden_images"]) == 8 and model["loaded"] is False
        pixels = np.zeros((8, 8), np.uint8)
        image = EkImage(pixels.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), 8, 8, 0, 0)
        assert lib.ek_run(handle, b"digits-fp32", ctypes.byref(image), ctypes.byref(out)) == 9
        assert "no Paddle-Lite runtime" in lib.ek_last_error().decode() and not out.value
        assert lib.ek_run(handle, b"nope", ctypes.byref(image), ctypes.byref(out)) == 2
        assert lib.ek_selftest(handle, None, ctypes.byref(out)) == 9
    finally:
        lib.ek_close(handle)
    # argument errors, never a crash; the message is per thread
    assert open_assets(lib, digits_assets, '{"thread": 2}')[0] == 2
    assert "unknown option \"thread\"" in lib.ek_last_error().decode()
    assert open_assets(lib, digits_assets, "not json")[0] == 2
    assert lib.ek_open(None, None, None) == 2 and lib.ek_status_name(8) == b"assets"
    seen = []
    worker = threading.Thread(target=lambda: seen.append(lib.ek_last_error().decode()))
    worker.start()
    worker.join()
    assert seen == [""] and lib.ek_last_error().decode() != ""


@pytest.mark.e2e
def test_loader_refuses_tampered_asset_sets_on_the_host(emulation, digits_assets, tmp_path):
    _, build = emulation("host")
    lib = c_api(build)
    for name, (folder, reason, part) in tampered_copies(digits_assets, tmp_path).items():
        status, handle, error = open_assets(lib, folder)
        assert not handle.value
        # without a runtime the version case is caught by the header against the index
        expected_part = "header says opt v2.12, the index says v2.13-rc" if name == "version" else part
        assert error.startswith(f"refused ({reason}): ") and expected_part in error, (name, error)
        assert status == (4 if name == "version" else 8), (name, status)
        assert "\n" not in error and "; " in error          # one line: what; fix


# ------------------------------------------------------------------ ARM: the C API on the real runtime

@pytest.mark.parametrize("abi", ARM)
def test_loader_on_arm_checks_the_linked_runtime(emulation, run_native, digits_assets, tmp_path, abi):
    runtime, build = emulation(abi)
    code, (described,), _ = capi(run_native, abi, runtime, build, "describe", digits_assets)
    assert code == 0 and described["runtime_version"] == "v2.13-rc"
    assert all(m["loaded"] for m in described["models"])
    for name, (folder, reason, part) in tampered_copies(digits_assets, tmp_path).items():
        code, lines, stderr = capi(run_native, abi, runtime, build, "describe", folder)
        status = "version" if name == "version" else "assets"
        assert code == (4 if name == "version" else 8) and not lines, (name, code, stderr)
        assert f"error: {status}: refused ({reason}): " in stderr and part in stderr, (name, stderr)
    code, _, stderr = capi(run_native, abi, runtime, build, "describe", digits_assets, '{"models": ["nope"]}')
    assert code == 2 and "no model named \"nope\"" in stderr
    code, (only,), _ = capi(run_native, abi, runtime, build, "describe", digits_assets, '{"models": ["digits"]}')
    assert code == 0 and {m["name"]: m["loaded"] for m in only["models"]} == {"digits": True, "digits-fp32": False}


@pytest.mark.parametrize("abi", ARM)
def test_golden_selftest_through_the_c_api(emulation, run_native, digits_assets, abi):
    """What the apps' instrumented tests call: golden vectors and golden images (decoded, preprocessed, run,
    post-processed) on model.nb under qemu, for the FP32 and INT8 digits models."""
    runtime, build = emulation(abi)
    code, (report,), stderr = capi(run_native, abi, runtime, build, "selftest", digits_assets)
    assert code == 0 and report["ok"] is True and report["runtime"] == "v2.13-rc", stderr
    by_name = {m["name"]: m for m in report["models"]}
    assert set(by_name) == {"digits", "digits-fp32"}
    for name, model in by_name.items():
        vectors = model["vectors"]
        assert vectors["samples"] == 8 and vectors["ok"]
        (out,) = vectors["outputs"]
        cases = model["images"]["cases"]
        assert len(cases) == 8 and model["images"]["decoder"] == "stb_image"
        print(f"{abi} selftest {name}: vectors max_abs {out['max_abs']:.1e} cosine {out['cosine']:.8f}; images: "
              f"{sum(c['tensor']['differing'] == 0 for c in cases)}/8 tensors exact, "
              f"{sum(c['results']['same_decision'] for c in cases)}/8 same decisions, output max_abs "
              f"{max(c['outputs'][0]['max_abs'] for c in cases):.1e}")
        # the core's tensors equal Python's bit for bit on every golden image
        assert all(c["tensor"]["differing"] == 0 and c["tensor"]["gated"] for c in cases)
        if name == "digits-fp32":
            assert vectors["max_abs"] is not None and out["max_abs"] <= 2e-5 and out["cosine"] > 0.999999
            assert all(c["results"]["gated"] and c["results"]["same_decision"] and c["results"]["same_scores"]
                       for c in cases)
        else:   # INT8: cosine-gated; results against the FP32 reference are reported, not gated
            assert vectors["max_abs"] is None and out["cosine"] >= vectors["min_cosine"]
            assert not any(c["results"]["gated"] for c in cases)
            assert sum(c["results"]["same_decision"] for c in cases) >= 7


@pytest.mark.e2e
def test_ocr_selftest_through_the_c_api(emulation, run_native, ocr_assets):
    """The detector's golden page (400x800, boxes in 320x640 map pixels) and the direction classifier's golden
    lines through the C API on aarch64: tensors exact, outputs within the FP32 tolerances, results equal Python's."""
    runtime, build = emulation("aarch64")
    for model in ("ppocrv4-det", "ppocr-cls"):
        code, (report,), stderr = capi(run_native, "aarch64", runtime, build, "selftest", ocr_assets["assets"], model)
        assert code == 0 and report["ok"], stderr
        (checked,) = report["models"]
        cases = checked["images"]["cases"]
        assert len(cases) == (1 if model == "ppocrv4-det" else 8)
        for case in cases:
            assert case["tensor"]["differing"] == 0
            assert case["results"]["same_decision"] and case["results"]["same_scores"], case["results"]
        if model == "ppocrv4-det":
            assert len(cases[0]["results"]["got"]) == 3      # three text lines found on the page
