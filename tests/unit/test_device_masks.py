"""The golden masks check's pure comparison (edgekit/device/masks.py) and the build's floor (tasks/segmentation.py)."""

import numpy as np

from edgekit.device import masks
from edgekit.tasks.segmentation import Segmentation, compare_masks, golden_tolerance


def maps(*arrays):
    return [np.asarray(a, np.uint8) for a in arrays]


def test_fp32_needs_every_pixel_equal():
    ref = maps([[0, 1], [1, 1]], [[2, 2], [0, 0]])
    assert masks.compare(ref, maps([[0, 1], [1, 1]], [[2, 2], [0, 0]]), None)["passed"]
    found = masks.compare(ref, maps([[0, 1], [1, 1]], [[2, 2], [0, 1]]), None)
    assert not found["passed"] and found["failed_images"] == [1] and found["differing"] == 1
    assert "1 of 8 pixels differ" in masks.message(found) and "failing images [1]" in masks.message(found)


def test_reduced_precision_is_judged_by_pixel_agreement_per_image():
    ref = maps(np.zeros((10, 10)), np.ones((10, 10)))
    got = [m.copy() for m in ref]
    got[0][0, :3] = 1                                   # 97 % of image 0 agrees
    assert masks.compare(ref, got, {"min_agreement": 96.5})["passed"]
    found = masks.compare(ref, got, {"min_agreement": 98.0})
    assert not found["passed"] and found["failed_images"] == [0] and found["min_agreement"] == 97.0
    assert "worst agreement 97.00 % (≥ 98 %)" in masks.message(found)


def test_a_map_of_another_shape_or_count_fails():
    assert not masks.compare(maps([[0, 1]]), maps([[0], [1]]), None)["passed"]
    assert "hold 2 class maps, the golden reference 1" in masks.message(masks.compare(maps([[0]]), maps([[0]], [[0]]),
                                                                                          None))


def test_mask_iou_is_over_the_classes_either_map_holds():
    found = compare_masks(np.array([[0, 0], [1, 1]], np.uint8), np.array([[0, 0], [0, 1]], np.uint8))
    assert found["differing"] == 1 and found["agreement"] == 75.0
    assert abs(found["miou"] - 100 * (2 / 3 + 1 / 2) / 2) < 1e-3


def test_the_floor_is_the_worst_image_less_the_margin_and_the_task_scores_its_outputs():
    summary = Segmentation(("bg", "fg")).match_outputs(
        [np.array([[[[5, 5], [5, 5]], [[0, 0], [0, 9]]]], np.float32)],     # [1, 2, 2, 2] scores: one fg pixel
        [np.array([[[[5, 5], [5, 5]], [[0, 0], [9, 9]]]], np.float32)])
    assert summary["images"] == 1 and summary["min_agreement"] == 75.0 and summary["differing"] == 1
    tolerance = golden_tolerance(summary, "C")
    assert tolerance["min_agreement"] == 74.0 and tolerance["measured"]["tier"] == "C"
    assert golden_tolerance(dict(summary, min_agreement=0.5), "B")["min_agreement"] == 0.0


def test_the_worst_launch_is_reported_not_the_first():
    class Identity:                                        # class maps as they come
        @staticmethod
        def class_maps(outputs):
            return list(outputs)

    ref = maps(np.zeros((4, 4)))
    one_off, two_off = ref[0].copy(), ref[0].copy()
    one_off[0, 0] = 1
    two_off[0, :2] = 1
    figures, result = masks.check(Identity, ref, [[one_off], [two_off], [ref[0]]], {"min_agreement": 50.0})
    assert result.status == "passed" and figures["differing"] == 2 and "worst of 3 launches" in result.message
