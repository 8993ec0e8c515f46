"""camera_demo (the app core under qemu, aarch64, the real ARM runtime) on the detector and segmenter examples:
its detections and masks must be what `edgekit run` prints for the same images, and its --selftest must pass on
the golden images the bundles carry (golden/golden.json's results): in order for FP32, matched by IoU within the
floors golden.json states for INT8 (and a tampered golden file fails).

Both examples are built FP32 (16 evaluation scenes, no emulation: the build is ~12 s each), so `edgekit run` runs
the x86 twin and camera_demo the ARM kernels: classes identical, box corners within 1 px, scores within 1e-4,
mask pixels equal. The image folders hold the golden images and letterboxed 128x96 scenes (boxes and masks
mapped back to another size than the tensor's).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from edgekit.lite import cmake, native
from edgekit.consumers.predict import BundleModel, read_image
from edgekit.tasks.detection import match_detections
from edgekit.tasks.segmentation import decode_rle, encode_rle

pytestmark = pytest.mark.e2e
EXAMPLES = cmake.NATIVE_DIR.parent / "edgekit" / "examples"
BOX_PIXELS = 1.0
SCORE_TOLERANCE = 1e-4       # FP32 ARM kernels vs the x86 twin (measured: 1e-6, the results' rounding)
WIDE_SCENES = 2              # 128x96 evaluation scenes added to the golden images


def _build(edgekit_cli, root, example: str, quant: str = "fp32", emulate: bool = False, toml: str = "edgekit.toml"):
    folder = EXAMPLES / example
    text = (folder / toml).read_text(encoding="utf-8")
    for key in ("weights = \"", "calibration = \"", "evaluation = \"", "labels = \""):
        text = text.replace(key, key + str(folder) + "/")
    text = text.replace("[parity]\n", "[parity]\nmax_samples = 16\n")
    config = root / f"{example}.toml"
    config.write_text(text, encoding="utf-8")
    out = root / f"{example}-{quant}"
    edgekit_cli(["build", "-c", config, "--target", "arm64", "--quant", quant, "--out", out, "--quiet"]
                + ([] if emulate else ["--no-emulation"]), env=dict(os.environ, EDGEKIT_CACHE_DIR=str(root / "cache")))
    bundle = next((out).glob(f"*/arm64-{quant}"))
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


@pytest.fixture(scope="module")
def int8_detector(camera_demo, tmp_path_factory, edgekit_cli):
    """The detector built to arm64 INT8 with tier C (the ARM runtime under qemu), which sets the self-test's floors."""
    camera_demo("aarch64")                                          # skips (or fails) without EDGEKIT_LITE_ARM
    return _build(edgekit_cli, tmp_path_factory.mktemp("vision-int8"), "detector", "int8", emulate=True)


def run_demo(camera_demo, *args, ok: bool = True):
    runtime, folder = camera_demo("aarch64")
    argv = native.emulator_argv("aarch64", runtime) + [str(folder / "camera_demo"), *map(str, args)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if ok:
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


def test_int8_detections_equal_edgekit_run_on_the_arm_engine(camera_demo, edgekit_cli, int8_detector, tmp_path):
    """INT8: `edgekit run --engine arm` runs the same model.nb under qemu (the twin is FP32), so the detections of
    camera_demo and the CLI must be identical, on a golden image and a letterboxed scene."""
    bundle, all_images = int8_detector
    images = tmp_path / "images"
    images.mkdir()
    for f in (sorted(all_images.glob("*.png"))[0], sorted(all_images.glob("*.png"))[-1]):
        shutil.copyfile(f, images / f.name)                         # 0000.png and the last wide scene
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


def _reseal(bundle, rel: str) -> None:
    """After editing `rel`: its sha256 and size in the manifest's file table (what the loader verifies), so only
    the self-test itself can object."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    data = (bundle / rel).read_bytes()
    manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2))


def test_int8_selftest_gates_matched_detections(camera_demo, int8_detector, tmp_path):
    """INT8: the golden detections (the FP32 reference's) are matched per class by IoU, and recall and precision of
    the confident ones must reach the floors golden.json states (measured in tier C at build time); a golden file
    whose boxes moved fails. The C++ matching gives Python's figures (edgekit.tasks.detection.match_detections)."""
    bundle, _ = int8_detector
    golden = json.loads((bundle / "golden" / "golden.json").read_text())
    floors = golden["tolerances"]["detections"]
    assert floors["measured"]["tier"] == "C" and floors["min_iou"] == 0.5 and floors["score_threshold"] == 0.5
    assert 0.5 <= floors["min_recall"] <= 1.0 and 0.5 <= floors["min_precision"] <= 1.0
    done, _ = run_demo(camera_demo, "--assets", bundle, "--selftest")
    report = json.loads(done.stdout)
    (model,) = report["models"]
    assert report["ok"] and model["precision"] == "int8" and model["vectors"]["ok"] and model["images"]["count"] == 8
    worst_recall = worst_precision = 1.0
    ious, found = [], 0
    for case in model["images"]["cases"]:
        results = case["results"]
        m = results["matching"]
        assert case["ok"] and results["gated"] and m["ok"], m
        want = match_detections(results["expected"], results["got"], floors["score_threshold"], floors["min_iou"])
        assert {k: m[k] for k in want if want[k] is not None} == pytest.approx(
            {k: v for k, v in want.items() if v is not None}, rel=0, abs=1e-12)
        assert (m["min_iou"] is None) == (want["min_iou"] is None)
        assert m["recall"] >= floors["min_recall"] and m["precision"] >= floors["min_precision"]
        worst_recall, worst_precision = min(worst_recall, m["recall"]), min(worst_precision, m["precision"])
        found += m["found"]
        ious += [m["min_iou"]] if m["min_iou"] is not None else []
    print(f"aarch64 detector int8 selftest: 8/8 golden images pass; {found} confident FP32 detections found again, "
          f"worst recall {worst_recall:.3f}, worst precision {worst_precision:.3f} (floors {floors['min_recall']}, "
          f"{floors['min_precision']}; tier C measured {floors['measured']['min_recall']:.3f}, "
          f"{floors['measured']['min_precision']:.3f}), min IoU {min(ious):.4f}")
    assert found > 0

    tampered = tmp_path / "tampered"
    shutil.copytree(bundle, tampered)
    edited = json.loads((tampered / "golden" / "golden.json").read_text())
    first = edited["images"]["results"][0]
    assert any(d["score"] >= 0.5 for d in first)
    for d in first:                                                  # every golden box of image 0 moved by 40 px
        d["box"] = [v + 40.0 for v in d["box"]]
    (tampered / "golden" / "golden.json").write_text(json.dumps(edited))
    _reseal(tampered, "golden/golden.json")
    done, _ = run_demo(camera_demo, "--assets", tampered, "--selftest", ok=False)
    assert done.returncode != 0 and "selftest" in done.stderr.lower(), done.stderr[-2000:]
    report = json.loads(done.stdout)
    cases = report["models"][0]["images"]["cases"]
    assert not report["ok"] and not cases[0]["ok"] and cases[0]["results"]["matching"]["recall"] == 0.0
    assert all(c["ok"] for c in cases[1:])


def test_int8_selftest_gates_the_masks_pixel_agreement(camera_demo, tmp_path_factory, edgekit_cli):
    """INT8 segmenter: each golden image's mask must equal the FP32 reference's on at least golden.json's
    `tolerances.masks.min_agreement` of its pixels (tier C's worst image less 1 point); a golden mask with a block
    of image 0 relabelled fails that image only."""
    camera_demo("aarch64")
    bundle, _ = _build(edgekit_cli, tmp_path_factory.mktemp("seg-int8"), "segmenter", "int8", emulate=True)
    floor = json.loads((bundle / "golden" / "golden.json").read_text())["tolerances"]["masks"]["min_agreement"]
    done, _ = run_demo(camera_demo, "--assets", bundle, "--selftest")
    report = json.loads(done.stdout)
    (model,) = report["models"]
    assert report["ok"] and model["precision"] == "int8" and model["images"]["count"] == 8
    agreements = []
    for case in model["images"]["cases"]:
        mask = case["results"]["mask"]
        assert case["ok"] and case["results"]["gated"] and mask["ok"] and mask["min_agreement"] == floor, mask
        assert mask["agreement"] == pytest.approx(100.0 * (1 - mask["differing"] / mask["pixels"]), abs=1e-9)
        agreements.append(mask["agreement"])
    print(f"aarch64 segmenter int8 selftest: 8/8 golden images pass, worst agreement {min(agreements):.2f} % "
          f"(floor {floor} %)")

    tampered = tmp_path_factory.mktemp("seg-int8-tampered") / "bundle"
    shutil.copytree(bundle, tampered)
    edited = json.loads((tampered / "golden" / "golden.json").read_text())
    first = decode_rle(edited["images"]["results"][0])
    first[: first.shape[0] // 3] = (first[: first.shape[0] // 3] + 1) % 2      # a third of image 0 relabelled
    edited["images"]["results"][0].update(encode_rle(first))
    (tampered / "golden" / "golden.json").write_text(json.dumps(edited))
    _reseal(tampered, "golden/golden.json")
    done, _ = run_demo(camera_demo, "--assets", tampered, "--selftest", ok=False)
    assert done.returncode != 0, done.stderr[-2000:]
    cases = json.loads(done.stdout)["models"][0]["images"]["cases"]
    assert not cases[0]["ok"] and cases[0]["results"]["mask"]["agreement"] < floor
    assert all(c["ok"] for c in cases[1:])


@pytest.mark.parametrize("quant", ["int8", "fp32"])
def test_selftest_of_a_bundle_that_kept_its_nms_op(camera_demo, tmp_path_factory, edgekit_cli, quant):
    """multiclass_nms3 kept in the graph (lite/nms.py): the golden vectors are every image's rows plus a count per
    image. FP32 must find the same rows (compared image by image); INT8 finds other rows, so the matched golden
    detections decide. All 8 golden images pass."""
    camera_demo("aarch64")                                          # skips (or fails) without EDGEKIT_LITE_ARM
    bundle, _ = _build(edgekit_cli, tmp_path_factory.mktemp(f"vision-nms-{quant}"), "detector", quant, emulate=True,
                       toml="with_nms.toml")
    assert json.loads((bundle / "manifest.json").read_text())["model"]["nms"]["kept"] is True
    done, _ = run_demo(camera_demo, "--assets", bundle, "--selftest")
    report = json.loads(done.stdout)
    (model,) = report["models"]
    vectors = model["vectors"]
    assert report["ok"] and vectors["nms_rows"] and vectors["ok"], vectors
    assert all(("skipped" in o) == (quant == "int8") for o in vectors["outputs"])
    assert model["images"]["count"] == 8
    assert all(case["ok"] and case["results"]["gated"] for case in model["images"]["cases"])
