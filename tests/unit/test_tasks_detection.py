"""Detection and segmentation tasks: decoding, NMS, letterbox math, COCO metrics (against pycocotools), bad input."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.core.errors import ConfigError, DataError
from edgekit.tasks import TASKS, TaskKind, make_task
from edgekit.tasks import coco
from edgekit.tasks.detection import coco_truth, dfl_sides, nms
from edgekit.tasks.segmentation import decode_rle, encode_rle, resize_nearest


def _raw_head(boxes_cells, classes=2, size=32, strides=(8, 16), reg_max=3, seed=0):
    """Anchor-free outputs with one confident cell per (stride, row, col, class, sides in bins)."""
    rng = np.random.default_rng(seed)
    cls_maps, reg_maps = [], []
    for s in strides:
        h = w = size // s
        cls_maps.append(np.full((1, classes, h, w), -8.0, np.float32))
        reg = rng.normal(0, 0.1, (1, 4 * (reg_max + 1), h, w)).astype(np.float32)
        reg_maps.append(reg)
    for level, row, col, klass, sides in boxes_cells:
        cls_maps[level][0, klass, row, col] = 4.0
        for k, side in enumerate(sides):          # a one-hot bin: the side is exactly `side` bins
            reg_maps[level][0, k * (reg_max + 1):(k + 1) * (reg_max + 1), row, col] = -30.0
            reg_maps[level][0, k * (reg_max + 1) + side, row, col] = 30.0
    return cls_maps + reg_maps


def test_anchor_free_decoding_places_boxes_at_cell_centres():
    task = make_task("detection", {"strides": [8, 16], "reg_max": 3, "num_classes": 2})
    outputs = _raw_head([(0, 1, 2, 1, (1, 1, 2, 3)), (1, 0, 1, 0, (0, 1, 1, 1))])
    (found,) = task.detect(outputs)
    assert sorted(found.classes.tolist()) == [0, 1]
    by_class = {int(c): found.boxes[i] for i, c in enumerate(found.classes)}
    cx, cy = (2 + 0.5) * 8, (1 + 0.5) * 8
    np.testing.assert_allclose(by_class[1], [cx - 8, cy - 8, cx + 16, cy + 24], atol=1e-4)
    cx, cy = (1 + 0.5) * 16, 0.5 * 16
    np.testing.assert_allclose(by_class[0], [cx, cy - 16, cx + 16, cy + 16], atol=1e-4)
    assert found.scores.max() == pytest.approx(1 / (1 + np.exp(-4.0)), abs=1e-6)


def test_dfl_expectation_and_plain_distances():
    logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4] * 4], np.float32))
    np.testing.assert_allclose(dfl_sides(logits, 3), [[2.0] * 4], atol=1e-5)
    plain = np.array([[1.5, 2.0, 3.0, 4.0]], np.float32)
    assert (dfl_sides(plain, 0) == plain).all()


def test_nms_is_class_aware_and_capped():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [0, 0, 10, 10], [50, 50, 60, 60]], np.float32)
    scores = np.array([0.9, 0.8, 0.7, 0.6], np.float32)
    classes = np.array([0, 0, 1, 0])
    assert nms(boxes, scores, classes, 0.5, 1000, 100).tolist() == [0, 2, 3]      # box 1 overlaps box 0 (IoU 0.81)
    assert nms(boxes, scores, classes, 0.9, 1000, 100).tolist() == [0, 1, 2, 3]
    assert nms(boxes, scores, classes, 0.5, 1000, 2).tolist() == [0, 2]
    assert nms(boxes, scores, classes, 0.5, 2, 100).tolist() == [0]               # top-k before NMS


def test_zero_detections_is_a_result():
    task = make_task("detection", {"strides": [8, 16], "reg_max": 3, "num_classes": 2})
    outputs = _raw_head([])
    assert task.postprocess(outputs) == [[]]
    truth = [{"boxes": [[0, 0, 8, 8]], "classes": [0]}]
    metrics = task.evaluate(outputs, truth)
    assert set(metrics) == set(TASKS[TaskKind.detection].metrics) and metrics["map50"] == 0.0


def test_wrong_outputs_are_named():
    task = make_task("detection", {"strides": [8, 16], "reg_max": 3, "num_classes": 2})
    outputs = _raw_head([])
    with pytest.raises(DataError, match="expects 4 outputs"):
        task.detect(outputs[:3])
    bad = list(outputs)
    bad[2] = bad[2][:, :8]
    with pytest.raises(DataError, match=r"output 0 .* output 2 .* \[N, 16, h, w\]"):
        task.detect(bad)
    with pytest.raises(DataError, match="scores 2 classes, the task names 3"):
        make_task("detection", {"strides": [8, 16], "reg_max": 3, "num_classes": 3}).detect(outputs)
    with pytest.raises(DataError, match="strides are wrong"):
        make_task("detection", {"strides": [8, 8], "reg_max": 3}).detect(outputs)


def test_decoded_head():
    task = make_task("detection", {"head": "decoded", "activation": "none", "labels": ["a", "b"]})
    boxes = np.array([[[0, 0, 10, 10], [20, 20, 30, 30]]], np.float32)
    scores = np.array([[[0.9, 0.1], [0.2, 0.7]]], np.float32)
    result = task.postprocess([boxes, scores])[0]
    assert [(r["label"], r["box"]) for r in result] == [("a", [0, 0, 10, 10]), ("b", [20, 20, 30, 30]),
                                                        ("a", [20, 20, 30, 30]), ("b", [0, 0, 10, 10])]
    with pytest.raises(DataError, match="expects 2 outputs"):
        task.detect([boxes])


def test_bad_options_and_truth():
    with pytest.raises(ConfigError, match="head"):
        make_task("detection", {"head": "anchors"})
    with pytest.raises(ConfigError, match="unknown option"):
        make_task("detection", {"iou": 0.5})
    task = make_task("detection", {"num_classes": 2})
    with pytest.raises(DataError, match="outside the 32x32 image"):
        task.truth_from_json([{"boxes": [[0, 0, 40, 10]], "classes": [0], "size": [32, 32]}])
    with pytest.raises(DataError, match="class 2"):
        task.truth_from_json([{"boxes": [[0, 0, 4, 10]], "classes": [2]}])
    with pytest.raises(DataError, match="x0 < x1"):
        task.truth_from_json([{"boxes": [[5, 0, 4, 10]], "classes": [0]}])
    assert task.truth_from_json([{"boxes": [], "classes": []}]) == [{"boxes": [], "classes": []}]
    with pytest.raises(DataError, match="no boxes at all"):
        make_task("detection", {"strides": [8, 16], "reg_max": 3}).evaluate(_raw_head([]), [{"boxes": [], "classes": []}])


def _random_case(seed):
    rng = np.random.default_rng(seed)
    truth, dets = [], []
    for _ in range(6):
        n = int(rng.integers(0, 6))
        xy = rng.uniform(0, 150, (n, 2))
        wh = rng.choice([6.0, 20.0, 40.0, 110.0], n) * rng.uniform(0.8, 1.2, (n, 2)).T
        boxes = np.concatenate([xy, xy + wh.T], axis=1)
        classes = rng.integers(0, 3, n)
        truth.append(coco.ImageBoxes.of(boxes, classes))
        m = int(rng.integers(0, 8))
        pick = rng.integers(0, max(n, 1), m)
        jitter = rng.normal(0, 4, (m, 4))
        d_boxes = (boxes[pick] if n else rng.uniform(0, 100, (m, 4))) + jitter
        d_boxes[:, 2:] = np.maximum(d_boxes[:, 2:], d_boxes[:, :2] + 1)
        d_classes = np.where(rng.uniform(size=m) < 0.8, classes[pick] if n else 0, rng.integers(0, 3, m))
        dets.append(coco.ImageBoxes.of(d_boxes, d_classes, rng.uniform(0.05, 1, m).round(3)))
    return truth, dets


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_map_equals_pycocotools(seed):
    pytest.importorskip("pycocotools")
    import contextlib
    import io

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    truth, dets = _random_case(seed)
    gt = {"images": [{"id": i + 1, "width": 200, "height": 200} for i in range(len(truth))],
          "categories": [{"id": c + 1} for c in range(3)], "annotations": []}
    results = []
    for i, (t, d) in enumerate(zip(truth, dets)):
        for box, klass in zip(t.boxes, t.classes):
            w, h = box[2] - box[0], box[3] - box[1]
            gt["annotations"].append({"id": len(gt["annotations"]) + 1, "image_id": i + 1, "category_id": int(klass) + 1,
                                      "bbox": [box[0], box[1], w, h], "area": w * h, "iscrowd": 0})
        for box, klass, score in zip(d.boxes, d.classes, d.scores):
            results.append({"image_id": i + 1, "category_id": int(klass) + 1, "score": float(score),
                            "bbox": [box[0], box[1], box[2] - box[0], box[3] - box[1]]})
    with contextlib.redirect_stdout(io.StringIO()):
        reference = COCO()
        reference.dataset = gt
        reference.createIndex()
        evaluation = COCOeval(reference, reference.loadRes(results), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    ours = coco.detection_metrics(dets, truth, 3, 0.5)
    stats = evaluation.stats           # AP, AP50, AP75, APs, APm, APl, ...
    assert ours["map"] == pytest.approx(stats[0], abs=1e-9)
    assert ours["map50"] == pytest.approx(stats[1], abs=1e-9)
    for key, index in (("map_small", 3), ("map_medium", 4), ("map_large", 5)):
        assert ours[key] == pytest.approx(max(stats[index], 0.0), abs=1e-9)


def test_hand_computed_ap_and_f1():
    truth = [coco.ImageBoxes.of([[0, 0, 10, 10], [20, 20, 30, 30]], [0, 0])]
    # one hit (0.9), one miss (0.8), then the second hit (0.7): precision 1, 1/2, 2/3 at recall 1/2, 1/2, 1
    dets = [coco.ImageBoxes.of([[0, 0, 10, 10], [50, 50, 60, 60], [20, 20, 30, 30]], [0, 0, 0], [0.9, 0.8, 0.7])]
    ap = coco.average_precision(dets, truth, [0])[0, 0]
    assert ap == pytest.approx((51 * 1.0 + 50 * (2 / 3)) / 101)
    counts = coco.f1_counts(dets, truth, [0], 0.75)
    assert counts[0] == (1, 1, 1) and coco.f1(*counts[0]) == pytest.approx(0.5)


def test_coco_annotations():
    document = {"images": [{"id": 7, "file_name": "a.png", "width": 64, "height": 48}],
                "categories": [{"id": 3, "name": "cat"}, {"id": 1, "name": "dog"}],
                "annotations": [{"image_id": 7, "category_id": 3, "bbox": [1, 2, 10, 20]},
                                {"image_id": 7, "category_id": 1, "bbox": [0, 0, 5, 5], "iscrowd": 1}]}
    entries, names = coco_truth(document, ["a.png"])
    assert names == ["dog", "cat"]
    assert entries == [{"boxes": [[1.0, 2.0, 11.0, 22.0]], "classes": [1], "size": [48, 64]}]
    with pytest.raises(DataError, match="no image 'b.png'"):
        coco_truth(document, ["b.png"])


def test_letterbox_tensor_and_inverse():
    spec = PreprocessSpec(color="bgr", resize=(64, 64), resize_mode="letterbox", scale=1.0, pad_value=-1.0)
    image = np.full((30, 60, 3), 200, np.uint8)
    g = spec.geometry(30, 60)
    assert (g.resized_height, g.resized_width, g.top, g.left) == (32, 64, 16, 0)
    tensor = spec.apply(image)
    assert tensor.shape == (3, 64, 64)
    assert (tensor[:, :16] == -1).all() and (tensor[:, 48:] == -1).all() and (tensor[:, 16:48] == 200).all()
    box = np.array([[0, 16, 64, 48]], np.float32)
    np.testing.assert_allclose(spec.to_image(box, 30, 60), [[0, 0, 60, 30]])
    truth = np.array([[6.0, 3.0, 30.0, 15.0]])
    np.testing.assert_allclose(spec.to_image(g.to_tensor(truth), 30, 60), truth, atol=1e-5)
    stretch = PreprocessSpec(resize=(32, 32))
    np.testing.assert_allclose(stretch.to_image(np.array([[8, 8, 16, 16]]), 64, 128), [[32, 16, 64, 32]])
    with pytest.raises(DataError, match="letterbox needs resize"):
        PreprocessSpec(resize_mode="letterbox")


def test_segmentation_metrics_rle_and_resize():
    mask = np.zeros((4, 6), np.uint8)
    mask[1:3, 2:5] = 2
    assert (decode_rle(encode_rle(mask)) == mask).all()
    assert resize_nearest(mask, 8, 12)[2:6, 4:10].min() == 2
    task = make_task("segmentation", {"labels": ["bg", "a", "b"]})
    scores = np.zeros((1, 3, 4, 6), np.float32)
    scores[0, 0] = 1.0
    scores[0, 2, 1:3, 2:4] = 2.0                     # predicts 4 of the 6 "b" pixels
    metrics = task.evaluate([scores], [encode_rle(mask)])
    # bg: 18 / 20, b: 4 / 6, a: absent from truth and prediction (not averaged)
    assert metrics["miou"] == pytest.approx(100 * (18 / 20 + 4 / 6) / 2, abs=1e-3)
    assert metrics["pixel_accuracy"] == pytest.approx(100 * 22 / 24, abs=1e-3)
    one = make_task("segmentation", {"threshold": 0.5})
    logits = np.where(mask > 0, 3.0, -3.0).astype(np.float32)[None, None]
    assert one.evaluate([logits], [encode_rle((mask > 0).astype(np.uint8))])["miou"] == 100.0
    with pytest.raises(DataError, match="runs cover"):
        task.truth_from_json([{"size": [4, 6], "rle": [[0, 5]]}])
    with pytest.raises(DataError, match=r"scores \[N, C, h, w\]"):
        task.evaluate([np.zeros((1, 2), np.float32)], [encode_rle(mask)])


def test_detector_example_truth_is_its_scenes():
    """The shipped evaluation truth is what the scene generator draws (letterboxed into the 96x96 tensor)."""
    from edgekit.core.images import image_files
    from edgekit.examples.detector import train
    from edgekit.tasks import read_truth

    folder = train.HERE / "data" / "eval"
    truth = read_truth(folder / "truth.json", len(image_files(folder)))
    assert truth.task.kind is TaskKind.detection and len(truth) == train.EVAL
    spec = train.spec()
    for i in (0, 3, 47):
        scene = train.scene_of(train.EVAL_SEED + i)
        boxes = spec.geometry(*scene.image.shape[:2]).to_tensor(scene.boxes)
        np.testing.assert_allclose(truth.values[i]["boxes"], boxes, atol=1e-4)
        assert truth.values[i]["classes"] == scene.classes.tolist()


def test_agreement_between_engines():
    task = make_task("detection", {"strides": [8, 16], "reg_max": 3, "num_classes": 2})
    some = _raw_head([(0, 1, 2, 1, (1, 1, 2, 3))])
    none = _raw_head([])
    for out in (some, none):
        for k in range(2):
            out[k][:] = np.where(out[k] > 0, out[k], -10.0)
    assert task.agreement(some, some) == 100.0
    assert task.agreement(none, none) == 100.0 and task.agreement(some, none) == 0.0
    assert task.agreement(none, some) == 0.0


def test_a_crafted_mask_png_is_refused_before_it_is_decoded(tmp_path):
    import importlib.util
    from pathlib import Path

    from edgekit.tasks.segmentation import masks_truth

    spec = importlib.util.spec_from_file_location("untrusted_make", Path(__file__).parents[1] / "data" / "untrusted" / "make.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    (tmp_path / "huge.png").write_bytes(make.png_header(10000, 10000))      # 100 Mpx claimed by a few bytes
    with pytest.raises(DataError, match="beyond the limit MAX_IMAGE_PIXELS"):
        masks_truth([tmp_path / "huge.png"])


# ---------------------------------------------------------------- NMS inside the graph (lite/nms.py)

def _rows():
    """Two images' multiclass_nms3 rows (class, score, x0, y0, x1, y1), listed by class as the op lists them."""
    return np.array([[0, 0.6, 0, 0, 10, 10], [1, 0.9, 20, 20, 30, 30],      # image 0: class order, not score order
                     [2, 0.7, 5, 5, 15, 15]], np.float32), np.array([2, 1], np.int32)


def test_nms_rows_become_detections_best_first_per_image():
    from edgekit.tasks.detection import nms_rows

    rows, counts = _rows()
    found = nms_rows(rows, counts)
    assert [len(d) for d in found] == [2, 1]
    assert found[0].classes.tolist() == [1, 0] and found[0].scores.tolist() == pytest.approx([0.9, 0.6])
    assert found[0].boxes[0].tolist() == [20, 20, 30, 30] and found[1].classes.tolist() == [2]
    assert [len(d) for d in nms_rows(np.zeros((0, 6), np.float32), np.array([0, 0]))] == [0, 0]   # nothing: a result
    with pytest.raises(DataError, match=r"NMS counts \[2, 2\] do not fit 3 rows"):
        nms_rows(rows, np.array([2, 2]))


def test_evaluate_detections_scores_rows_like_decoded_outputs():
    from edgekit.tasks.detection import nms_rows

    task = make_task("detection", {"head": "decoded", "activation": "none", "num_classes": 3})
    rows, counts = _rows()
    truth = [{"boxes": [[0, 0, 10, 10], [20, 20, 30, 30]], "classes": [0, 1]}, {"boxes": [[5, 5, 15, 15]], "classes": [2]}]
    assert task.evaluate_detections(nms_rows(rows, counts), truth)["map50"] == 100.0
    boxes = np.zeros((2, 2, 4), np.float32)                  # the same detections as decoded outputs
    scores = np.zeros((2, 2, 3), np.float32)
    boxes[0], boxes[1, 0] = [[0, 0, 10, 10], [20, 20, 30, 30]], [5, 5, 15, 15]
    scores[0, 0, 0], scores[0, 1, 1], scores[1, 0, 2] = 0.6, 0.9, 0.7
    assert task.evaluate([boxes, scores], truth) == task.evaluate_detections(nms_rows(rows, counts), truth)


def test_rows_of_two_engines_agree_only_with_the_same_counts_classes_and_values():
    from edgekit.lite.nms import rows_agree, split_rows

    rows, counts = _rows()
    per = split_rows(rows, counts)
    assert [len(p) for p in per] == [2, 1]
    assert rows_agree(per, per) == {"agree": True, "images": 2, "rows": 3, "max_abs": 0.0}
    moved = [p.copy() for p in per]
    moved[1][0, 3] += 0.01
    assert rows_agree(per, moved)["reason"].startswith("values differ by 0.01")
    assert rows_agree(per, [per[0], per[1][:0]])["reason"] == "image 1: 0 rows, Paddle 1"
    relabelled = [per[0][::-1].copy(), per[1]]
    assert rows_agree(per, relabelled)["reason"] == "image 0: classes differ"


def test_the_cut_check_matches_rows_to_detections_in_any_order():
    from edgekit.lite.nms import match_rows, split_rows
    from edgekit.tasks.detection import nms_rows

    rows, counts = _rows()
    per = split_rows(rows, counts)
    same = match_rows(per, nms_rows(rows, counts))            # best-first detections vs class-ordered rows
    assert same["passed"] and same["match_percent"] == 100.0 and same["graph_rows"] == 3
    shifted = rows.copy()
    shifted[2, 2:] += 3.0                                     # image 1's box moved: not the same detection
    worse = match_rows(per, nms_rows(shifted, counts))
    assert not worse["passed"] and worse["matched"] == 2 and worse["bundle_only"] == 1 and worse["match_percent"] == 50.0


def test_an_nms_op_becomes_the_task_options_that_do_the_same():
    from edgekit.lite.nms import NmsOp

    op = NmsOp("multiclass_nms3", "boxes", "scores", (-1, 180, 4), (-1, 3, 180),
               {"score_threshold": 0.025, "nms_threshold": 0.6, "nms_top_k": 1000, "keep_top_k": -1,
                "background_label": -1, "normalized": True})
    options = op.task_options()
    assert options == {"head": "decoded", "activation": "none", "score_threshold": 0.025, "nms_iou": 0.6,
                       "nms_top_k": 1000}                    # keep_top_k -1: no cap from the op
    assert make_task("detection", options).head == "decoded"
    assert op.to_json()["attrs"]["nms_threshold"] == 0.6


def test_matrix_nms_decays_scores_by_overlap_as_paddles_matrix_nms():
    task = make_task("detection", {"head": "decoded", "activation": "none", "nms": "matrix", "post_threshold": 0.05})
    boxes = np.repeat(np.array([[[0, 0, 10, 10], [5, 5, 20, 20], [30, 30, 40, 50]]], np.float32), 2, axis=1)
    found = task.detect([boxes, np.full((1, 6, 2), 0.9, np.float32)])[0]
    # a duplicate decays to 0 ((1 - 1) / (1 - 0)); [5, 5, 20, 20] overlaps the first box by IoU 25 / 300:
    # (1 - 1/12) / (1 - 0) * 0.9; the division by 1 - 1 (a duplicate's max IoU) is infinite and ignored
    assert found.classes.tolist() == [0, 0, 1, 1, 0, 1]
    assert found.scores.tolist() == pytest.approx([0.9, 0.9, 0.9, 0.9, 0.825, 0.825], abs=1e-6)
    gaussian = make_task("detection", {"head": "decoded", "activation": "none", "nms": "matrix", "use_gaussian": True,
                                       "gaussian_sigma": 2.0})
    decayed = gaussian.detect([boxes, np.full((1, 6, 2), 0.9, np.float32)])[0]
    assert decayed.scores.max() == pytest.approx(0.9) and len(decayed) == 12       # exp(-2) > 0: every box kept
    assert sorted(decayed.scores.tolist())[0] == pytest.approx(0.9 * np.exp(-2.0), abs=1e-6)
    assert task.options()["nms"] == "matrix" and "nms_iou" not in task.options()
    assert make_task("detection", task.options()) == task
    with pytest.raises(ConfigError, match="option nms = 'soft' is unknown"):
        make_task("detection", {"nms": "soft"})
    with pytest.raises(ConfigError, match="use_gaussian = 1 is not true or false"):
        make_task("detection", {"nms": "matrix", "use_gaussian": 1})


def test_the_nms_head_takes_the_graphs_rows_per_image_with_threshold_and_cap():
    rows, counts = _rows()
    task = make_task("detection", {"head": "nms", "labels": ["a", "b", "c"], "score_threshold": 0.65})
    found = task.detect([rows, counts])
    assert [d.classes.tolist() for d in found] == [[1], [2]]               # 0.6 is under the threshold
    assert found[0].boxes.tolist() == [[20, 20, 30, 30]] and found[1].scores.tolist() == pytest.approx([0.7])
    capped = make_task("detection", {"head": "nms", "max_detections": 1, "score_threshold": 0.0}).detect([rows, counts])
    assert [d.scores.tolist() for d in capped] == [pytest.approx([0.9]), pytest.approx([0.7])]   # best first, capped
    assert task.options() == {"head": "nms", "score_threshold": 0.65, "max_detections": 100, "f1_threshold": 0.5,
                              "labels": ["a", "b", "c"]}                   # no NMS, no activation: the graph did them
    assert [len(d) for d in task.detect([np.zeros((0, 6), np.float32), np.zeros(2, np.int32)])] == [0, 0]
    with pytest.raises(DataError, match=r"nms head\): the counts \[2, 2\] do not fit the 3 rows"):
        task.detect([rows, np.array([2, 2], np.int32)])
    with pytest.raises(DataError, match=r"output 0 must be rows \[K, 6\]"):
        task.detect([rows[:, :4], counts])
    with pytest.raises(DataError, match=r"output 0 names class 2, the task names 2"):
        make_task("detection", {"head": "nms", "num_classes": 2}).detect([rows, counts])


def test_a_kept_graphs_rows_are_picked_and_compared_image_by_image():
    from edgekit.lite.nms import comparable, take

    rows, counts = _rows()
    picked = take([rows, counts], [1, 0])                                  # image 1, then image 0
    assert picked[1].tolist() == [1, 2] and picked[0][:, 0].tolist() == [2, 0, 1]
    fewer = [rows[:2], np.array([2, 0], np.int32)]                        # image 1 found nothing
    ref, got = comparable([rows, counts], fewer)
    assert len(ref) == len(got) == 1 and ref[0].shape == got[0].shape == (2, 2, 6)   # the counts are in the padding
    assert np.array_equal(ref[0][0], got[0][0]) and not got[0][1].any() and ref[0][1, 0].tolist() == rows[2].tolist()


def test_the_model_nms_setting_is_auto_keep_or_cut(tmp_path):
    from edgekit.build.config import resolve

    def config(line):
        (tmp_path / "edgekit.toml").write_text(f'[model]\nname = "det"\nmodel_file = "m/model.pdmodel"\n{line}\n')
        return resolve(tmp_path / "edgekit.toml", {}, environ={})

    assert config("").model.nms == "auto"
    assert config('nms = "keep"').model.nms == "keep" and config('nms = "cut"').model.nms == "cut"
    with pytest.raises(ConfigError, match=r"\[model\] nms = 'never' is unknown"):
        config('nms = "never"')


def _flattened(maps, levels):
    """The maps layout as PicoDet's exports give it: [N, h*w, C] per stride, then [N, h*w, bins] per stride."""
    return [m.reshape(m.shape[0], m.shape[1], -1).transpose(0, 2, 1).copy() for m in maps[:levels]] + \
        [m.reshape(m.shape[0], m.shape[1], -1).transpose(0, 2, 1).copy() for m in maps[levels:]]


def test_flattened_heads_decode_as_the_maps_do():
    """PicoDet's flattened outputs ([N, HW, C] + [N, HW, 4 (reg_max + 1)]) give the detections of the same head as
    maps, the cells laid out by input_size; a non-square input, so a transposed grid would move every box."""
    rng = np.random.default_rng(4)
    strides, size = (8, 16), (32, 48)
    maps = []
    for s in strides:
        maps.append(rng.normal(-4, 2, (2, 3, size[0] // s, size[1] // s)).astype(np.float32))
    for s in strides:
        maps.append(rng.normal(0, 2, (2, 16, size[0] // s, size[1] // s)).astype(np.float32))
    options = {"strides": list(strides), "reg_max": 3, "num_classes": 3, "score_threshold": 0.3}
    want = make_task("detection", options).detect(maps)
    task = make_task("detection", dict(options, input_size=list(size)))
    got = task.detect(_flattened(maps, 2))
    assert sum(len(d) for d in want) > 5
    for a, b in zip(want, got):
        assert a.classes.tolist() == b.classes.tolist()
        np.testing.assert_array_equal(a.boxes, b.boxes)
        np.testing.assert_array_equal(a.scores, b.scores)
    assert task.options()["input_size"] == [32, 48]
    assert make_task("detection", options).with_input(32, 48).input_size == (32, 48)


def test_flattened_heads_with_strides_beyond_the_input_round_up():
    """Strides that do not divide the input (800 x 608 at stride 64: 13 x 10 cells) take ceil, as PicoDet's grids."""
    task = make_task("detection", {"strides": [8, 16, 32, 64], "reg_max": 7, "activation": "none",
                                   "input_size": [800, 608], "num_classes": 10, "score_threshold": 0.5})
    cells = [7600, 1900, 475, 130]
    scores = [np.zeros((1, c, 10), np.float32) for c in cells]
    bins = [np.zeros((1, c, 32), np.float32) for c in cells]
    scores[3][0, 12 * 10 + 9, 4] = 0.9                  # the last cell of stride 64: row 12, column 9
    (found,) = task.detect(scores + bins)
    assert found.classes.tolist() == [4] and found.scores.tolist() == [pytest.approx(0.9)]
    side = 3.5 * 64                                     # uniform bins: the mean bin 3.5
    np.testing.assert_allclose(found.boxes[0], [9.5 * 64 - side, 12.5 * 64 - side, 9.5 * 64 + side, 12.5 * 64 + side])


def test_outputs_matching_no_head_layout_name_shapes_and_layouts():
    task = make_task("detection", {"strides": [8, 16], "reg_max": 3, "input_size": [32, 48]})
    flat = [np.zeros((1, 24, 2), np.float32), np.zeros((1, 6, 2), np.float32),
            np.zeros((1, 24, 16), np.float32), np.zeros((1, 7, 16), np.float32)]
    with pytest.raises(DataError, match=r"outputs \[\[1, 24, 2\].* match no head layout \(stride 16 wants \[N, 6, C\] and "
                                        r"\[N, 6, 16\]\); tried: maps .* flattened .* h x w = 4x6, 2x3 \(input 32x48\)"):
        task.detect(flat)
    with pytest.raises(DataError, match=r"match no head layout \(neither all 4-D"):
        task.detect([np.zeros((1, 2, 4, 6), np.float32)] + flat[1:])
    with pytest.raises(DataError, match=r"match no head layout \(4 outputs wanted, the model gives 2\)"):
        task.detect(flat[:2])
    with pytest.raises(DataError, match="need the input's height and width"):
        make_task("detection", {"strides": [8, 16], "reg_max": 3}).detect(flat)
    with pytest.raises(ConfigError, match=r"input_size = \[32\] is not \[height, width\]"):
        make_task("detection", {"input_size": [32]})
