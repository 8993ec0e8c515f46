"""edgekit/tasks/db.py: PaddleOCR's DB post-processing on synthetic probability maps (rotated, small, touching
text; empty maps; other output sizes), its geometry against OpenCV, and an independent check against
rapidocr_onnxruntime's DBPostProcess (PaddleOCR's code as that package ships it) on the same maps."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from edgekit.tasks import db
from edgekit.tasks.ocr import OcrDet, iou
from textmaps import rotated_map


def maps(seed=3, count=90):
    rng = np.random.default_rng(seed)
    for k in range(count):
        height, width = [(64, 96), (160, 320), (97, 131)][k % 3]
        yield rotated_map(rng, height, width, 7, small=k % 2 == 1)


def test_rotated_rectangles_come_back_at_their_angle():
    for angle in (-60, -30, -10, 0, 15, 45, 75):
        prob = np.zeros((120, 160), np.float32)
        corners = cv2.boxPoints(((80, 60), (90, 14), angle))
        cv2.fillPoly(prob, [np.round(corners).astype(np.int32)], 0.9)
        ((quad, score),) = db.db_quads(prob)
        q = np.array(quad, float)
        top, left = q[1] - q[0], q[3] - q[0]
        long = top if np.hypot(*top) > np.hypot(*left) else left       # the line's direction
        got = np.degrees(np.arctan2(long[1], long[0]))
        diff = abs(got - angle) % 180
        assert min(diff, 180 - diff) < 3, (angle, quad)
        assert 0.8 < score <= 0.9 + 1e-6     # the rectangle's edge pixels reach past the filled region
        # grown by area * 1.5 / perimeter = 90*14*1.5/208 ~ 9 px across: about 14 + 2*9 wide
        sides = sorted([np.hypot(*(q[1] - q[0])), np.hypot(*(q[3] - q[0]))])
        assert 26 <= sides[0] <= 36 and 100 <= sides[1] <= 114


def test_small_text_touching_regions_and_empty_maps():
    prob = np.zeros((40, 60), np.float32)
    prob[5:11, 5:20] = 0.8                   # 6 px high text
    prob[20:26, 5:14] = 0.8
    prob[20:26, 14:30] = 0.7                 # touching the previous one: one region
    found = db.db_quads(prob)
    assert len(found) == 2
    assert [s for _, s in found] == [pytest.approx((9 * 6 * 0.8 + 16 * 6 * 0.7) / 150, abs=0.02), pytest.approx(0.8)]
    assert db.db_quads(np.zeros((30, 30), np.float32)) == []
    assert db.db_quads(np.zeros((0, 30), np.float32)) == []
    assert db.db_quads(np.full((8, 8), 0.9, np.float32)) == [(((0, 0), (8, 0), (8, 8), (0, 8)), 0.9)]


def test_output_size_scales_and_clips():
    prob = np.zeros((32, 64), np.float32)
    prob[10:20, 20:50] = 0.9
    ((small, _),) = db.db_quads(prob)
    ((big, _),) = db.db_quads(prob, dest=(96, 128))
    assert np.abs(np.array(big) - np.array(small) * [2, 3]).max() <= 3
    prob[0:10, 50:64] = 0.9
    assert all(0 <= x <= 128 and 0 <= y <= 96 for quad, _ in db.db_quads(prob, dest=(96, 128)) for x, y in quad)


def test_geometry_matches_opencv():
    rng = np.random.default_rng(5)
    for _ in range(400):                     # cv2.fillPoly's pixels, also for polygons leaving the grid
        h, w = (int(v) for v in rng.integers(1, 30, 2))
        quad = np.trunc(rng.uniform(-5, 35, (4, 2))).astype(np.int32)
        want = np.zeros((h, w), np.uint8)
        cv2.fillPoly(want, quad.reshape(1, -1, 2), 1)
        assert (db.polygon_mask(quad, h, w) == want.astype(bool)).all(), (quad.tolist(), h, w)
    for _ in range(200):                     # minimum-area rectangle: cv2's area (float32 there; on ties, e.g.
        points = rng.integers(0, 50, (int(rng.integers(3, 12)), 2))          # triangles, another side may win)
        corners, short = db.min_area_rect(points)
        (_, (a, b), _) = cv2.minAreaRect(points.astype(np.int32))
        sides = np.hypot(*(corners[1] - corners[0])) * np.hypot(*(corners[3] - corners[0]))
        assert sides == pytest.approx(a * b, rel=1e-4, abs=1e-3)
        assert short <= max(a, b) + 1e-3


def test_same_boxes_as_rapidocr_within_one_pixel():
    """PaddleOCR's code (rapidocr's copy) on the same maps: every box within 1 px per corner, except boxes cut by
    the map's border (there the two orientations of the cut region's rectangle nearly tie, and cv2's float32
    arithmetic may pick the other): within 2 px. A box only one side finds must have a score within 0.05 of
    box_thresh there: cv2's float32 corners land at 12.99999 where ours are 13.0, and truncating them before the
    fill moves a thin box's mask by a pixel."""
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DBPostProcess

    reference = DBPostProcess(thresh=0.3, box_thresh=0.6, unclip_ratio=1.5)
    boxes, unmatched, worst = 0, 0, 0.0
    for prob in maps():
        height, width = prob.shape
        theirs, scores = reference.boxes_from_bitmap(prob, prob > 0.3, width, height)
        ours = db.db_quads(prob)
        at_border = [bool((t == 0).any() or (t[:, 0] == width).any() or (t[:, 1] == height).any()) for t in theirs]
        pairs = [(i, j) for i in range(len(theirs)) for j in range(len(ours))
                 if np.abs(theirs[i] - np.array(ours[j][0])).max() <= (2 if at_border[i] else 1)]
        for i, j in pairs:
            if not at_border[i]:
                worst = max(worst, float(np.abs(theirs[i] - np.array(ours[j][0])).max()))
        lone_theirs = set(range(len(theirs))) - {i for i, _ in pairs}
        lone_ours = set(range(len(ours))) - {j for _, j in pairs}
        assert all(abs(scores[i] - 0.6) < 0.05 for i in lone_theirs)
        assert all(abs(ours[j][1] - 0.6) < 0.05 for j in lone_ours)
        boxes += len(pairs)
        unmatched += len(lone_theirs) + len(lone_ours)
    assert boxes >= 150 and worst <= 1 and unmatched <= boxes * 0.02, (boxes, unmatched)


def test_other_output_sizes_match_rapidocr():
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DBPostProcess

    reference = DBPostProcess(thresh=0.3, box_thresh=0.6, unclip_ratio=1.5)
    for prob in maps(seed=11, count=12):
        height, width = prob.shape
        dest = (height * 2 + 3, int(width * 1.5))
        theirs, _ = reference.boxes_from_bitmap(prob, prob > 0.3, dest[1], dest[0])
        ours = [np.array(q) for q, _ in db.db_quads(prob, dest=dest)]
        scale = max(dest[0] / height, dest[1] / width)
        for quad in theirs:                  # one map pixel, scaled, plus the final rounding
            assert min(np.abs(quad - q).max() for q in ours) <= scale + 1


def test_task_options_truth_quads_and_polygon_iou():
    task = OcrDet.from_options({"max_candidates": 5, "thresh": 0.3})
    assert task.options()["max_candidates"] == 5
    assert OcrDet.from_options({"thresh": 0.3, "box_thresh": 0.6, "unclip_ratio": 1.5, "min_size": 3,
                                "match_iou": 0.5}).max_candidates == 1000          # an old task.json
    truth = task.truth_from_json([[[0, 0, 10, 10], [[0, 0], [10, 0], [10, 10], [0, 10]]]])
    assert task.truth_to_json(truth) == [[[0.0, 0.0, 10.0, 10.0], [[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [0.0, 10.0]]]]
    diamond = ((5, 0), (10, 5), (5, 10), (0, 5))
    assert iou(diamond, (0, 0, 10, 10)) == pytest.approx(0.5)
    assert iou(diamond, ((20, 20), (30, 20), (30, 30), (20, 30))) == 0.0
    prob = np.zeros((1, 1, 60, 80), np.float32)
    corners = cv2.boxPoints(((40, 30), (50, 8), 30))
    cv2.fillPoly(prob[0, 0], [np.round(corners).astype(np.int32)], 0.9)
    (found,) = task.predictions([prob])
    grown = cv2.boxPoints(((40, 30), (50 + 12, 8 + 12), 30)).tolist()
    assert task.evaluate([prob], [[grown]])["hmean"] == 100.0
    (x0, y0, x1, y1) = (min(p[0] for p in grown), min(p[1] for p in grown), max(p[0] for p in grown), max(p[1] for p in grown))
    assert task.evaluate([prob], [[(x0, y0, x1, y1)]])["hmean"] == 0.0     # a rotated line is not its bounding box


def test_rotate_crop_warps_quads_upright():
    from edgekit.consumers.predict import rotate_crop

    rng = np.random.default_rng(1)
    image = cv2.GaussianBlur(rng.integers(0, 256, (80, 120, 3)).astype(np.uint8), (9, 9), 3)
    assert (rotate_crop(image, [[10, 5], [50, 5], [50, 25], [10, 25]]) == image[5:25, 10:50]).all()
    tall = rotate_crop(image, [[10, 10], [20, 10], [20, 40], [10, 40]])
    assert tall.shape == (10, 30, 3) and (tall == np.rot90(image[10:40, 10:20])).all()
    quad = [[20.5, 30.2], [90.3, 10.1], [96.2, 30.7], [26.4, 50.8]]          # tilted: as cv2.warpPerspective
    mine = rotate_crop(image, quad)
    h, w = mine.shape[:2]
    matrix = cv2.getPerspectiveTransform(np.float32(quad), np.float32([[0, 0], [w, 0], [w, h], [0, h]]))
    ref = cv2.warpPerspective(image, matrix, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    assert np.abs(mine.astype(int) - ref).max() <= 2                        # cv2 interpolates in 1/32 px steps
    assert rotate_crop(image, [[5, 5], [5.5, 5], [5.5, 9], [5, 9]]).size == 0


def test_slow_score_mode_matches_rapidocr():
    """score_mode "slow": the mean inside the contour itself, as box_score_slow (cv2.fillPoly on the contour)."""
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DBPostProcess

    reference = DBPostProcess(thresh=0.3, box_thresh=0.6, unclip_ratio=1.5, score_mode="slow")
    for prob in maps(seed=4, count=12):
        for contour in cv2.findContours((prob > 0.3).astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)[0]:
            want = reference.box_score_slow(prob, contour)
            assert db.region_score(prob, contour.reshape(-1, 2).astype(np.float64)) == pytest.approx(want, abs=1e-9)
    with pytest.raises(Exception, match="score_mode"):
        OcrDet.from_options({"score_mode": "exact"})
    assert OcrDet.from_options({"score_mode": "slow"}).options()["score_mode"] == "slow"
