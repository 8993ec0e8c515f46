"""The conformance suite's data for the PP-OCRv5 pair (edgekit/examples/zoo.py): det pages whose truth is in the
pixels of the letterboxed tensor, and rec lines cut from pages as a DB box cuts them."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.examples import zoo
from edgekit.examples.ppocr.lines import fonts_missing, page

pytestmark = pytest.mark.skipif(fonts_missing() is not None, reason=str(fonts_missing()))


def test_det_pages_truth_is_in_the_letterboxed_tensors_pixels(tmp_path):
    folder = zoo.det_pages(tmp_path / "det", seed=5, count=2)
    truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
    assert truth["task"] == "ocr_det" and truth["count"] == 2
    rng = np.random.default_rng(5)
    spec = PreprocessSpec(resize=(960, 960), resize_mode="letterbox")
    for i, boxes in enumerate(truth["truth"]):
        image, _, drawn = page(rng)                        # the same drawing, in page pixels
        assert cv2.imread(str(folder / f"page{i:03d}.png")).shape == image.shape == (1300, 1000, 3)
        back = spec.geometry(1300, 1000).to_image(np.asarray(boxes, np.float32))
        assert np.abs(back - np.asarray(drawn)).max() < 0.05  # truth rounded to 0.01 tensor pixels
        x = np.asarray(boxes)
        assert x[:, 0].min() >= 111 and x[:, 2].max() <= 111 + 738 and x[:, 3].max() <= 960   # inside the page


def test_rec_crops_hold_each_line_with_a_db_boxs_margins(tmp_path):
    folder = zoo.rec_crops(tmp_path / "rec", seed=7, count=20)
    truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
    assert truth["task"] == "ocr_rec" and truth["count"] == 20 and len(list(folder.glob("line*.png"))) == 20
    rng = np.random.default_rng(7)
    _, texts, boxes = page(rng)
    assert truth["truth"][:len(texts)] == texts[:20]
    for k, (x0, y0, x1, y1) in enumerate(boxes[:5]):
        crop = cv2.imread(str(folder / f"line{k:04d}.png"))
        h = y1 - y0
        assert (1.0 + 0.12) * h - 1 <= crop.shape[0] <= (1.0 + 0.36 + 0.26) * h + 2   # top and bottom margins
        assert (x1 - x0) - 0.05 * h - 1 <= crop.shape[1] <= (x1 - x0) + 0.3 * h + 2
