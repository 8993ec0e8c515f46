"""The golden detections check's pure matching (edgekit/device/detections.py)."""

from edgekit.device import detections

FLOORS = {"min_recall": 0.9, "min_precision": 0.9, "min_iou": 0.5, "score_threshold": 0.3}


def det(box, klass, score=0.9):
    return {"box": list(box), "class": klass, "score": score}


def test_fp32_same_classes_and_corners_within_a_pixel_pass():
    ref = [[det((10, 10, 50, 50), 1)], []]
    found = detections.compare(ref, [[det((10.5, 10, 50, 50.9), 1)], []], None)
    assert found["passed"] and abs(found["max_corner_px"] - 0.9) < 1e-9 and found["images"] == 2


def test_fp32_a_moved_box_or_flipped_class_fails():
    ref = [[det((10, 10, 50, 50), 1)]]
    assert not detections.compare(ref, [[det((12, 10, 50, 50), 1)]], None)["passed"]
    assert not detections.compare(ref, [[det((10, 10, 50, 50), 2)]], None)["passed"]
    assert not detections.compare(ref, [[]], None)["passed"]


def test_int8_matching_by_class_and_iou_meets_the_floors():
    ref = [[det((10, 10, 50, 50), 1), det((60, 60, 90, 90), 0)], []]
    found = detections.compare(ref, [[det((60, 61, 90, 90), 0), det((11, 10, 50, 50), 1)], []], FLOORS)
    assert found["passed"] and found["matched"] == 2 and found["missing"] == 0 and found["extra"] == 0
    assert 0.9 < found["worst_iou"] < 1.0
    assert "worst IoU" in detections.message(found)


def test_int8_missing_and_extra_fail():
    ref = [[det((10, 10, 50, 50), 1)]]
    found = detections.compare(ref, [[det((10, 10, 50, 50), 2)]], FLOORS)
    assert not found["passed"] and found["missing"] == 1 and found["extra"] == 1 and found["failed_images"] == [0]


def test_zero_detections_everywhere_is_a_pass():
    assert detections.compare([[], []], [[], []], FLOORS)["passed"]
    assert detections.compare([[]], [[]], None)["passed"]
