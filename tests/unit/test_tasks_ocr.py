"""edgekit.tasks: task metrics and post-processing on hand-made arrays; truth files; the PP-OCR data renderer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgekit.core.errors import ConfigError, DataError, InputModelError
from edgekit.tasks import TASKS, TaskKind, find_truth, make_task, read_truth, truth_file, write_truth
from edgekit.tasks.ocr import (
    ctc_greedy_decode,
    db_boxes,
    detection_scores,
    edit_distance,
    iou,
    line_tensor,
    matched_boxes,
    read_dictionary,
    recognition_scores,
)

DICTIONARY = tuple("abc")          # classes: 0 blank, 1 a, 2 b, 3 c, 4 space


def blob_map(height=40, width=80):
    """Two text regions: a 10x20 block (p=0.9) at x 5..24, y 5..14 and a 6x30 block (p=0.8) at x 40..69, y 25..30."""
    prob = np.zeros((1, 1, height, width), np.float32)
    prob[0, 0, 5:15, 5:25] = 0.9
    prob[0, 0, 25:31, 40:70] = 0.8
    return prob


# --- detection ----------------------------------------------------------------------------------

def test_db_boxes_two_blobs_unclipped():
    boxes = db_boxes(blob_map()[0, 0])
    assert len(boxes) == 2
    (second, s2), (first, s1) = boxes                # cv2.findContours lists the last border found first
    # contour = pixel centres x 5..24, y 5..14: 19 x 9, grown by area * ratio / perimeter, rounded
    grow1 = 19 * 9 * 1.5 / (2 * (19 + 9))
    assert np.abs(np.array(first) - [[5 - grow1, 5 - grow1], [24 + grow1, 5 - grow1], [24 + grow1, 14 + grow1],
                                     [5 - grow1, 14 + grow1]]).max() <= 1.0
    grow2 = 29 * 5 * 1.5 / (2 * (29 + 5))
    assert np.abs(np.array(second) - [[40 - grow2, 25 - grow2], [69 + grow2, 25 - grow2], [69 + grow2, 30 + grow2],
                                      [40 - grow2, 30 + grow2]]).max() <= 1.0
    assert all(isinstance(v, int) for q in (first, second) for p in q for v in p)
    assert (s1, s2) == (pytest.approx(0.9), pytest.approx(0.8))


def test_db_boxes_filters_and_clips():
    prob = np.zeros((30, 30), np.float32)
    prob[0:8, 0:8] = 0.5            # above the pixel threshold, below the box threshold: dropped
    prob[20:22, 20:29] = 0.95       # 2 px high: below min_size 3, dropped
    assert db_boxes(prob) == []
    prob[0:8, 0:8] = 0.7
    ((quad, score),) = db_boxes(prob)
    assert quad[0] == (0, 0) and score == pytest.approx(0.7)          # grown quad clipped to the map
    assert db_boxes(prob, box_thresh=0.8) == []
    assert db_boxes(prob, thresh=0.75) == []


def test_iou_and_one_to_one_matching():
    assert iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert iou((0, 0, 10, 10), (5, 0, 15, 10)) == pytest.approx(50 / 150)
    assert iou((0, 0, 1, 1), (2, 2, 3, 3)) == 0.0
    truth = [(0, 0, 10, 10), (20, 0, 30, 10)]
    # two found boxes on the first true box: only one may count
    assert matched_boxes([(0, 0, 10, 10), (1, 0, 10, 10)], truth) == 1
    assert matched_boxes([(0, 0, 10, 10), (20, 0, 31, 10)], truth) == 2
    assert matched_boxes([(0, 0, 10, 4)], truth) == 0              # IoU 0.4 < 0.5


def test_detection_scores_are_corpus_level_percent():
    found = [[(0, 0, 10, 10), (50, 50, 60, 60)], []]
    truth = [[(0, 0, 10, 10)], [(0, 0, 5, 5)]]
    scores = detection_scores(found, truth)
    assert scores == {"precision": 50.0, "recall": 50.0, "hmean": 50.0}
    assert detection_scores([[]], [[(0, 0, 1, 1)]]) == {"precision": 0.0, "recall": 0.0, "hmean": 0.0}


def test_ocr_det_task_end_to_end():
    task = make_task("ocr_det")
    # the map marks shrunk text kernels: the text itself is the unclipped box around each
    truth = [[(1, 1, 29, 19), (37, 22, 73, 34)]]
    assert task.evaluate([blob_map()], truth) == {"precision": 100.0, "recall": 100.0, "hmean": 100.0}
    assert task.evaluate([blob_map()], [[(5, 5, 25, 15), (37, 22, 73, 34)]])["hmean"] == 50.0   # kernel box: IoU 1/3
    missed = [[(1, 1, 29, 19), (37, 22, 73, 34), (0, 35, 10, 40)]]
    assert task.evaluate([blob_map()], missed)["recall"] == pytest.approx(66.6667)
    (result,) = task.postprocess([blob_map()])
    assert [r["score"] for r in result] == [pytest.approx(0.8), pytest.approx(0.9)]      # contour order
    assert all(len(r["quad"]) == 4 and r["box"] == [min(p[0] for p in r["quad"]), min(p[1] for p in r["quad"]),
               max(p[0] for p in r["quad"]), max(p[1] for p in r["quad"])] for r in result)
    with pytest.raises(DataError, match="shape"):
        task.evaluate([np.zeros((2, 5))], [[], []])
    with pytest.raises(DataError, match="ground-truth"):
        task.evaluate([blob_map()], truth * 2)


# --- recognition --------------------------------------------------------------------------------

def ctc_scores(indices, classes=5, peak=0.9):
    probs = np.full((len(indices), classes), (1 - peak) / (classes - 1), np.float32)
    probs[np.arange(len(indices)), indices] = peak
    return probs


def test_ctc_greedy_decode_collapses_repeats_and_drops_blanks():
    characters = ("",) + DICTIONARY + (" ",)
    # a a _ a b b _ _ c space c  ->  "aabc c" (only a blank separates a repeated character)
    text, conf = ctc_greedy_decode(ctc_scores([1, 1, 0, 1, 2, 2, 0, 0, 3, 4, 3]), characters)
    assert text == "aabc c"
    assert conf == pytest.approx(0.9)
    assert ctc_greedy_decode(ctc_scores([0, 0, 0]), characters) == ("", 0.0)


def test_edit_distance_and_scores():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3
    assert edit_distance("abc", "abc") == 0
    scores = recognition_scores(["abc", "abd", "a c"], ["abc", "abc", "ac"])
    assert scores["exact_match"] == pytest.approx(66.6667)          # spaces ignored, as PaddleOCR's RecMetric
    assert scores["char_accuracy"] == pytest.approx(100 * (1 - (0 + 1 / 3 + 0) / 3), abs=1e-3)
    # normalised by the longer string: a long wrong prediction cannot go below 0
    assert recognition_scores(["abcdefgh"], ["a"])["char_accuracy"] == pytest.approx(100 * (1 - 7 / 8))
    assert recognition_scores(["a c"], ["ac"], ignore_space=False)["exact_match"] == 0.0


def test_ocr_rec_task():
    task = make_task("ocr_rec", {"dictionary": list(DICTIONARY)})
    outputs = [np.stack([ctc_scores([1, 0, 2, 0]), ctc_scores([3, 3, 0, 0])])]
    assert task.evaluate(outputs, ["ab", "cc"]) == {"exact_match": 50.0, "char_accuracy": 75.0}
    assert task.postprocess(outputs) == [{"text": "ab", "confidence": pytest.approx(0.9)},
                                         {"text": "c", "confidence": pytest.approx(0.9)}]
    without_space = make_task("ocr_rec", {"dictionary": list(DICTIONARY), "use_space_char": False})
    with pytest.raises(DataError, match="5 classes, the dictionary gives 4"):
        without_space.evaluate(outputs, ["ab", "cc"])
    with pytest.raises(DataError, match="lacks"):
        task.truth_from_json(["abz"])
    assert task.truth_from_json(["a b"]) == ["a b"]


def test_read_dictionary_from_text_and_onnx(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    (tmp_path / "keys.txt").write_text("a\nb\n中\n", encoding="utf-8")
    assert read_dictionary(tmp_path / "keys.txt") == ("a", "b", "中")
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph)
    helper.set_model_props(model, {"character": "x\ny\n'"})
    onnx.save(model, str(tmp_path / "rec.onnx"))
    assert read_dictionary(tmp_path / "rec.onnx") == ("x", "y", "'")
    assert make_task("ocr_rec", {"dictionary": str(tmp_path / "rec.onnx")}).characters == ("", "x", "y", "'", " ")
    helper.set_model_props(model, {})
    onnx.save(model, str(tmp_path / "plain.onnx"))
    with pytest.raises(ConfigError, match="no `character` metadata"):
        read_dictionary(tmp_path / "plain.onnx")
    (tmp_path / "bad.txt").write_text("a\n\nb\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="line 2 is '': empty"):
        read_dictionary(tmp_path / "bad.txt")


FLAGS = ["\U0001F1E9\U0001F1EA", "\U0001F1EF\U0001F1F5"]            # 🇩🇪 🇯🇵: two code points each, one class
FAMILY = "\U0001F468\u200D\U0001F469\u200D\U0001F467"                # a ZWJ sequence: five code points


def test_ocr_rec_dictionary_tokens_of_several_code_points(tmp_path):
    """PaddleOCR dictionaries are lists of tokens: PP-OCRv5's has flags (two code points) as classes."""
    import onnx
    from onnx import TensorProto, helper

    tokens = ["a", "\u3000"] + FLAGS + [FAMILY, "ff"]
    (tmp_path / "dict.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    assert read_dictionary(tmp_path / "dict.txt") == tuple(tokens)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph)
    helper.set_model_props(model, {"character": "\n".join(tokens)})     # the ONNX metadata route
    onnx.save(model, str(tmp_path / "rec.onnx"))
    assert read_dictionary(tmp_path / "rec.onnx") == tuple(tokens)
    task = make_task("ocr_rec", {"dictionary": tokens})
    assert make_task("ocr_rec", task.options()) == task
    classes = len(tokens) + 2
    path = [3, 3, 0, 4, 5, 0, 5, 1, 6, classes - 1, 2]               # flag, flag, family, family, a, ff, space, ideographic space
    probs = np.full((1, len(path), classes), 0.01, np.float32)
    probs[0, np.arange(len(path)), path] = 0.9
    (text, confidence), = task.decode([probs])
    assert text == FLAGS[0] + FLAGS[1] + FAMILY + FAMILY + "a" + "ff" + " " + "\u3000"
    assert confidence == pytest.approx(0.9)
    assert task.truth_from_json([FLAGS[1] + "a"]) == [FLAGS[1] + "a"]
    assert task.evaluate([probs], [text])["exact_match"] == 100.0
    with pytest.raises(DataError, match="lacks"):
        task.truth_from_json(["b"])
    for bad, why in (([""], "empty"), (["a", 7], "not a string"), (["a\nb"], "line break")):
        with pytest.raises(ConfigError, match=why):
            make_task("ocr_rec", {"dictionary": bad})


# --- direction classifier and classification -----------------------------------------------------

def test_ocr_cls_task():
    task = make_task("ocr_cls")
    scores = np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4], [0.2, 0.8]], np.float32)
    assert task.evaluate([scores], [0, 1, 1, 1]) == {"accuracy": 75.0}
    assert [r["label"] for r in task.postprocess([scores])] == ["0", "180", "0", "180"]
    with pytest.raises(DataError, match="0..1"):
        task.truth_from_json([0, 2])


def test_classification_task_logits_and_probabilities():
    task = make_task("classification", {"labels": ["cat", "dog", "eel"]})
    logits = np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 5.0]], np.float32)
    assert task.evaluate([logits], [0, 1]) == {"top1": 50.0}
    first, _ = task.postprocess([logits])
    assert first["label"] == "cat" and first["score"] == pytest.approx(np.exp(2) / np.exp([2, 1, 0]).sum(), abs=1e-6)
    probs = np.array([[0.2, 0.5, 0.3]], np.float32)                   # already a distribution: kept as is
    assert task.postprocess([probs])[0] == {"class": 1, "label": "dog", "score": pytest.approx(0.5)}


def test_task_table_and_options():
    for kind, info in TASKS.items():
        options = {"dictionary": list(DICTIONARY)} if kind is TaskKind.ocr_rec else {}
        task = make_task(kind.value, options)
        assert task.primary == info.metrics[0]
        assert make_task(kind, task.options()) == task          # options() rebuilds the same task
    with pytest.raises(ConfigError, match="not known"):
        make_task("pose")
    with pytest.raises(ConfigError, match="unknown option"):
        make_task("ocr_det", {"treshold": 0.3})
    with pytest.raises(ConfigError, match="box_thresh"):
        make_task("ocr_det", {"box_thresh": 2})
    with pytest.raises(ConfigError, match="dictionary"):
        make_task("ocr_rec")


def test_every_metric_is_declared():
    outputs = {TaskKind.classification: ([np.eye(2)], [0, 1]), TaskKind.ocr_det: ([blob_map()], [[(1, 1, 29, 19), (37, 22, 73, 34)]]),
               TaskKind.ocr_rec: ([ctc_scores([1, 2])[None]], ["ab"]), TaskKind.ocr_cls: ([np.eye(2)], [0, 1])}
    for kind, (out, truth) in outputs.items():
        task = make_task(kind, {"dictionary": list(DICTIONARY)} if kind is TaskKind.ocr_rec else {})
        assert set(task.evaluate(out, truth)) == set(TASKS[kind].metrics)
        assert task.score(out, truth) == task.evaluate(out, truth)[task.primary] == 100.0


# --- truth files ----------------------------------------------------------------------------------

def test_truth_round_trip(tmp_path):
    task = make_task("ocr_rec", {"dictionary": list(DICTIONARY)})
    data = tmp_path / "rec_eval.npz"
    assert truth_file(data) == tmp_path / "rec_eval.truth.json"
    assert truth_file(tmp_path / "images") == tmp_path / "images" / "truth.json"
    assert find_truth(data) is None
    write_truth(truth_file(data), task, ["ab", "c"], {"seed": 3})
    first = truth_file(data).read_bytes()
    write_truth(truth_file(data), task, ["ab", "c"], {"seed": 3})
    assert truth_file(data).read_bytes() == first                    # deterministic bytes
    truth = find_truth(data, samples=2)
    assert truth.task == task and truth.values == ["ab", "c"] and truth.meta == {"seed": 3}
    with pytest.raises(DataError, match="2 entries for 3"):
        read_truth(truth_file(data), samples=3)
    det = make_task("ocr_det")
    write_truth(tmp_path / "det.truth.json", det, [[(1, 2, 3, 4)], []])
    assert read_truth(tmp_path / "det.truth.json").values == [[(1.0, 2.0, 3.0, 4.0)], []]


def test_bad_truth_files(tmp_path):
    path = tmp_path / "x.truth.json"
    path.write_text("{nope", encoding="utf-8")
    with pytest.raises(DataError, match="not valid JSON"):
        read_truth(path)
    path.write_text(json.dumps({"truth": []}), encoding="utf-8")
    with pytest.raises(DataError, match="not an edgekit truth file"):
        read_truth(path)
    base = {"format": "edgekit-truth/1", "task": "ocr_cls", "options": {}, "count": 2, "truth": [0, 1]}
    path.write_text(json.dumps(dict(base, task="ocr_xyz")), encoding="utf-8")
    with pytest.raises(DataError, match="ocr_xyz"):
        read_truth(path)
    path.write_text(json.dumps(dict(base, count=3)), encoding="utf-8")
    with pytest.raises(DataError, match="count 3"):
        read_truth(path)
    path.write_text(json.dumps(dict(base, task="ocr_det", truth=[[[5, 0, 1, 1]], []])), encoding="utf-8")
    with pytest.raises(DataError, match=r"\[x0, y0, x1, y1\] rectangles"):
        read_truth(path)


# --- the PP-OCR example's renderer (OpenCV only, no model) -------------------------------------

def test_line_tensor_keeps_aspect_and_pads_with_zero():
    image = np.full((24, 40, 3), 255, np.uint8)
    image[:, :20] = 0
    x = line_tensor(image, 48, 320)
    assert x.shape == (3, 48, 320) and x.dtype == np.float32
    assert np.all(x[:, :, :36] == -1.0) and np.all(x[:, :, 44:80] == 1.0)   # black -> -1, white -> 1 (80 px wide)
    assert np.all(x[:, :, 80:] == 0.0)                                       # padding is the normalised mid-grey
    assert line_tensor(np.zeros((10, 1000, 3), np.uint8), 48, 320).shape == (3, 48, 320)


def test_rendered_pages_are_deterministic_and_boxes_hold_the_ink():
    from edgekit.examples.ppocr.make_data import ALPHABET, det_set, rec_set, render_page

    page, boxes = render_page(np.random.default_rng(5))
    again, boxes_again = render_page(np.random.default_rng(5))
    assert np.array_equal(page, again) and boxes == boxes_again
    assert 2 <= len(boxes) <= 5
    ink = page.min(axis=2) < 150
    inside = np.zeros_like(ink)
    for x0, y0, x1, y1 in boxes:
        assert 0 <= x0 < x1 <= 640 and 0 <= y0 < y1 <= 320
        inside[int(y0):int(y1), int(x0):int(x1)] = True
    assert ink.any() and not (ink & ~inside).any()                            # no ink outside the true boxes
    inputs, texts, _ = rec_set(7, 4)
    assert inputs.shape == (4, 3, 48, 320) and all(set(t) <= set(ALPHABET) for t in texts)
    inputs, truth, _ = det_set(1, 2)
    assert inputs.shape == (2, 3, 320, 640) and inputs.min() >= -1 and inputs.max() <= 1 and len(truth) == 2


def test_cls_set_pairs_each_line_with_its_rotation():
    from edgekit.examples.ppocr.make_data import cls_set

    inputs, labels, _ = cls_set(3, 3)
    assert labels == [0, 1, 0, 1, 0, 1] and inputs.shape == (6, 3, 48, 192)
    assert not np.array_equal(inputs[0], inputs[1])


def test_save_npz_is_byte_identical(tmp_path):
    from edgekit.examples.ppocr.make_data import save_npz

    arrays = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}
    save_npz(tmp_path / "a.npz", arrays)
    save_npz(tmp_path / "b.npz", arrays)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    with np.load(tmp_path / "a.npz") as loaded:
        assert np.array_equal(loaded["x"], arrays["x"])


def test_models_without_the_wheel(monkeypatch):
    from edgekit.examples.ppocr import models

    monkeypatch.setattr(models, "find_spec", lambda name: None)
    with pytest.raises(InputModelError, match="rapidocr_onnxruntime") as error:
        models.model_path("rec")
    assert "pip install rapidocr_onnxruntime==1.4.4" in error.value.hint
    with pytest.raises(InputModelError, match="no PP-OCR model"):
        models.model_path("layout")
