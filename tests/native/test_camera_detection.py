"""camera_demo (the app core under qemu, aarch64, the real ARM runtime) on the detector and segmenter examples:
its detections and masks must be what `edgekit run` prints for the same images, and its --selftest must pass on
the golden images the bundles carry (golden/golden.json's results).

Both examples are built FP32 (16 evaluation scenes, no emulation: the build is ~12 s each), so `edgekit run` runs
the x86 twin and camera_demo the ARM kernels: classes identical, box corners within 1 px, scores within 1e-4,
mask pixels equal. The image folders hold the golden images and letterboxed 128x96 scenes (boxes and masks
mapped back to another size than the tensor's).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from edgekit.lite import native
from edgekit.predict import BundleModel, read_image

pytestmark = pytest.mark.e2e
EXAMPLES = native.NATIVE_DIR.parent / "edgekit" / "examples"
BOX_PIXELS = 1.0
SCORE_TOLERANCE = 1e-4       # FP32 ARM kernels vs the x86 twin (measured: 1e-6, the results' rounding)
WIDE_SCENES = 2              # 128x96 evaluation scenes added to the golden images


def _build(edgekit_cli, root, example: str, quant: str = "fp32"):
    folder = EXAMPLES / example
    text = (folder / "edgekit.toml").read_text(encoding="utf-8")
    for key in ("weights = \"", "calibration = \"", "evaluation = \"", "labels = \""):
        text = text.replace(key, key + str(folder) + "/")
    text = text.replace("[parity]\n", "[parity]\nmax_samples = 16\n")
    config = root / f"{example}.toml"
    config.write_text(text, encoding="utf-8")
    out = root / f"{example}-{quant}"
    edgekit_cli(["build", "-c", config, "--target", "arm64", "--quant", quant, "--out", out, "--no-emulation",
                 "--quiet"], env=dict(os.environ, EDGEKIT_CACHE_DIR=str(root / "cache")))
    bundle = out / example / f"arm64-{quant}"
    images = root / f"{example}-{quant}-images"
    images.mkdir()
    for f in sorted((bundle / "golden" / "images").glob("*.png")):
        shutil.copyfile(f, images / f.name)
    wide = [f for f in sorted((EXAMPLES / "detector" / "data" / "eval").glob("*.png"))
            if read_image(f).shape[:2] == (96, 128)][:WIDE_SCENES]
    for f in wide:
        shutil.copyfile(f, images / f"wide_{f.name}")
    return bundle, images


@pytest.fixture(scope="module")
def vision_bundles(tmp_path_factory, edgekit_cli):
    root = tmp_path_factory.mktemp("vision")
    return {name: _build(edgekit_cli, root, name) for name in ("detector", "segmenter")}


def run_demo(camera_demo, *args):
    runtime, folder = camera_demo("aarch64")
    argv = native.emulator_argv("aarch64", runtime) + [str(folder / "camera_demo"), *map(str, args)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done, [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def read_ppm(path):
    data = path.read_bytes()
    magic, size, _, pixels = data.split(b"\n", 3)
    width, height = (int(v) for v in size.split())
    assert magic == b"P6"
    return np.frombuffer(pixels, np.uint8).reshape(height, width, 3)


def test_detections_equal_edgekit_run(camera_demo, edgekit_cli, vision_bundles, tmp_path):
    bundle, images = vision_bundles["detector"]
    _, lines = run_demo(camera_demo, "--assets", bundle, "--images", images, "--save", tmp_path / "shots")
    files = sorted(images.glob("*.png"))
    assert [line["source"] for line in lines] == [str(f) for f in files]
    model = BundleModel.load(bundle)
    worst_corner = worst_score = 0.0
    count = 0
    for line in lines:
        want, got = model.predict(read_image(line["source"])), line["result"]
        assert line["task"] == "detection" and len(got) == len(want), line["source"]
        assert [d["class"] for d in got] == [d["class"] for d in want]
        assert [d["label"] for d in got] == [d["label"] for d in want]
        worst_corner = max([worst_corner] + [abs(a - b) for g, w in zip(got, want) for a, b in zip(g["box"], w["box"])])
        worst_score = max([worst_score] + [abs(g["score"] - w["score"]) for g, w in zip(got, want)])
        count += len(got)
    print(f"aarch64 detector fp32: {len(lines)} images, {count} detections, classes identical, worst corner "
          f"{worst_corner:.3f} px, worst score difference {worst_score:.1e}; mean inference "
          f"{np.mean([line['timings_ms']['inference'] for line in lines]):.0f} ms, postprocess "
          f"{np.mean([line['timings_ms']['postprocess'] for line in lines]):.1f} ms")
    assert worst_corner <= BOX_PIXELS and worst_score <= SCORE_TOLERANCE
    wide = [line for line in lines if "wide_" in line["source"]]
    assert len(wide) == WIDE_SCENES and all(line["width"] == 128 and line["height"] == 96 for line in wide)
    assert max(d["box"][2] for d in wide[0]["result"]) > 96          # boxes in the image's pixels, not the tensor's
    # the CLI prints what the in-process twin gives
    printed = json.loads(edgekit_cli(["run", bundle, wide[0]["source"]]).strip().splitlines()[-1])
    assert printed == model.predict(read_image(wide[0]["source"]))
    # --save: each confident box outlined in its class colour (the frame's own pixels elsewhere)
    shot = read_ppm(tmp_path / "shots" / f"frame_{lines.index(wide[0]):06d}.ppm")
    frame = read_image(wide[0]["source"])[..., ::-1]
    best = max(wide[0]["result"], key=lambda d: d["score"])
    assert best["score"] >= 0.5
    x1, y1 = int(np.ceil(best["box"][2])) - 1, int(np.ceil(best["box"][3])) - 1
    assert (shot[y1, int(best["box"][0]) + 1] != frame[y1, int(best["box"][0]) + 1]).any()
    assert (shot != frame).any(axis=2).mean() < 0.5


def test_masks_equal_edgekit_run(camera_demo, vision_bundles, tmp_path):
    bundle, images = vision_bundles["segmenter"]
    _, lines = run_demo(camera_demo, "--assets", bundle, "--images", images, "--save", tmp_path / "shots")
    model = BundleModel.load(bundle)
    for line in lines:
        want, got = model.predict(read_image(line["source"])), line["result"]
        assert line["task"] == "segmentation" and got["size"] == [line["height"], line["width"]]
        assert got == want, line["source"]                        # every mask pixel, and the class shares
    print(f"aarch64 segmenter fp32: {len(lines)} images, masks identical to edgekit run "
          f"({sum(line['width'] * line['height'] for line in lines)} pixels); mean inference "
          f"{np.mean([line['timings_ms']['inference'] for line in lines]):.0f} ms")
    wide = next(i for i, line in enumerate(lines) if "wide_" in line["source"])
    shot = read_ppm(tmp_path / "shots" / f"frame_{wide:06d}.ppm")
    assert shot.shape == (96, 128, 3) and (shot != read_image(lines[wide]["source"])[..., ::-1]).any()


def test_int8_detections_equal_edgekit_run_on_the_arm_engine(camera_demo, edgekit_cli, tmp_path_factory):
    """INT8: `edgekit run --engine arm` runs the same model.nb under qemu (the twin is FP32), so the detections of
    camera_demo and the CLI must be identical, on a golden image and a letterboxed scene."""
    camera_demo("aarch64")                                          # skips (or fails) without EDGEKIT_LITE_ARM
    bundle, images = _build(edgekit_cli, tmp_path_factory.mktemp("vision-int8"), "detector", "int8")
    for f in sorted(images.glob("*.png"))[1:-1]:
        f.unlink()                                                  # 0000.png and the last wide scene
    _, lines = run_demo(camera_demo, "--assets", bundle, "--images", images)
    assert len(lines) == 2
    count = 0
    for line in lines:
        printed = json.loads(edgekit_cli(["run", bundle, line["source"], "--engine", "arm", "--json"]))
        assert printed["engine"]["kind"] == "arm" and printed["engine"]["precision"] == "int8"
        want, got = printed["boxes"], line["result"]
        assert [(d["class"], d["label"]) for d in got] == [(d["class"], d["label"]) for d in want]
        assert all(abs(a - b) <= 0.01 for g, w in zip(got, want) for a, b in zip(g["box"], w["box"]))
        assert all(abs(g["score"] - w["score"]) <= 1.5e-6 for g, w in zip(got, want))   # one step of the 1e-6 rounding
        count += len(got)
    print(f"aarch64 detector int8: {count} detections on {len(lines)} images identical to edgekit run --engine arm")


@pytest.mark.parametrize("example", ["detector", "segmenter"])
def test_selftest_checks_golden_detections_and_masks(camera_demo, vision_bundles, example):
    bundle, _ = vision_bundles[example]
    done, _ = run_demo(camera_demo, "--assets", bundle, "--selftest")
    report = json.loads(done.stdout)
    (model,) = report["models"]
    assert report["ok"] and model["vectors"]["ok"] and model["images"]["count"] == 8
    for case in model["images"]["cases"]:
        results = case["results"]
        assert case["ok"] and results["gated"] and results["same_decision"] and results["same_scores"]
        if example == "detector":
            d = results["detections"]
            assert d["same_classes"] and d["count"] == d["expected_count"] > 0 and d["max_corner_px"] <= BOX_PIXELS
        else:
            assert results["mask"]["differing"] == 0 and results["mask"]["pixels"] == 64 * 64
