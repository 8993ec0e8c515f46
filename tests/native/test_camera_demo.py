"""camera_demo (camera_demo/) built with native/ as a subdirectory, cross-compiled and run under qemu with the
real ARM runtime: its JSON lines must give what `edgekit run` / `edgekit ocr` give on the same frames.

The Python side is edgekit/consumers/predict.py in this process (what the CLI commands call), checked against the CLI
itself on a few images. Engines differ (the host's x86 twin vs ARM kernels), so FP32 scores are compared
with a tolerance; classes, labels, texts, angles and boxes must be identical.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from edgekit.lite import cmake, native
from edgekit.consumers.predict import BundleModel, read_image

pytestmark = pytest.mark.e2e
DIGITS = cmake.NATIVE_DIR.parent / "edgekit" / "examples" / "digits" / "data" / "test"
SCORE_TOLERANCE = 2e-5      # FP32 ARM kernels vs the x86 twin (measured: 2e-6 on digits, 4e-6 on OCR)


def run_demo(camera_demo, abi, *args, timeout=900):
    runtime, folder = camera_demo(abi)
    argv = native.emulator_argv(abi, runtime) + [str(folder / "camera_demo"), *map(str, args)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done, lines


def mean_ms(lines, key):
    return float(np.mean([line["timings_ms"][key] for line in lines]))


def timing_note(abi, what, lines):
    print(f"{abi} {what}: {len(lines)} frames, mean ms/frame preprocess {mean_ms(lines, 'preprocess'):.2f} "
          f"inference {mean_ms(lines, 'inference'):.2f} postprocess {mean_ms(lines, 'postprocess'):.2f} "
          f"frame {np.mean([line['frame_ms'] for line in lines]):.2f}")


def compare_classes(lines, predictions):
    """(same class and label, worst score difference) of camera_demo's results against Python's."""
    same = sum(line["result"]["class"] == want["class"] and line["result"]["label"] == want["label"]
               for line, want in zip(lines, predictions))
    worst = max(abs(line["result"]["score"] - want["score"]) for line, want in zip(lines, predictions))
    return same, worst


# ------------------------------------------------------------------ the host build: what it refuses

def test_host_build_refuses_sources_it_cannot_read(camera_demo, digits_fp32, tmp_path):
    done, _ = run_demo(camera_demo, "host", "--version")
    assert done.returncode == 0 and json.loads(done.stdout)["runtime"] is None
    done, _ = run_demo(camera_demo, "host", "--assets", digits_fp32, "--camera", "/dev/video-none")
    assert done.returncode == 2 and "cannot open /dev/video-none: No such file or directory" in done.stderr
    done, _ = run_demo(camera_demo, "host", "--assets", digits_fp32, "--video", DIGITS / "3" / "test0171.png")
    assert done.returncode == 2 and "is not an AVI file; --video reads MJPEG .avi only" in done.stderr
    # an AVI whose video stream is H.264: refused by name, with the conversion to run
    avi = tmp_path / "h264.avi"
    strf = b"strf" + (40).to_bytes(4, "little") + bytes(16) + b"H264" + bytes(20)
    hdrl = b"LIST" + (4 + len(strf)).to_bytes(4, "little") + b"hdrl" + strf
    avi.write_bytes(b"RIFF" + (4 + len(hdrl)).to_bytes(4, "little") + b"AVI " + hdrl)
    done, _ = run_demo(camera_demo, "host", "--assets", digits_fp32, "--video", avi)
    assert done.returncode == 2 and "video stream is not MJPEG (H264)" in done.stderr
    done, _ = run_demo(camera_demo, "host", "--assets", digits_fp32, "--images", DIGITS)
    assert done.returncode == 9 and "no Paddle-Lite runtime" in done.stderr
    done, _ = run_demo(camera_demo, "host", "--assets", digits_fp32)
    assert done.returncode == 2 and "give exactly one of --images" in done.stderr


# ------------------------------------------------------------------ digits: classes equal edgekit run

@pytest.mark.parametrize("abi", ["aarch64", "armhf"])
def test_digits_fp32_classes_equal_edgekit_run(camera_demo, edgekit_cli, digits_assets, digits_fp32, abi):
    done, lines = run_demo(camera_demo, abi, "--assets", digits_assets, "--model", "digits-fp32", "--images", DIGITS)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(lines) == 360 and [line["frame"] for line in lines] == list(range(360))
    model = BundleModel.load(digits_fp32)
    predictions = [model.predict(read_image(line["source"])) for line in lines]
    same, worst = compare_classes(lines, predictions)
    print(f"{abi} digits fp32: {same}/360 classes equal edgekit run, worst score difference {worst:.1e}")
    assert same == 360 and worst <= SCORE_TOLERANCE
    assert all(line["timings_ms"]["inference"] > 0 and line["width"] == line["height"] == 8 for line in lines)
    timing_note(abi, "digits fp32", lines)
    # the in-process twin is what the CLI prints
    for line in lines[:: 180]:
        printed = json.loads(edgekit_cli(["run", digits_fp32, line["source"]]))
        assert printed == model.predict(read_image(line["source"]))


def test_digits_int8_equals_the_emulated_arm_path(camera_demo, emulation, digits_assets, digits_int8):
    """INT8: the x86 twin is FP32, so camera_demo is held against Python's preprocessing + the same model.nb under
    qemu (the tier-C runner) + Python's post-processing: identical classes and scores. Agreement with
    `edgekit run` (the FP32 twin) is reported."""
    done, lines = run_demo(camera_demo, "aarch64", "--assets", digits_assets, "--model", "digits", "--images", DIGITS)
    assert done.returncode == 0 and len(lines) == 360, done.stderr[-2000:]
    model = BundleModel.load(digits_int8)
    tensors = np.stack([model.tensor(read_image(line["source"])) for line in lines])
    runtime, build = emulation("aarch64")
    result = native.run_runner(build, runtime, digits_int8 / "model.nb", {model.feed: tensors}, batch=1)
    emulated = model.task.postprocess(result.outputs)
    assert [line["result"] for line in lines] == emulated            # same classes, labels and scores
    twin_same, twin_worst = compare_classes(lines, [model.predict(read_image(line["source"])) for line in lines])
    print(f"aarch64 digits int8: 360/360 equal the emulated ARM path; {twin_same}/360 classes equal edgekit run "
          f"(FP32 x86 twin), worst score difference {twin_worst:.3f}")
    assert twin_same >= 340
    timing_note("aarch64", "digits int8", lines)


def _yuyv_of(bgr):
    """Packs BGR frames as YUYV 4:2:2 (BT.601 limited range), as a webcam delivers them."""
    b, g, r = (bgr[..., i].astype(np.float64) for i in range(3))
    y = 16 + 0.257 * r + 0.504 * g + 0.098 * b
    u = 128 - 0.148 * r - 0.291 * g + 0.439 * b
    v = 128 + 0.439 * r - 0.368 * g - 0.071 * b
    out = np.empty(bgr.shape[:2] + (2,), np.uint8)
    out[..., 0] = np.clip(np.round(y), 0, 255)
    out[:, 0::2, 1] = np.clip(np.round((u[:, 0::2] + u[:, 1::2]) / 2), 0, 255)
    out[:, 1::2, 1] = np.clip(np.round((v[:, 0::2] + v[:, 1::2]) / 2), 0, 255)
    return out


def _digit_frames(count, size):
    import cv2

    files = sorted(DIGITS.rglob("*.png"))[:: 360 // count][:count]
    tint = np.array([0.8, 1.0, 1.2])
    return [np.clip(cv2.resize(cv2.cvtColor(cv2.imread(str(f), cv2.IMREAD_UNCHANGED), cv2.COLOR_GRAY2BGR),
                               (size, size), interpolation=cv2.INTER_LINEAR) * tint, 0, 255).astype(np.uint8)
            for f in files]


def test_yuyv_recording_equals_opencvs_conversion(camera_demo, digits_assets, digits_fp32, tmp_path):
    """A raw YUYV stream (the camera path without a camera): the frames camera_demo converts are OpenCV's
    COLOR_YUV2BGR_YUYV bit for bit (checked on the PPM files --save writes), and their classes equal edgekit run."""
    import cv2

    raws = [_yuyv_of(frame) for frame in _digit_frames(12, 32)]
    (tmp_path / "frames.yuyv").write_bytes(b"".join(r.tobytes() for r in raws))
    done, lines = run_demo(camera_demo, "aarch64", "--assets", digits_assets, "--model", "digits-fp32",
                           "--yuyv", tmp_path / "frames.yuyv", "--size", "32x32", "--save", tmp_path / "saved")
    assert done.returncode == 0 and len(lines) == 12, done.stderr[-2000:]
    model = BundleModel.load(digits_fp32)
    for i, (raw, line) in enumerate(zip(raws, lines)):
        bgr = cv2.cvtColor(raw, cv2.COLOR_YUV2BGR_YUYV)
        saved = (tmp_path / "saved" / f"frame_{i:06d}.ppm").read_bytes()
        header = b"P6\n32 32\n255\n"
        assert saved.startswith(header)
        assert np.array_equal(np.frombuffer(saved[len(header):], np.uint8).reshape(32, 32, 3)[:, :, ::-1], bgr)
        want = model.predict(bgr)
        assert line["result"]["class"] == want["class"] and abs(line["result"]["score"] - want["score"]) <= SCORE_TOLERANCE


def test_mjpeg_video_file(camera_demo, digits_assets, digits_fp32, tmp_path):
    """An MJPEG .avi written by OpenCV: every frame decoded (stb_image) at its size; classes against edgekit run on
    OpenCV's decoding of the same file (JPEG decoders differ by a few levels, so this is reported, bounded)."""
    import cv2

    frames = _digit_frames(10, 64)
    writer = cv2.VideoWriter(str(tmp_path / "clip.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 5, (64, 64))
    for frame in frames:
        writer.write(frame)
    writer.release()
    done, lines = run_demo(camera_demo, "aarch64", "--assets", digits_assets, "--model", "digits-fp32",
                           "--video", tmp_path / "clip.avi")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(lines) == 10 and all((line["width"], line["height"]) == (64, 64) for line in lines)
    assert lines[3]["source"].endswith("clip.avi#3")
    capture = cv2.VideoCapture(str(tmp_path / "clip.avi"))
    model = BundleModel.load(digits_fp32)
    decoded = [capture.read()[1] for _ in lines]
    same, worst = compare_classes(lines, [model.predict(frame) for frame in decoded])
    print(f"aarch64 MJPEG: {same}/10 classes equal edgekit run on OpenCV's decoding, worst score difference {worst:.4f}")
    assert same >= 9


# ------------------------------------------------------------------ OCR: text equals edgekit ocr

def test_ocr_page_equals_edgekit_ocr(camera_demo, edgekit_cli, ocr_assets, tmp_path):
    bundles, page = ocr_assets["bundles"], ocr_assets["pages"] / "page0.png"
    done, lines = run_demo(camera_demo, "aarch64", "--assets", ocr_assets["assets"], "--images", ocr_assets["pages"],
                           "--save", tmp_path / "saved", timeout=1200)
    assert done.returncode == 0 and len(lines) == 1, done.stderr[-2000:]
    (frame,) = lines
    assert frame["models"] == {"det": "ppocrv4-det", "rec": "ppocrv4-rec", "cls": "ppocr-cls"}
    printed = json.loads(edgekit_cli(["ocr", page, "--det", bundles["det"], "--rec", bundles["rec"],
                                      "--cls", bundles["cls"]]).strip().splitlines()[-1])
    got = frame["lines"]
    assert len(got) == len(printed) == 3
    for mine, theirs in zip(got, printed):
        assert list(mine) == list(theirs) == ["box", "quad", "det_score", "angle", "angle_score", "text", "confidence"]
        assert (mine["box"], mine["angle"], mine["text"]) == (theirs["box"], theirs["angle"], theirs["text"])
        assert np.abs(np.array(mine["quad"], float) - np.array(theirs["quad"], float)).max() <= 1.0
    worst = max(abs(mine[k] - theirs[k]) for mine, theirs in zip(got, printed)
                for k in ("det_score", "angle_score", "confidence"))
    print(f"aarch64 OCR: {len(got)} lines, texts {[line['text'] for line in got]}, angles "
          f"{[line['angle'] for line in got]}; boxes and texts identical to edgekit ocr, worst score difference "
          f"{worst:.1e}; ms: {json.dumps(frame['timings_ms'])}")
    assert worst <= SCORE_TOLERANCE
    assert sum(line["angle"] == "180" and line["angle_score"] > 0.9 for line in got) == 1   # the turned line
    assert max(line["box"][2] for line in got) > 640             # boxes in the 800-pixel page's coordinates
    saved = (tmp_path / "saved" / "frame_000000.ppm").read_bytes()
    pixels = np.frombuffer(saved[len(b"P6\n800 400\n255\n"):], np.uint8).reshape(400, 800, 3)
    red = np.all(pixels == [255, 0, 0], axis=2).sum()
    perimeter = sum(2 * ((b[2] - b[0]) + (b[3] - b[1])) for b in (line["box"] for line in got))
    assert red >= perimeter                                       # the boxes are drawn (2 px wide)
