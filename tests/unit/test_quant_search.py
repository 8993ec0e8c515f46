"""The pure parts of the INT8 search: budget, ranking, the fallback loop, cache keys and stores, the report."""

from __future__ import annotations

import re

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from edgekit.model.artifacts import QuantizedModel, StaticModel
from edgekit.contracts.settings import InputSpec, QuantConfig
from edgekit.model.data import Samples
from edgekit.model.evalset import EvalSet
from edgekit.core.errors import ConfigError, QuantizeError
from edgekit.tasks import make_task
from edgekit.quantize.report import layer_rows, plot_sensitivity, render_markdown
from edgekit.quantize.search import (Calibrator, Candidate, QuantSearchResult, ScoreStore, SearchPlan,
                                     calibration_settings, cache_key, choose, quantize_to_budget)
from edgekit.quantize.sensitivity import (Budget, Eta, Evaluator, QuantLayer, Score, analyse, fallback,
                                          max_float_layers, rank)

COSINE = Budget.for_data(0.01, None)
TOP1 = Budget.for_data(1.0, "top1")


def _layer(index: int, key: str, op: str = "conv2d", weights: int = 100) -> QuantLayer:
    return QuantLayer(index, op, key, f"{key}.out", weights)


def _additive(errors: dict[str, float], calls: list | None = None):
    """A fake evaluate(skip): each layer left in int8 adds its error to 1 - cosine."""
    def evaluate(skip):
        if calls is not None:
            calls.append(tuple(skip))
        error = sum(e for k, e in errors.items() if k not in skip)
        return Score(1.0 - error, 20.0)
    return evaluate


# ---------------------------------------------------------------- budget and scores


def test_budget_uses_the_parity_gates_comparisons():
    assert TOP1.metric == "top1_drop_points" and COSINE.metric == "cosine_drop"
    assert TOP1.holds(Score(0.5, 1.0, 90.0, 1.0)) and not TOP1.holds(Score(1.0, 99.0, 90.0, 1.0001))
    assert COSINE.holds(Score(0.99, 20.0)) and not COSINE.holds(Score(0.9899, 20.0))
    assert COSINE.drop(Score(0.97, 1.0)) == pytest.approx(0.03)
    assert TOP1.drop(Score(0.9, 1.0, 95.0, -0.5)) == -0.5
    with pytest.raises(ConfigError, match="needs evaluation data with ground truth"):
        TOP1.drop(Score(0.99, 20.0))
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="max-drop"):
            Budget.for_data(bad, "top1")
    assert not Budget.for_data(-0.5, "top1").holds(Score(1.0, 99.0, 90.0, 0.0))    # a negative budget asks for a gain
    for bad in ("top5", "_drop_points", "cosine"):
        with pytest.raises(ConfigError, match="metric"):
            Budget(1.0, bad)
    ocr = Budget.for_data(2.0, "exact_match")
    assert ocr.metric == "exact_match_drop_points" and ocr.task_metric == "exact_match" and COSINE.task_metric is None
    assert ocr.describe() == "drop ≤ 2 exact_match points" and ocr.holds(Score(0.9, 10.0, 98.0, 2.0))


def test_evaluator_scores_against_the_reference():
    reference = [np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 4.0], [2.0, 1.0, 0.0]])]
    labels = np.array([0, 1, 2, 1])                       # the reference gets 3 of 4: 75 %
    judge = Evaluator(reference, EvalSet(Samples({"x": np.zeros((4, 1))}, labels), make_task("classification"), tuple(labels)))
    assert judge.reference_task == 75.0 and judge.metric == "top1"
    same = judge.score_outputs(reference)
    assert same.cosine == pytest.approx(1.0) and same.task_drop == 0.0 and same.error == pytest.approx(0.0)
    swapped = reference[0][:, [1, 0, 2]]                  # first two classes exchanged: 2 of 4 right
    worse = judge.score_outputs([swapped])
    assert worse.task == 50.0 and worse.task_drop == 25.0 and worse.cosine < 0.9
    nan = judge.score_outputs([np.full_like(reference[0], np.nan)])
    assert nan.cosine == 0.0 and nan.snr_db == -np.inf and nan.task == 0.0
    unlabelled = Evaluator(reference, EvalSet(Samples({"x": np.zeros((4, 1))})))
    assert not unlabelled.has_truth and unlabelled.score_outputs([swapped]).task is None
    assert unlabelled.digest() != judge.digest() != Evaluator(
        reference, EvalSet(judge.samples, make_task("classification"), (0, 1, 2, 2))).digest()
    with pytest.raises(ValueError, match="both"):
        EvalSet(judge.samples, None, tuple(labels))


def test_evaluator_spread_keeps_samples_reference_and_truth_aligned():
    reference = [np.eye(5)[[0, 1, 2, 3, 4, 0, 1, 2, 3, 4]] * 3.0]
    labels = np.array([0, 1, 2, 3, 4, 0, 1, 2, 3, 0])       # the last one is wrong
    samples = Samples({"x": np.arange(10, dtype=np.float32)[:, None]}, labels)
    judge = Evaluator(reference, EvalSet(samples, make_task("classification"), tuple(labels)))
    part = judge.spread(4)
    picks = [int(i) for i in part.samples.inputs["x"][:, 0]]
    assert picks == [0, 3, 6, 9] and list(part.truth) == [labels[i] for i in picks]
    assert np.array_equal(part.reference[0], reference[0][picks]) and part.reference_task == 75.0
    assert judge.spread(0) is judge and judge.spread(10) is judge


def test_evaluator_scores_ocr_recognition_in_exact_match():
    """A recogniser's budget is in exact-match points: one line read wrong out of two is 50 points."""
    task = make_task("ocr_rec", {"dictionary": ["a", "b"], "use_space_char": False})
    blank, a, b = np.eye(3) * 0.8 + 0.1                 # one-hot-ish scores over blank, a, b
    reference = [np.stack([[a, blank, b, blank], [b, blank, blank, blank]])]      # "ab", "b"
    judge = Evaluator(reference, EvalSet(Samples({"x": np.zeros((2, 1))}), task, ("ab", "b")))
    assert judge.metric == "exact_match" and judge.reference_task == 100.0
    misread = [np.stack([[a, blank, a, blank], [b, blank, blank, blank]])]         # "aa", "b"
    score = judge.score_outputs(misread)
    assert score.task == 50.0 and score.task_drop == 50.0 and 0.5 < score.cosine < 1.0
    assert not Budget.for_data(2.0, "exact_match").holds(score)


def test_a_max_changed_budget_also_counts_the_samples_read_unlike_fp32():
    """The PP-OCRv5 rec's INT8 kept its exact lines (99 = FP32's 99) and still read 2 of 48 page lines unlike
    PaddleOCR: a line wrong in both, or right in one and wrong in another, does not move the count."""
    budget = Budget.for_data(1.0, "exact_match")
    strict = replace(budget, max_changed=1.0)
    same_count = Score(0.97, 20.0, 99.0, 0.0, agreement=96.0)     # 4 of 100 lines read otherwise, none lost
    assert budget.holds(same_count) and not strict.holds(same_count)
    assert same_count.changed == pytest.approx(4.0) and strict.excess(same_count) == pytest.approx(3.0)
    assert strict.holds(Score(0.99, 20.0, 98.0, 1.0, agreement=99.0))
    assert budget.excess(same_count) == pytest.approx(-1.0)      # without max_changed: the drop alone
    assert strict.describe() == "drop ≤ 1 exact_match points, ≤ 1 % of samples read unlike FP32"
    assert replace(Budget.for_data(1.0, "map50"), max_changed=2.0).describe() == \
        "drop ≤ 1 map50 points, ≤ 2 map50 points against FP32's results"
    with pytest.raises(ConfigError, match="agreement"):
        strict.holds(Score(0.99, 20.0, 99.0, 0.0))               # a score without it cannot be judged
    # the gate on the search's choice: a miss fails the build as a missed drop does
    assert budget.changed_check(same_count) is None
    check = strict.changed_check(same_count)
    assert not check.passed and (check.metric, check.value, check.limit) == ("exact_match_changed", 4.0, 1.0)
    assert strict.changed_check(Score(0.99, 20.0, 98.0, 1.0, agreement=99.0)).passed
    assert not strict.changed_check(Score(0.99, 20.0, 98.0, 1.0)).passed      # unknown agreement never passes
    boxes = replace(Budget.for_data(1.0, "map50"), max_changed=2.0)
    assert strict.changed_text(same_count) == ", 4 % changed"
    assert boxes.changed_text(same_count) == ", 4 points changed"
    for bad in (-1.0, 101.0, float("nan")):
        with pytest.raises(ConfigError, match="max_changed"):
            replace(budget, max_changed=bad)
    with pytest.raises(ConfigError, match="max_changed needs evaluation data with ground truth"):
        replace(COSINE, max_changed=1.0)


def test_evaluator_scores_the_agreement_with_the_fp32_results():
    task = make_task("ocr_rec", {"dictionary": ["a", "b"], "use_space_char": False})
    blank, a, b = np.eye(3) * 0.8 + 0.1
    reference = [np.stack([[a, blank, a, blank], [b, blank, blank, blank]])]       # "aa" (wrong), "b"
    judge = Evaluator(reference, EvalSet(Samples({"x": np.zeros((2, 1))}), task, ("ab", "b")))
    other = judge.score_outputs([np.stack([[b, blank, a, blank], [b, blank, blank, blank]])])   # "ba", "b"
    assert other.task_drop == 0.0 and other.agreement == 50.0       # same count, one line read otherwise
    assert judge.score_outputs(reference).agreement == 100.0
    assert judge.score_outputs([np.full_like(reference[0], np.nan)]).agreement == 0.0
    assert Score(0.9, 1.0, 50.0, 0.0, agreement=50.0).to_json()["agreement"] == 50.0


# ---------------------------------------------------------------- ranking and analysis


def test_rank_most_sensitive_first_ties_in_program_order():
    layers = [_layer(i, k) for i, k in enumerate("abcd")]
    ranked = rank([(layers[0], Score(0.9, 1), 0.1), (layers[1], Score(0.5, 1), 0.5),
                   (layers[2], Score(0.9, 1), 0.1), (layers[3], Score(0.0, 1), float("nan"))])
    assert [s.layer.key for s in ranked] == ["d", "b", "a", "c"]      # NaN counts as the worst
    assert [s.rank for s in ranked] == [1, 2, 3, 4]


def _lines(errors: dict[str, float], broken: dict[str, int], total: int = 100):
    """A fake evaluate(skip) with truth: each int8 layer adds its error to 1 - cosine and breaks its lines."""
    def evaluate(skip):
        error = sum(e for k, e in errors.items() if k not in skip)
        lost = sum(n for k, n in broken.items() if k not in skip)
        return Score(1.0 - error, 20.0, 100.0 * (total - lost) / total, 100.0 * lost / total)
    return evaluate


def test_with_truth_the_layers_that_cost_task_points_rank_first():
    """The budget is in task points: on the PP-OCRv5 rec, conv2d_141 alone in int8 lost 3 lines of 100 and ranked
    ninth by cosine. Ranked by points first, the fallback floats it first and meets a 1-point budget with one
    float layer instead of four."""
    errors = {"a": 0.02, "b": 0.015, "c": 0.012, "d": 0.001}     # the cosine order: a, b, c, d
    broken = {"d": 3}                                            # but only d breaks lines
    layers = [_layer(i, k) for i, k in enumerate("abcd")]
    evaluate = _lines(errors, broken)
    full = evaluate(())
    by_task = analyse(layers, evaluate, full, "alone")
    assert [s.layer.key for s in by_task] == ["d", "a", "b", "c"] and by_task[0].points == pytest.approx(3.0)
    assert [s.points for s in by_task[1:]] == [0.0, 0.0, 0.0]
    by_error = analyse(layers, evaluate, full, "alone", "error")
    assert [s.layer.key for s in by_error] == ["a", "b", "c", "d"]
    budget = Budget.for_data(1.0, "exact_match")
    assert fallback([s.layer.key for s in by_task], evaluate, budget, 3, start=full).skip == ("d",)
    chosen = fallback([s.layer.key for s in by_error], evaluate, budget, 3, start=full)
    assert not chosen.holds and len(chosen.steps) == 4        # a, b, c floated: the limit, still 3 points down
    # all-but: the points a layer wins back when it alone is float
    assert [s.layer.key for s in analyse(layers, evaluate, full, "all-but")] == ["d", "a", "b", "c"]
    with pytest.raises(ConfigError, match="rank_by"):
        analyse(layers, evaluate, full, "alone", "points")


def test_ranking_points_are_never_below_zero_and_absent_without_truth():
    layers = [_layer(i, k) for i, k in enumerate("abc")]
    ranked = rank([(layers[0], Score(0.7, 1), 0.3, -2.0), (layers[1], Score(0.8, 1), 0.2, None),
                   (layers[2], Score(0.95, 1), 0.05, 1.0)])
    assert [s.layer.key for s in ranked] == ["c", "a", "b"]      # a read better than FP32: 0 points, not -2
    evaluate = _additive({"a": 0.1, "b": 0.2})
    assert all(s.points is None for s in analyse(layers[:2], evaluate, evaluate(()), "alone"))


def test_with_a_max_changed_budget_layers_rank_by_the_samples_they_change():
    """A layer that changes readings without changing the exact-line count ranks first when the budget counts them;
    the fallback floats it and meets max_changed."""
    def evaluate(skip):
        changed = (3 if "c" not in skip else 0) + (1 if "a" not in skip else 0)
        return Score(1.0 - (0.02 if "a" not in skip else 0.0) - (0.001 if "c" not in skip else 0.0), 20.0,
                     99.0, 0.0, agreement=100.0 - changed)
    layers = [_layer(i, k) for i, k in enumerate("abc")]
    full = evaluate(())
    assert [s.layer.key for s in analyse(layers, evaluate, full, "alone")] == ["a", "c", "b"]   # no points lost
    ranked = analyse(layers, evaluate, full, "alone", changed=True)
    assert [s.layer.key for s in ranked] == ["c", "a", "b"] and [s.points for s in ranked] == [3.0, 1.0, 0.0]
    assert [s.layer.key for s in analyse(layers, evaluate, full, "all-but", changed=True)] == ["c", "a", "b"]
    budget = replace(Budget.for_data(1.0, "exact_match"), max_changed=1.0)
    assert fallback([s.layer.key for s in ranked], evaluate, budget, 2, start=full).skip == ("c",)
    missed = fallback(["b", "a"], evaluate, budget, 2, start=full)
    assert not missed.holds and missed.skip == ("b", "a")        # the best miss by excess: 3 % changed, not 4


@pytest.mark.parametrize("method,expected_skips", [
    ("alone", [("b", "c"), ("a", "c"), ("a", "b")]),      # everything but the layer is float
    ("all-but", [("a",), ("b",), ("c",)]),                # only the layer is float
])
def test_analyse_measures_each_layer_with_its_method(method, expected_skips):
    errors = {"a": 0.001, "b": 0.2, "c": 0.01}
    calls: list = []
    layers = [_layer(0, "a"), _layer(1, "b"), _layer(2, "c"), _layer(3, "", "matmul_v2", 0)]   # no skip key: not measured
    evaluate = _additive(errors, calls)
    ranked = analyse(layers, evaluate, evaluate(()), method)
    assert calls[1:] == expected_skips
    assert [s.layer.key for s in ranked] == ["b", "c", "a"]
    assert ranked[0].value == pytest.approx(0.2)
    with pytest.raises(ConfigError, match="sensitivity method"):
        analyse(layers, evaluate, evaluate(()), "random")


# ---------------------------------------------------------------- the fallback loop


def test_fallback_adds_ranked_layers_until_the_budget_holds():
    errors = {"w": 0.05, "x": 0.008, "y": 0.004, "z": 0.001}
    calls: list = []
    result = fallback(["w", "x", "y", "z"], _additive(errors, calls), COSINE, max_float=3)
    # 0.063 -> 0.013 (w float) -> 0.005 (w, x float): holds; pruning x or w back to int8 breaks it
    assert result.holds and result.skip == ("w", "x")
    assert [s.phase for s in result.steps] == ["start", "add", "add", "prune"]
    assert calls == [(), ("w",), ("w", "x"), ("x",)]


def test_fallback_prunes_layers_the_budget_does_not_need():
    # the ranking puts "a" first, but "b" alone is what matters once both are float
    def evaluate(skip):
        error = 0.02 if "b" not in skip else (0.002 if "a" not in skip else 0.001)
        return Score(1.0 - error, 20.0)
    result = fallback(["a", "b", "c"], evaluate, COSINE, max_float=3)
    assert result.holds and result.skip == ("b",)
    assert [s.phase for s in result.steps] == ["start", "add", "add", "prune"]


def test_fallback_stops_at_the_limit_and_returns_the_best_it_found():
    errors = {"a": 0.05, "b": 0.04, "c": 0.03}
    result = fallback(["a", "b", "c"], _additive(errors), COSINE, max_float=2)
    assert not result.holds
    assert result.skip == ("a", "b") and result.score.cosine == pytest.approx(0.97)
    assert len(result.steps) == 3


def test_eta_is_the_mean_step_times_the_steps_left():
    now = [100.0]
    eta = Eta(lambda: now[0])
    now[0] += 60.0                                    # one step of a minute, 9 left: ~9 min
    assert eta.tick(9) == "9 more, ~9 min left"
    now[0] += 60.0
    assert eta.tick(1, at_most=True) == "at most 1 more, ~1 min"
    now[0] += 1.0
    assert eta.tick(0) == "done"
    assert Eta(lambda: 0.0).tick(3) == "3 more, < 1 min left"


def test_fallback_progress_counts_down_to_done(caplog):
    errors = {"w": 0.05, "x": 0.008, "y": 0.004, "z": 0.001}
    with caplog.at_level("INFO", logger="edgekit.quantize.sensitivity"):
        fallback(["w", "x", "y", "z"], _additive(errors), COSINE, max_float=3)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("fallback")]
    # start misses: 3 adds and 2 prunes at most; (w) misses: 2 + 2; (w, x) holds: one prune; the prune: done
    assert [line.split("; ")[1].split(",")[0] for line in lines] == [
        "at most 5 more", "at most 4 more", "at most 1 more", "done"]


def test_fallback_does_nothing_when_int8_already_holds():
    calls: list = []
    start = Score(0.999, 30.0)
    result = fallback(["a"], _additive({"a": 0.5}, calls), COSINE, max_float=1, start=start)
    assert result.holds and result.skip == () and calls == [] and result.score is start


def test_max_float_layers_never_all():
    assert max_float_layers(4, 0.5) == 2
    assert max_float_layers(5, 0.5) == 2
    assert max_float_layers(4, 1.0) == 3
    assert max_float_layers(1, 1.0) == 0
    assert max_float_layers(10, 0.3) == 3        # 0.3 * 10 is 2.9999999999999996 in floats
    with pytest.raises(ConfigError, match="max_float_fraction"):
        max_float_layers(4, 1.5)


# ---------------------------------------------------------------- choosing between candidates


def _candidate(algo, drop, cosine, holds, skip=()):
    return Candidate(algo, skip, Score(cosine, 20.0, 90.0 - drop, drop), holds, "algorithm", 100, False, 0.1)


def test_choose_prefers_candidates_in_budget_then_least_drop_then_error_then_order():
    cands = [_candidate("avg", 0.5, 0.99, True), _candidate("hist", 0.2, 0.98, True),
             _candidate("mse", 0.2, 0.985, True), _candidate("KL", -1.0, 0.999, False)]
    assert choose(cands, TOP1).algo == "mse"
    assert choose([_candidate("avg", 0.2, 0.99, True), _candidate("hist", 0.2, 0.99, True)], TOP1).algo == "avg"
    assert choose([_candidate("avg", 3.0, 0.9, False), _candidate("hist", 2.0, 0.95, False)], TOP1).algo == "hist"
    # nothing holds with max_changed: the nearest miss by its larger overshoot, not the least drop
    strict = replace(TOP1, max_changed=1.0)
    avg = Candidate("avg", (), Score(0.99, 20.0, 99.0, 0.0, agreement=73.0), False, "algorithm", 100, False, 0.1)
    hist = Candidate("hist", (), Score(0.98, 20.0, 98.2, 0.8, agreement=98.0), False, "algorithm", 100, False, 0.1)
    assert choose([avg, hist], TOP1).algo == "avg" and choose([avg, hist], strict).algo == "hist"


def test_search_plan_validates():
    with pytest.raises(ConfigError, match="not usable"):
        SearchPlan(TOP1, algos=("avg", "magic"))
    with pytest.raises(ConfigError, match="not usable"):
        SearchPlan(TOP1, algos=())
    with pytest.raises(ConfigError, match="max_float_fraction"):
        SearchPlan(TOP1, max_float_fraction=-0.1)


# ---------------------------------------------------------------- cache keys and stores


def test_cache_key_covers_every_input_and_ignores_skip_order():
    base = dict(model="m" * 64, data="d" * 64, algo="avg", settings={"batch_size": 16}, skip=("a", "b"))
    key = cache_key(**base)
    assert key == cache_key(**dict(base, skip=("b", "a", "a")))
    for change in (dict(model="n" * 64), dict(data="e" * 64), dict(algo="KL"),
                   dict(settings={"batch_size": 8}), dict(skip=("a",))):
        assert cache_key(**dict(base, **change)) != key
    assert re.fullmatch(r"[0-9a-f]{64}", key)       # a sha256 hex digest, usable as a folder name


def test_calibration_settings_ignore_search_only_fields():
    settings = calibration_settings(QuantConfig())
    assert "algo" not in settings and settings["batch_size"] == 16
    assert settings == calibration_settings(replace(QuantConfig(), algo="KL"))
    assert settings == calibration_settings(replace(QuantConfig(), max_changed=1.0, rank_by="error"))
    assert settings != calibration_settings(replace(QuantConfig(), batch_nums=2))
    assert settings["paddleslim"] and len(settings["ptq_source"]) == 64


def test_data_digest_sees_values_dtype_and_labels():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    base = Samples({"x": x}).digest()
    assert base == Samples({"x": x.copy()}, np.array([0, 1, 2])).digest()       # labels only when asked
    assert base != Samples({"x": x.astype(np.float64)}).digest()
    assert base != Samples({"x": x + 1}).digest()
    labelled = Samples({"x": x}, np.array([0, 1, 2])).digest(with_labels=True)
    assert labelled != Samples({"x": x}, np.array([0, 1, 1])).digest(with_labels=True)


def _model(tmp_path: Path) -> StaticModel:
    folder = tmp_path / "src"
    folder.mkdir(exist_ok=True)
    (folder / "model.pdmodel").write_bytes(b"program")
    (folder / "model.pdiparams").write_bytes(b"params")
    return StaticModel(folder / "model.pdmodel", folder / "model.pdiparams", (InputSpec("x", (-1, 4)),), ("out",), "dygraph")


def _fake_quantize(runs: list):
    """Stands in for quantize_int8: writes the two files a real run writes, recording each call."""
    def quantize(model, samples, cfg, out_dir, skip=()):
        runs.append((cfg.algo, tuple(skip)))
        (out_dir / "model.pdmodel").write_bytes(f"{cfg.algo}|{','.join(skip)}".encode())
        (out_dir / "model.pdiparams").write_bytes(b"q" * 8)
        static = StaticModel(out_dir / "model.pdmodel", out_dir / "model.pdiparams", model.feeds, model.fetches,
                             "paddleslim-ptq", ("conv2d",))
        return QuantizedModel(static, cfg.algo, len(samples), 0.5)
    return quantize


def test_calibrator_memoises_on_disk_and_keeps_the_chosen_model(tmp_path):
    runs: list = []
    model, samples = _model(tmp_path), Samples({"x": np.ones((8, 4), np.float32)})
    cache = tmp_path / "cache"
    calibrate = Calibrator(model, samples, QuantConfig(), tmp_path / "scratch", cache, _fake_quantize(runs))
    first = calibrate("avg", ("b", "a"))
    assert not first.reused and runs == [("avg", ("a", "b"))]
    assert first.quantized.model.model_file.parent == (tmp_path / "scratch" / first.key).absolute()
    assert calibrate("avg", ("a", "b")).reused and len(runs) == 1
    kept = calibrate("avg", ("a", "b"), keep=True)       # copied from scratch into the cache, not recalibrated
    assert kept.reused and kept.quantized.model.model_file.parent == (cache / first.key).absolute()
    assert kept.quantized.model.model_file.read_bytes() == b"avg|a,b" and calibrate.calibrations == 1

    # a new run (new scratch) finds it in the cache; a damaged entry is recalibrated
    again = Calibrator(model, samples, QuantConfig(), tmp_path / "scratch2", cache, _fake_quantize(runs))
    assert again("avg", ("a", "b")).reused and again.calibrations == 0
    (cache / first.key / "model.pdiparams").write_bytes(b"truncated")
    assert not again("avg", ("a", "b")).reused and again.calibrations == 1
    assert not again("KL", ("a", "b")).reused                     # another algorithm is another key
    entry = json.loads((tmp_path / "scratch2" / again.key("KL", ("a", "b")) / "entry.json").read_text())
    assert entry["algo"] == "KL" and entry["skip"] == ["a", "b"] and set(entry["files"]) == {"model.pdmodel", "model.pdiparams"}
    assert not list(cache.glob(".tmp-*")) and not list((tmp_path / "scratch2").glob(".tmp-*"))


def test_search_is_scored_in_the_task_metric_not_the_cosine(tmp_path, monkeypatch):
    """avg keeps the outputs closer (cosine) but flips a class; hist is noisier but reads every sample right:
    with a top-1 budget the search must keep hist, and a budget in another metric than the data's is refused."""
    reference = np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 2.0], [2.0, 1.9, 0.0]])
    labels = np.array([0, 1, 2, 0])
    outputs = {"avg": reference + np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [-0.1, 0.1, 0]]),
               "hist": reference * 1.3 + np.array([[0, 0.3, 0.3], [0.3, 0, 0.3], [0.3, 0.3, 0], [0.2, 0, 0.5]])}

    class Runner:
        def __init__(self, model):
            self.algo = model.model_file.read_bytes().decode().split("|")[0]

        def run(self, inputs):
            return [outputs[self.algo]]

    monkeypatch.setattr("edgekit.quantize.search.quantizable_layers", lambda model: ())     # the fake model has no program
    samples = Samples({"x": np.zeros((4, 4), np.float32)}, labels)
    judge = Evaluator([reference], EvalSet(samples, make_task("classification"), tuple(labels)), Runner)
    runs: list = []
    result = quantize_to_budget(_model(tmp_path), samples, samples, QuantConfig(), SearchPlan(TOP1, ("avg", "hist"), fallback=False),
                                tmp_path / "work", quantize=_fake_quantize(runs), evaluator=judge)
    by_algo = {c.algo: c.score for c in result.candidates}
    assert by_algo["avg"].cosine > by_algo["hist"].cosine and by_algo["avg"].task_drop == 25.0
    assert result.chosen.algo == "hist" and result.holds and result.reference_task == 100.0
    assert result.task_metric == "top1" and "top1 100.00 %" in "\n".join(result.lines())
    with pytest.raises(ConfigError, match="exact_match points but the evaluation data is scored in top1"):
        quantize_to_budget(_model(tmp_path), samples, samples, QuantConfig(), SearchPlan(Budget.for_data(2.0, "exact_match")),
                           tmp_path / "work2", quantize=_fake_quantize(runs), evaluator=judge)


def test_a_max_changed_search_keeps_the_candidate_that_reads_what_fp32_reads(tmp_path, monkeypatch):
    """FP32 misreads sample 4 (class 3 for 1). avg is the closest in cosine and keeps the count, but misreads it as
    class 2; hist is noisier and reads every sample as FP32 does. The budget in points takes avg; with
    max_changed = 0 the search takes hist."""
    reference = np.array([[2.0, 1.0, 0.0, 0.0], [0.0, 2.0, 1.0, 0.0], [1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 1.95, 2.0]])
    labels = np.array([0, 1, 2, 1])
    outputs = {"avg": reference + np.array([[0, 0, 0, 0]] * 3 + [[0, 0, 0.05, -0.05]]),
               "hist": reference + np.array([[0, 0.3, 0.3, 0], [0.3, 0, 0.3, 0], [0.3, 0.3, 0, 0], [0.3, 0, -0.3, 0]])}

    class Runner:
        def __init__(self, model):
            self.algo = model.model_file.read_bytes().decode().split("|")[0]

        def run(self, inputs):
            return [outputs[self.algo]]

    monkeypatch.setattr("edgekit.quantize.search.quantizable_layers", lambda model: ())
    samples = Samples({"x": np.zeros((4, 4), np.float32)}, labels)
    judge = Evaluator([reference], EvalSet(samples, make_task("classification"), tuple(labels)), Runner)
    for budget, chosen, cache in ((TOP1, "avg", "a"), (replace(TOP1, max_changed=0.0), "hist", "a")):
        result = quantize_to_budget(_model(tmp_path), samples, samples, QuantConfig(),
                                    SearchPlan(budget, ("avg", "hist"), fallback=False), tmp_path / f"work-{chosen}",
                                    tmp_path / cache, quantize=_fake_quantize([]), evaluator=judge)
        by_algo = {c.algo: c.score for c in result.candidates}
        assert by_algo["avg"].cosine > by_algo["hist"].cosine and by_algo["avg"].task_drop == 0.0
        assert by_algo["avg"].agreement == 75.0 and by_algo["hist"].agreement == 100.0
        assert result.chosen.algo == chosen and result.holds


def test_a_crashing_calibration_is_a_failed_row_and_the_search_goes_on(tmp_path, monkeypatch):
    """PaddleSlim 2.6's avg sampler raised IndexError on PP-OCRv5 rec (a 0-d activation): one algorithm that
    crashes is a failed candidate, the next one is tried and chosen; the report and the JSON show the failure."""
    reference = np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0]])

    class Runner:
        def __init__(self, model):
            pass

        def run(self, inputs):
            return [reference * 1.01]

    runs: list = []
    real = _fake_quantize(runs)

    def quantize(model, samples, cfg, out_dir, skip=()):
        if cfg.algo == "avg":
            runs.append(("avg", tuple(skip)))
            raise QuantizeError("PaddleSlim post-training quantisation (avg) failed: IndexError: tuple index out of range "
                                "(in post_training_quantization.py:906 _sample_avg)", "try another algorithm")
        return real(model, samples, cfg, out_dir, skip)

    monkeypatch.setattr("edgekit.quantize.search.quantizable_layers", lambda model: ())
    samples = Samples({"x": np.zeros((2, 4), np.float32)}, np.array([0, 1]))
    judge = Evaluator([reference], EvalSet(samples, make_task("classification"), (0, 1)), Runner)
    result = quantize_to_budget(_model(tmp_path), samples, samples, QuantConfig(), SearchPlan(TOP1, ("avg", "hist")),
                                tmp_path / "work", quantize=quantize, evaluator=judge)
    assert [(c.algo, c.failed) for c in result.candidates] == [("avg", True), ("hist", False)]
    assert result.chosen.algo == "hist" and result.holds and runs[0] == ("avg", ())
    text = "\n".join(result.lines())
    assert "✗ algorithm avg: failed: PaddleSlim post-training quantisation (avg) failed: IndexError" in text
    rows = result.to_json()["candidates"]
    assert "_sample_avg" in rows[0]["error"] and "cosine" not in rows[0] and rows[1]["cosine"] > 0.99
    assert "| 0 | algorithm | avg | — | failed: PaddleSlim" in render_markdown(result)
    with pytest.raises(QuantizeError, match="every calibration algorithm failed: avg: PaddleSlim .*IndexError"):
        quantize_to_budget(_model(tmp_path), samples, samples, QuantConfig(), SearchPlan(TOP1, ("avg",)),
                           tmp_path / "work2", quantize=quantize, evaluator=judge)


def test_score_store_round_trip(tmp_path):
    store = ScoreStore(tmp_path)
    score = Score(0.995, 23.5, 97.5, -0.25)
    assert store.get("k") is None
    store.put("k", score)
    assert ScoreStore(tmp_path).get("k") == score
    memory = ScoreStore(None)
    memory.put("k", score)
    assert memory.get("k") == score and not (tmp_path / "scores" / ".k.tmp").exists()


def test_a_max_changed_search_scores_again_what_was_stored_without_agreement(tmp_path):
    """Scores stored before they carried their agreement are read by other budgets, rescored for max_changed."""
    ScoreStore(tmp_path).put("old", Score(0.995, 23.5, 97.5, 0.0))
    ScoreStore(tmp_path).put("new", Score(0.995, 23.5, 97.5, 0.0, agreement=98.0))
    assert ScoreStore(tmp_path).get("old") is not None
    assert ScoreStore(tmp_path, agreement=True).get("old") is None
    assert ScoreStore(tmp_path, agreement=True).get("new").agreement == 98.0
    assert ScoreStore(tmp_path, agreement=True).get("missing") is None
    (tmp_path / "scores" / "bad.json").write_text('{"cosine": 1, "snr_db": 1, "task": 9, "task_drop": 0, "metrics": {}, '
                                                 '"agreement": "most"}')
    assert ScoreStore(tmp_path).get("bad") is None           # a damaged entry is scored again, never a traceback


# ---------------------------------------------------------------- the report


def _result() -> QuantSearchResult:
    layers = (_layer(0, "conv2d_0.w_0", weights=216), _layer(1, "conv2d_1.w_0", weights=576),
              _layer(2, "linear_0.w_0", "matmul_v2", 32))
    ranked = rank([(layers[0], Score(0.9999, 40, 90.0, 0.0), 1e-4), (layers[1], Score(0.80, 5, 60.0, 30.0), 0.2),
                   (layers[2], Score(0.999, 30, 89.5, 0.5), 1e-3)])
    algo = Candidate("avg", (), Score(0.85, 8, 70.0, 20.0), False, "algorithm", 200, False, 0.3)
    fixed = Candidate("avg", ("conv2d_1.w_0",), Score(0.998, 27, 89.5, 0.5), True, "fallback", 200, False, 0.3)
    dummy = StaticModel(Path("q/model.pdmodel"), Path("q/model.pdiparams"), (), (), "paddleslim-ptq")
    return QuantSearchResult(QuantizedModel(dummy, "avg", 64, 0.3), fixed, TOP1, 90.0, layers, (algo, fixed), ranked,
                             None, SearchPlan(TOP1), 200, 5)


def test_report_table_and_sizes():
    result = _result()
    rows = layer_rows(result)
    assert [r["precision"] for r in rows] == ["int8", "float", "int8"]
    assert [r["rank"] for r in rows] == [3, 1, 2]
    assert result.weight_bytes() == {"int8": 216 + 32, "float": 4 * 576, "all_fp32": 4 * 824}
    text = render_markdown(result, nb_bytes=40960)
    assert "| 1 | `conv2d_1.w_0` | conv2d | 576 |  | 1 | 0.2 | 0.800000 | 30.00 | float |" in text
    assert "| 0 | algorithm | avg | — | 20 | 70.00 | 0.850000 | 8.0 | 200 | no | no |" in text
    assert "final model.nb: 40.0 KiB" in text and "0.2 KiB int8 + 2.2 KiB float" in text
    assert "meets the budget" in text and "FP32 reference top1: 90.00 %" in text
    assert result.to_json()["float_layers"] == ["conv2d_1.w_0"]
    assert "ranked by that error" in text          # these rows carry no task points: the error alone orders them
    assert result.to_json()["rank_by"] == "task" and [r["points"] for r in result.to_json()["layers"]] == [None] * 3
    with_points = replace(result, sensitivity=rank([(s.layer, s.score, s.value, s.score.task_drop)
                                                    for s in result.sensitivity]))
    assert "ranked by the top1 points the layer costs, then by that error" in render_markdown(with_points)
    assert [r["points"] for r in with_points.to_json()["layers"]] == [30.0, 0.5, 0.0]
    # the one float layer: 3 extra bytes per weight; put back into int8 it is the whole-model candidate (drop 20)
    assert result.float_costs() == [{"name": "conv2d_1.w_0", "op_type": "conv2d", "weights": 576, "extra_bytes": 1728,
                                     "drop_if_int8": 20.0, "changed_if_int8": None, "task_if_int8": 70.0}]
    assert "| `conv2d_1.w_0` | conv2d | 576 | 1728 | 20 | 70.00 |" in text
    lines = result.lines()
    assert any(line.startswith("  ✗ algorithm avg") for line in lines)
    assert any("chosen: avg, layers kept in float: conv2d_1.w_0 (conv2d)" in line for line in lines)

    strict = replace(TOP1, max_changed=2.0)
    scored = replace(with_points, budget=strict, chosen=replace(result.chosen, score=replace(result.chosen.score,
                                                                                              agreement=99.0)))
    text = render_markdown(scored)
    assert "- budget: drop ≤ 1 top1 points, ≤ 2 % of samples read unlike FP32" in text
    assert "drop 0.5, 1 % changed" in text and "ranked by the results the layer changes from FP32's by that method" in text
    assert scored.to_json()["budget"]["max_changed"] == 2.0 and scored.to_json()["points_of"] == "changed"
    assert any("(drop 0.5, 1 % changed)" in line for line in scored.lines())
    agreeing = replace(scored, sensitivity=tuple(replace(x, score=replace(x.score, agreement=100.0 - 2 * x.rank))
                                                 for x in scored.sensitivity))
    text = render_markdown(agreeing)
    assert "| cosine | top1 drop | changed % | precision |" in text
    assert "| 1 | `conv2d_1.w_0` | conv2d | 576 |  | 1 | 0.2 | 0.800000 | 30.00 | 2.00 | float |" in text
    assert [r["changed"] for r in layer_rows(agreeing)] == [6.0, 2.0, 4.0]
    assert "| drop if int8 | top1 % if int8 | changed if int8 |" in text


def test_sensitivity_plot_is_deterministic(tmp_path):
    result = _result()
    first = plot_sensitivity(result, tmp_path / "a.png").read_bytes()
    second = plot_sensitivity(result, tmp_path / "b.png").read_bytes()
    assert first == second and first[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(first[16:20], "big"), int.from_bytes(first[20:24], "big")
    assert (width, height) == (750, round(100 * (1.2 + 0.32 * 3)))
    assert plot_sensitivity(replace(result, sensitivity=()), tmp_path / "c.png") is None


# ---------------------------------------------------------------- the local method's pure parts


def test_local_rounding_is_per_channel_int8_along_the_weight_axis():
    from edgekit.quantize.local import round_weight, thresholds
    from edgekit.quantize.sensitivity import LOCAL, SENSITIVITY_METHODS, sensitivity_skips

    w = np.array([[0.5, -1.0, 0.003], [40.0, 0.1, -0.2]], dtype=np.float32)
    rows = round_weight(w, 0)                      # conv: one scale per output channel (row)
    assert rows.dtype == np.float32 and rows[0, 1] == -1.0 and rows[1, 0] == 40.0
    assert rows[0, 2] == 0.0 and rows[0, 0] == pytest.approx(64 / 127)          # 0.003 is under half a step of 1/127
    assert rows[1, 1] == 0.0 and rows[1, 2] == pytest.approx(-40 / 127)         # the 40 outlier's step is 0.315
    cols = round_weight(w, 1)                      # mul/matmul: one scale per column
    assert cols[1, 1] == pytest.approx(13 / 127) and cols[0, 1] == -1.0 and cols[0, 0] == pytest.approx(2 * 40 / 127)
    assert np.array_equal(round_weight(np.zeros((2, 3), np.float32), 0), np.zeros((2, 3), np.float32))
    assert thresholds({"algo": "hist", "threshold": {"a": 1.0}, "var_threshold": {"a": 2.0}}) == {"a": 2.0}
    assert thresholds({"algo": "avg", "threshold": {"a": 1.0}, "var_threshold": {}}) == {"a": 1.0}
    assert sensitivity_skips([_layer(0, "a")], LOCAL) == []
    with pytest.raises(ConfigError, match="not measured through candidates"):
        analyse([_layer(0, "a")], _additive({"a": 0.1}), Score(0.9, 1.0), LOCAL)
    assert LOCAL in SENSITIVITY_METHODS
