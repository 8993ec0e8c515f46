"""Variable-width lines (issue 23): the PP-OCRv4 rec example built with `rec_dynamic.toml` on the width-free
rewrite reads a long DejaVu line that the fixed 48x320 input squeezes out of shape, through the bundle's own
preprocess.json on the x86 twin. Full figures: bench/bench_long_lines.py (30 long lines: fixed 0 %, variable
96.7 % exact match)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from edgekit.data import PreprocessSpec
from edgekit.examples.ppocr import free_width, lines, make_data, models
from edgekit.predict import BundleModel

pytestmark = pytest.mark.e2e

EXAMPLE = Path(make_data.__file__).parent
LONG = "invoice total amount due confirmed by the manager"        # 49 characters


@pytest.fixture(scope="module")
def dynamic_bundle(cli, tmp_path_factory):
    why = lines.fonts_missing()
    if why:                          # native/install-deps.sh (which ./run tests calls as root) installs them
        pytest.fail(why)
    root = tmp_path_factory.mktemp("long-lines")
    make_data.make_data(root / "data", seed=0, counts=make_data.Counts(det_calib=1, det_eval=1, rec_calib=1, rec_eval=4,
                                                                        cls_calib=1, cls_eval=1))
    source = free_width.free_width(models.model_path("rec"), root / "rec_free_width.onnx")
    cli("build", "-c", EXAMPLE / "rec_dynamic.toml", "-m", source, "--eval", root / "data" / "rec_eval.npz",
        "--quant", "fp32", "--target", "arm64", "--no-emulation", "--out", root / "out", "--quiet")
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


def test_a_model_whose_graph_fixes_the_width_is_refused_in_one_line(cli, dynamic_bundle, tmp_path):
    """The source rec ONNX (reshapes folded for width 320 by X2Paddle) under rec_dynamic.toml: tier A's run at
    max_width fails in Paddle, the build stops with exit 9 and the fix, and writes no bundle."""
    data = dynamic_bundle.parents[2] / "data"
    result = cli("build", "-c", EXAMPLE / "rec_dynamic.toml", "-m", models.model_path("rec"), "--eval",
                 data / "rec_eval.npz", "--quant", "fp32", "--target", "arm64", "--no-emulation", "--out", tmp_path / "out",
                 "--quiet", ok=False)
    assert result.exit_code == 9, result.output
    assert "does not run at max_width 1280" in result.output and "free_width" in result.output
    assert not list((tmp_path / "out").rglob("manifest.json"))
