"""Variable-width lines (issue 23): the PP-OCRv4 rec example built with `rec_dynamic.toml` on the source ONNX
(the import makes its reshapes width-free) reads a long DejaVu line that the fixed 48x320 input squeezes out of
shape, through the bundle's own preprocess.json on the x86 twin. Full figures: bench/bench_long_lines.py (30 long
lines: fixed 0 %, variable 96.7 % exact match)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.examples.ppocr import lines, make_data, models
from edgekit.consumers.predict import BundleModel

pytestmark = pytest.mark.e2e

EXAMPLE = Path(make_data.__file__).parent
LONG = "invoice total amount due confirmed by the manager"        # 49 characters
IMAGE_LINES = ("noon river", "parcel 42 left at the gate", LONG)


@pytest.fixture(scope="module")
def dynamic_bundle(cli, tmp_path_factory):
    why = lines.fonts_missing()
    if why:                          # native/install-deps.sh (which ./run tests calls as root) installs them
        pytest.fail(why)
    root = tmp_path_factory.mktemp("long-lines")
    make_data.make_data(root / "data", seed=0, counts=make_data.Counts(det_calib=1, det_eval=1, rec_calib=1, rec_eval=2,
                                                                        cls_calib=1, cls_eval=1))
    images = root / "images"                # golden images of three tensor widths: one file each in the bundle
    images.mkdir()
    for i, text in enumerate(IMAGE_LINES):
        cv2.imwrite(str(images / f"{i}.png"), lines.render(np.random.default_rng(20 + i), text))
    cli("build", "-c", EXAMPLE / "rec_dynamic.toml", "-m", models.model_path("rec"), "--eval", root / "data" / "rec_eval.npz",
        "--images", images, "--quant", "fp32", "--target", "arm64", "--no-emulation", "--out", root / "out", "--quiet")
    return root / "out" / "ppocrv4-rec-dynamic" / "arm64-fp32"


def test_a_long_line_is_read_at_its_own_width_and_misread_at_320(dynamic_bundle):
    recorded = json.loads((dynamic_bundle / "preprocess.json").read_text())["preprocess"]
    assert (recorded["width_mode"], recorded["max_width"], recorded["width_step"]) == ("dynamic", 1280, 32)
    # tier A also ran the twin at max_width (the evaluation tensors are 320 wide)
    assert "✓ tier A x86 twin .nb vs reference at width 1280" in (dynamic_bundle / "parity.txt").read_text()
    model = BundleModel.load(dynamic_bundle)
    line = lines.render(np.random.default_rng(5), LONG)
    assert model.tensor(line).shape == (3, 48, 1056)                 # 1,042 px at height 48, in steps of 32
    fixed = dataclasses.replace(model, spec=PreprocessSpec.from_mapping(
        {k: v for k, v in recorded.items() if k not in ("order", "width_mode", "max_width", "width_step")}))
    assert fixed.tensor(line).shape == (3, 48, 320)
    short = lines.render(np.random.default_rng(6), "noon river")
    read = model.predict_many([line, short])
    squeezed = fixed.predict(line)["text"]
    assert "".join(read[0]["text"].split()) == "".join(LONG.split()), read
    assert "".join(read[1]["text"].split()) == "noonriver", read
    assert "".join(squeezed.split()) != "".join(LONG.split()) and len(squeezed) < 30, squeezed   # squeezed: most characters lost
    # a short line gets the same tensor either way: width 320, padded
    assert model.tensor(short).shape == (3, 48, 320)
    assert np.array_equal(model.tensor(short), fixed.tensor(short))


def test_the_import_made_the_source_reshapes_width_free(dynamic_bundle):
    """The rapidocr rec ONNX as it comes: the import measured its six computed Reshape targets at three (batch,
    width) probes and wrote them as constants that hold at every width (export/width_free.py)."""
    free = json.loads((dynamic_bundle / "manifest.json").read_text())["onnx_import"]["width_free"]
    assert len(free["reshapes"]) == 6 and free["dropped_nodes"] > 0 and free["max_abs"] <= 1e-4   # measured 1.4e-6
    assert all(r["constant"].count(-1) <= 1 for r in free["reshapes"])
    assert [1, 1280] in free["checks"]


def test_a_model_whose_input_fixes_the_width_is_refused_in_one_line(cli, dynamic_bundle, tmp_path):
    """The same ONNX with its input declared 48x320: ONNX Runtime cannot run it at the probe widths, so the import
    refuses it under rec_dynamic.toml with ONNX Runtime's reason (exit 3), and no bundle is written."""
    import onnx

    from edgekit.export.onnx_import import fix_input_shapes

    fixed = tmp_path / "rec_320.onnx"
    onnx.save(fix_input_shapes(onnx.load(str(models.model_path("rec"))), {models.INPUT_NAME: (-1, 3, 48, 320)}),
              str(fixed))
    data = dynamic_bundle.parents[2] / "data"
    result = cli("build", "-c", EXAMPLE / "rec_dynamic.toml", "-m", fixed, "--eval", data / "rec_eval.npz", "--quant",
                 "fp32", "--target", "arm64", "--no-emulation", "--out", tmp_path / "out", "--quiet", ok=False)
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert "rec_320.onnx: the model does not run at (batch, width) [(1, 320), (2, 480), (1, 640)] in ONNX Runtime" \
        in result.output, result.output
    assert "width_mode = \"fixed\"" in result.output
    assert not list((tmp_path / "out").rglob("manifest.json"))


def test_the_bundle_carries_golden_vectors_at_max_width_and_parity_replays_them(cli, dynamic_bundle):
    """The evaluation tensors are all 48x320, so the build adds a golden group at max_width: the first golden
    input padded with pad_value as PreprocessSpec pads a narrow line, with the FP32 reference's outputs there."""
    m = json.loads((dynamic_bundle / "manifest.json").read_text())
    (group,) = m["golden"]["widths"]
    assert (group["width"], group["count"], group["inputs"][0]["shape"]) == (1280, 1, [1, 3, 48, 1280])
    assert json.loads((dynamic_bundle / "golden" / "golden.json").read_text())["widths"] == [group]
    assert all(t["file"] in m["files"] for t in group["inputs"] + group["outputs"])     # checksummed like the rest
    main = np.load(dynamic_bundle / m["golden"]["inputs"][0]["file"])[:1]
    wide = np.load(dynamic_bundle / group["inputs"][0]["file"])
    assert np.array_equal(wide[..., :320], main) and (wide[..., 320:] == np.float32(0.0)).all()
    assert np.load(dynamic_bundle / group["outputs"][0]["file"]).shape[:2] == (1, 160)  # 160 CTC steps at 1280
    replay = cli("parity", dynamic_bundle)
    assert "✓ tier A x86 twin .nb vs golden at width 1280" in replay.output and "✗" not in replay.output, replay.output


def test_parity_emulate_replays_the_max_width_group_on_model_nb(cli, dynamic_bundle, lite_arm):
    replay = cli("parity", dynamic_bundle, "--emulate", "--lite-arm", lite_arm)
    assert "replaying 1 golden sample at width 1280 on model.nb under qemu" in replay.output, replay.output
    assert "✓ tier C arm64 model.nb (emulated ARM) vs golden at width 1280" in replay.output, replay.output
    assert "✗" not in replay.output, replay.output
    print(replay.output)


def test_golden_images_of_other_widths_have_a_file_each(dynamic_bundle):
    """`--images` lines of three lengths make tensors of three widths: golden/images holds each tensor and its FP32
    outputs in files of their own (`per_image`, which the app self-test reads), and the results read the lines."""
    images = json.loads((dynamic_bundle / "golden" / "golden.json").read_text())["images"]
    assert "input" not in images and len(images["per_image"]) == len(IMAGE_LINES) == len(images["files"])
    widths = [np.load(dynamic_bundle / e["input"]).shape for e in images["per_image"]]
    assert [w[0] for w in widths] == [1, 1, 1] and widths[0][3] == 320 and widths[0][3] < widths[1][3] < widths[2][3]
    print("golden image tensor widths", [w[3] for w in widths])
    assert "".join(images["results"][2]["text"].split()) == "".join(LONG.split()), images["results"]
    listed = json.loads((dynamic_bundle / "manifest.json").read_text())["files"]
    assert all(e["input"] in listed and all(o in listed for o in e["outputs"]) for e in images["per_image"])
