"""The quantisation report of a detection search: mAP@0.5, mAP@0.5:0.95 and mAP per object size for the FP32
reference and each INT8 candidate, and the layers' and fallback steps' effect in those mAP points (pure logic)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgekit.model.artifacts import QuantizedModel, StaticModel
from edgekit.model.data import Samples
from edgekit.model.evalset import EvalSet
from edgekit.quantize.report import breakdown, layer_rows, render_markdown
from edgekit.quantize.search import Candidate, QuantSearchResult, ScoreStore, SearchPlan
from edgekit.quantize.sensitivity import Budget, Evaluator, Fallback, QuantLayer, Score, Step, rank
from edgekit.tasks import make_task

MAP50 = Budget.for_data(1.0, "map50")
KEYS = ("map50", "map", "map_small", "map_medium", "map_large", "f1")
REFERENCE = dict(zip(KEYS, (70.0, 50.0, 46.0, 78.0, 0.0, 62.0)))


def _score(cosine: float, values: tuple[float, ...]) -> Score:
    metrics = dict(zip(KEYS, values))
    drops = {k: REFERENCE[k] - v for k, v in metrics.items()}
    return Score(cosine, 20.0, metrics["map50"], drops["map50"], metrics, drops)


def _result() -> QuantSearchResult:
    layers = (QuantLayer(0, "conv2d", "conv2d_0.w_0", "c0", 216), QuantLayer(1, "conv2d", "conv2d_1.w_0", "c1", 576))
    algo = Candidate("avg", (), _score(0.95, (67.5, 47.0, 38.0, 77.0, 0.0, 60.0)), False, "algorithm", 48, False, 1.0)
    hist = Candidate("hist", (), _score(0.96, (68.0, 48.0, 40.0, 77.5, 0.0, 60.0)), False, "algorithm", 48, False, 1.0)
    # the sensitivity runs (on 16 ranking samples): only one layer in int8 at a time
    alone0 = _score(0.999, (69.8, 49.9, 45.5, 78.0, 0.0, 61.0))
    alone1 = _score(0.97, (68.5, 48.0, 39.5, 77.8, 0.0, 60.5))
    sens = [Candidate("hist", ("conv2d_1.w_0",), alone0, False, "sensitivity", 16, False, 1.0),
            Candidate("hist", ("conv2d_0.w_0",), alone1, False, "sensitivity", 16, False, 1.0)]
    fixed = Candidate("hist", ("conv2d_1.w_0",), _score(0.998, (69.5, 49.6, 45.0, 77.9, 0.0, 61.5)), True,
                      "fallback", 48, False, 1.0)
    ranked = rank([(layers[0], alone0, 1e-3), (layers[1], alone1, 3e-2)])
    steps = (Step((), hist.score, False, "start"), Step(("conv2d_1.w_0",), fixed.score, True, "add"))
    dummy = StaticModel(Path("q/model.pdmodel"), Path("q/model.pdiparams"), (), (), "paddleslim-ptq")
    return QuantSearchResult(QuantizedModel(dummy, "hist", 32, 1.0), fixed, MAP50, 70.0, layers,
                             (algo, hist, *sens, fixed), ranked, Fallback(fixed.skip, fixed.score, True, steps),
                             SearchPlan(MAP50, ("avg", "hist")), 48, 3, (), "map50", dict(REFERENCE))


def test_map_by_object_size_for_fp32_and_each_candidate():
    text = render_markdown(_result())
    assert "## mAP by object size" in text
    assert "| model | mAP@0.5 | mAP@0.5:0.95 | small | medium | large |" in text
    assert "| FP32 reference | 70.00 | 50.00 | 46.00 | 78.00 | 0.00 |" in text
    assert "| INT8 #0 algorithm `avg` | 67.50 (−2.50) | 47.00 (−3.00) | 38.00 (−8.00) | 77.00 (−1.00) | " \
           "0.00 (+0.00) |" in text
    assert "| **INT8 #4 fallback `hist`, float `conv2d_1.w_0` (chosen)** | 69.50 (−0.50) | 49.60 (−0.40) | " \
           "45.00 (−1.00) | 77.90 (−0.10) | 0.00 (+0.00) |" in text
    table = text.split("## mAP by object size")[1].split("## Layers")[0]
    assert "sensitivity" not in table                  # scored on the ranking samples only: not comparable


def test_layers_and_fallback_steps_in_map_points():
    result = _result()
    text = render_markdown(result)
    assert ("| # | layer | op | weights | source | rank | sensitivity | cosine | mAP@0.5 drop | mAP@0.5:0.95 drop | "
            "small drop | medium drop | large drop | precision |") in text
    # layer 1 alone in int8 costs 1.5 points of mAP@0.5 and 6.5 of small-object mAP: it stays float
    assert "| 1 | `conv2d_1.w_0` | conv2d | 576 |  | 1 | 0.03 | 0.970000 | 1.50 | 2.00 | 6.50 | 0.20 | 0.00 | float |" \
        in text
    assert "The drops are in mAP points" in text
    rows = layer_rows(result)
    assert rows[0]["metric_drops"]["map_small"] == pytest.approx(0.5)
    assert "- add: float = conv2d_1.w_0: drop 0.5 (holds), mAP@0.5 69.50 (−0.50), mAP@0.5:0.95 49.60 (−0.40), " \
           "small 45.00 (−1.00), medium 77.90 (−0.10), large 0.00 (+0.00)" in text
    assert result.to_json()["reference_metrics"]["map_small"] == 46.0


def test_other_tasks_and_old_scores_keep_the_plain_report():
    result = _result()
    plain = QuantSearchResult(result.quantized, result.chosen, result.budget, 70.0, result.layers, result.candidates,
                              result.sensitivity, result.fallback, result.plan, 48, 3, (), "top1", {"top1": 70.0})
    assert breakdown(plain) == () and "mAP by object size" not in render_markdown(plain)
    assert "| top1 drop | precision |" in render_markdown(plain)
    # a candidate without the breakdown (e.g. NaN outputs before metrics were kept) shows dashes, never a crash
    old = Candidate("avg", (), Score(0.9, 10.0, 60.0, 10.0), False, "algorithm", 48, False, 1.0)
    text = render_markdown(QuantSearchResult(result.quantized, old, MAP50, 70.0, result.layers, (old,), (), None,
                                             SearchPlan(MAP50), 48, 1, (), "map50", dict(REFERENCE)))
    assert "| **INT8 #0 algorithm `avg` (chosen)** | — | — | — | — | — |" in text


def test_score_store_keeps_the_breakdown_and_rescoring_old_entries(tmp_path):
    store = ScoreStore(tmp_path)
    score = _score(0.99, (69.0, 49.0, 44.0, 77.0, 0.0, 61.0))
    store.put("k", score)
    again = ScoreStore(tmp_path).get("k")
    assert again == score and again.metric_drops["map_small"] == pytest.approx(2.0)
    (tmp_path / "scores" / "old.json").write_text('{"cosine": 0.99, "snr_db": 20.0, "task": 69.0, "task_drop": 1.0}')
    assert ScoreStore(tmp_path).get("old") is None           # an older cache's score: scored again (calibration kept)


def _decoded(boxes: list[list[float]], scores: list[float], classes: int = 2) -> list[np.ndarray]:
    """A `decoded` head's outputs for one image: boxes [1, M, 4], scores [1, M, C] (probabilities of class 0)."""
    probs = np.zeros((1, len(boxes), classes), np.float32)
    probs[0, :, 0] = scores
    return [np.asarray([boxes], np.float32), probs]


def test_evaluator_scores_detection_in_every_bucket():
    """The real Evaluator: every metric of the task per candidate and its drop from FP32 on the same samples."""
    task = make_task("detection", {"head": "decoded", "activation": "none", "num_classes": 2})
    truth = ({"boxes": [[0.0, 0.0, 10.0, 10.0], [20.0, 20.0, 80.0, 80.0]], "classes": [0, 0]},)
    reference = _decoded([[0, 0, 10, 10], [20, 20, 80, 80]], [0.9, 0.8])
    judge = Evaluator(reference, EvalSet(Samples({"x": np.zeros((1, 1), np.float32)}), task, truth))
    assert judge.reference_metrics["map_small"] == 100.0 and judge.reference_metrics["map_medium"] == 100.0
    lost_small = judge.score_outputs(_decoded([[30, 30, 40, 40], [20, 20, 80, 80]], [0.9, 0.8]))
    assert lost_small.metrics["map_small"] == 0.0 and lost_small.metric_drops["map_small"] == 100.0
    assert lost_small.metric_drops["map_medium"] == 0.0 and lost_small.task_drop == lost_small.metric_drops["map50"]
    nan = judge.score_outputs([np.full_like(reference[0], np.nan), reference[1]])
    assert nan.metrics["map_small"] == 0.0 and nan.task == 0.0


# ---------------------------------------------------------------- the INT8 self-test's matching (C++ twin: selftest.cc)

def test_golden_detections_matched_like_map():
    """The cases of native/app/tests/test_vision.cc's detections_matched_like_map: the same figures."""
    from edgekit.tasks.detection import match_detections

    want = [{"box": [0, 0, 10, 10], "class": 1, "score": 0.9}, {"box": [20, 20, 30, 30], "class": 0, "score": 0.6},
            {"box": [50, 50, 60, 60], "class": 0, "score": 0.2}]
    got = [{"box": [20, 20, 30, 31], "class": 0, "score": 0.45}, {"box": [0, 0, 10, 10], "class": 1, "score": 0.95},
           {"box": [70, 70, 80, 80], "class": 2, "score": 0.1}]
    m = match_detections(want, got, 0.5)
    assert (m["expected"], m["found"], m["recall"], m["confident"], m["precision"]) == (2, 2, 1.0, 1, 1.0)
    assert m["min_iou"] == pytest.approx(100 / 110)
    bad = match_detections(want, [{"box": [5, 5, 15, 15], "class": 1, "score": 0.9},
                                  {"box": [20, 20, 30, 30], "class": 2, "score": 0.8}], 0.5)
    assert (bad["found"], bad["recall"], bad["precision"], bad["min_iou"]) == (0, 0.0, 0.0, None)
    assert match_detections([], [], 0.5)["recall"] == 1.0 == match_detections([], [], 0.5)["precision"]
    # greedy per class, best score first: the better box takes the truth it overlaps most
    two = [{"box": [0, 0, 10, 10], "class": 0, "score": 0.9}, {"box": [0, 0, 10, 12], "class": 0, "score": 0.8}]
    assert match_detections(two, [{"box": [0, 0, 10, 11], "class": 0, "score": 0.7}], 0.5)["recall"] == 0.5


def test_golden_tolerance_from_the_worst_image():
    from edgekit.tasks.detection import golden_tolerance, match_summary

    per_image = [{"expected": 4, "found": 4, "recall": 1.0, "confident": 5, "confirmed": 4, "precision": 0.8,
                  "min_iou": 0.93}, {"expected": 0, "found": 0, "recall": 1.0, "confident": 0, "confirmed": 0,
                                     "precision": 1.0, "min_iou": None}]
    summary = match_summary(per_image)
    assert summary == {"images": 2, "min_recall": 1.0, "min_precision": 0.8, "recall": 1.0, "precision": 0.8,
                       "min_iou": 0.93}
    tolerance = golden_tolerance(summary, "C", 0.5)
    assert (tolerance["min_recall"], tolerance["min_precision"], tolerance["min_iou"]) == (0.9, 0.7, 0.5)
    assert tolerance["measured"]["tier"] == "C" and "tier C on 2 evaluation images" in tolerance["basis"]
    assert golden_tolerance(dict(summary, min_recall=0.05), "B", 0.5)["min_recall"] == 0.0
