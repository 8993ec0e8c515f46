"""edgekit.model.parity: metrics, gate checks, output comparison and the report."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgekit.core.errors import ParityError
from edgekit.model.parity import Check, OutputStats, ParityReport, compare, cosine, max_abs, snr_db, top1


def test_max_abs():
    assert max_abs(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.5, 2.0])) == 1.0
    assert max_abs(np.zeros((0, 3)), np.zeros((0, 3))) == 0.0
    assert max_abs(np.array([1], np.int64), np.array([-2], np.int64)) == 3.0


def test_cosine():
    a = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]])
    assert cosine(a, a) == pytest.approx(1.0)
    assert cosine(a, -a) == pytest.approx(-1.0)
    assert cosine(np.zeros((2, 4)), np.zeros((2, 4))) == 1.0
    # per-sample mean: rows give 1 and 0
    assert cosine(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[2.0, 0.0], [1.0, 0.0]])) == pytest.approx(0.5)
    # a zero row against a non-zero row counts as 0, not NaN
    assert cosine(np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 1.0]])) == pytest.approx(0.5)
    # 1-D input is one sample; N-D samples are flattened
    assert cosine(np.array([1.0, 0.0]), np.array([1.0, 1.0])) == pytest.approx(1 / math.sqrt(2))
    assert cosine(np.ones((2, 2, 2)), np.ones((2, 2, 2)) * 3) == pytest.approx(1.0)


def test_snr_db():
    ref = np.array([3.0, 4.0])
    assert snr_db(ref, ref) == math.inf
    assert snr_db(ref, np.array([3.0, 4.5])) == pytest.approx(20.0)      # 25 / 0.25
    assert snr_db(np.zeros(2), np.ones(2)) == -math.inf


def test_top1():
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    assert top1(logits, np.array([1, 0, 0])) == pytest.approx(200 / 3)
    assert top1(logits.reshape(3, 1, 2), np.array([1, 0, 1])) == 100.0


@pytest.mark.parametrize("value, limit, higher, passed", [
    (0.995, 0.99, True, True),
    (0.99, 0.99, True, True),
    (0.98, 0.99, True, False),
    (1e-5, 1e-4, False, True),
    (1e-4, 1e-4, False, True),
    (1e-3, 1e-4, False, False),
    (math.nan, 0.99, True, False),
    (math.nan, 1e-4, False, False),
    (math.inf, 30.0, True, True),
    (math.inf, 1e-4, False, False),
    (-math.inf, 30.0, True, False),
])
def test_check_passed(value, limit, higher, passed):
    assert Check("A", "twin", "m", value, limit, higher).passed is passed


def test_check_line():
    assert Check("A", "x86 twin .nb vs reference", "max_abs", 2e-5, 1e-4, False, "logits").line() == \
        "  ✓ tier A x86 twin .nb vs reference [logits]: max_abs 2e-05 (≤ 0.0001)"
    assert Check("B", "int8", "cosine", 0.5, 0.99, True).line() == "  ✗ tier B int8: cosine 0.5 (≥ 0.99)"


def test_compare_stats():
    ref = [np.array([[3.0, 4.0]]), np.array([1.0, 1.0])]
    got = [np.array([[3.0, 4.5]]), np.array([1.0, 1.0])]
    stats = compare(ref, got, ["a", "b"])
    assert stats[0].output == "a"
    assert stats[0].max_abs == 0.5
    assert stats[0].snr_db == pytest.approx(20.0)
    assert stats[0].cosine == pytest.approx(27.0 / (5 * math.sqrt(29.25)))   # (9 + 18) / (|a| |b|)
    assert (stats[1].output, stats[1].max_abs, stats[1].snr_db) == ("b", 0.0, math.inf)
    assert stats[1].cosine == pytest.approx(1.0)


@pytest.mark.parametrize("ref, got, fragment", [
    ([np.ones(2)], [np.array([1.0, np.nan])], "output 'out' of the model under test contains NaN"),
    ([np.ones(2)], [np.array([1.0, np.inf])], "contains NaN or Inf"),
    ([np.ones((1, 2))], [np.ones((1, 3))], "output 'out' has shape [1, 3], the reference [1, 2]"),
    ([np.ones(2)], [np.ones(2), np.ones(2)], "returns 2 outputs, the reference 1"),
])
def test_compare_raises(ref, got, fragment):
    with pytest.raises(ParityError) as info:
        compare(ref, got, ["out"])
    assert fragment in info.value.message
    assert info.value.exit_code == 9


def test_report_passes_and_serialises():
    report = ParityReport(checks=[Check("A", "twin", "max_abs", 1e-6, 1e-4, False)], samples=4,
                          outputs={"A": (OutputStats("y", 1e-6, 1.0, 120.0),)},
                          accuracy={"reference": 97.5}, notes=["n1"])
    assert report.passed and report.failures() == []
    report.raise_if_failed()
    assert report.lines() == [
        "parity on 4 evaluation samples:",
        "    tier A [y]: max_abs 1e-06  cosine 1.00000000  SNR 120.0 dB",
        "    top-1 reference: 97.50 %",
        "  ✓ tier A twin: max_abs 1e-06 (≤ 0.0001)",
        "  note: n1",
    ]
    record = report.to_json()
    assert record["passed"] is True
    assert record["outputs"] == {"A": [{"output": "y", "max_abs": 1e-6, "cosine": 1.0, "snr_db": 120.0}]}
    assert record["checks"][0]["passed"] is True and record["checks"][0]["limit"] == 1e-4


def test_report_raise_if_failed():
    bad = Check("B", "int8 sim", "top1_drop", 3.25, 1.0, False)
    report = ParityReport(checks=[Check("A", "twin", "cosine", 1.0, 0.99999, True), bad,
                                  Check("B", "int8 sim", "cosine", math.nan, 0.99, True)], samples=10)
    assert not report.passed
    assert report.failures()[0] is bad and len(report.failures()) == 2
    with pytest.raises(ParityError) as info:
        report.raise_if_failed()
    assert info.value.message == "2 parity gate(s) failed; first: tier B int8 sim top1_drop 3.25 vs limit 1"
    assert info.value.report_lines == report.lines()
    assert info.value.report_lines[0] == "parity on 10 evaluation samples:"
    assert "  ✗ tier B int8 sim: top1_drop 3.25 (≤ 1)" in info.value.report_lines


# ---------------------------------------------------------------- gates and budgets (one place for tiers A, B, C)

from edgekit.core.errors import ConfigError  # noqa: E402
from edgekit.model.parity import (Budget, OutputStats, Score, Tolerance, differences, metric_label, output_scale,
                                  task_metric, worst_max_abs)


def test_tolerance_checks_every_output_in_max_abs_and_cosine():
    stats = [OutputStats("a", 5e-5, 0.999995, 90.0), OutputStats("b", 2e-4, 1.0, 80.0)]
    checks = Tolerance(1e-4, 0.99999).checks("A", "twin", stats)
    assert [(c.output, c.metric, c.passed) for c in checks] == [
        ("a", "max_abs", True), ("a", "cosine", True), ("b", "max_abs", False), ("b", "cosine", True)]


def test_budget_in_task_points_gates_the_drop_and_agrees_with_the_search():
    budget = Budget.for_data(1.0, "exact_match")
    assert budget.metric == "exact_match_drop_points" and budget.task_metric == "exact_match"
    (check,) = budget.checks("C", "arm64 .nb vs fp32", [OutputStats("y", 0.5, 0.99, 20.0)], 100.0, 99.5)
    assert (check.tier, check.metric, check.value, check.limit, check.passed) == ("C", "exact_match_drop_points", 0.5, 1.0, True)
    assert budget.holds(Score(0.5, 1.0, 99.5, 0.5)) is check.passed
    (worse,) = budget.checks("B", "sim", [OutputStats("y", 0.5, 0.99, 20.0)], 100.0, 98.0)
    assert not worse.passed and not budget.holds(Score(0.99, 20.0, 98.0, 2.0))
    with pytest.raises(ConfigError, match="needs evaluation data with ground truth"):
        budget.checks("B", "sim", [], None, None)


def test_budget_without_truth_is_a_cosine_per_output():
    budget = Budget.for_data(0.01, None)
    checks = budget.checks("B", "sim", [OutputStats("a", 1.0, 0.995, 20.0), OutputStats("b", 1.0, 0.98, 10.0)])
    assert [(c.metric, c.limit, c.passed) for c in checks] == [("cosine", 0.99, True), ("cosine", 0.99, False)]
    assert budget.holds(Score(0.995, 20.0)) and not budget.holds(Score(0.98, 10.0))


def test_differences_keep_nan_for_the_gate_to_fail():
    stats = differences([np.ones((2, 2))], [np.array([[1.0, np.nan], [1.0, 1.0]])], ["y"])
    assert math.isnan(stats[0].max_abs) and math.isnan(worst_max_abs(stats))
    assert not Tolerance(1e-4, 0.9).checks("A", "t", stats)[0].passed
    assert worst_max_abs(differences([np.ones(3), np.zeros(2)], [np.ones(3) * 1.5, np.zeros(2)], ["a", "b"])) == 0.5
    assert output_scale([np.array([-3.0, 2.0]), np.zeros(0)]) == 3.0


def test_task_metric_is_the_tasks_primary_metric_with_truth_else_cosine():
    from edgekit.tasks import make_task

    task = make_task("classification")
    metric = task_metric([np.array([[0.0, 1.0]])], task, [1])
    assert metric.name == "top-1 %" and metric.score([np.array([[0.0, 1.0]])]) == 100.0
    assert metric.score([np.array([[1.0, 0.0]])]) == 0.0
    reference = [np.array([[1.0, 2.0]])]
    fallback = task_metric(reference)
    assert fallback.name == "cosine to unpruned x100" and fallback.score(reference) == pytest.approx(100.0)
    assert metric_label("exact_match") == "exact match" and metric_label("top1") == "top-1"


def test_report_extended_is_a_new_report_with_the_primary_metric_per_engine():
    base = ParityReport(samples=3, metric="exact_match")
    more = base.extended(checks=[Check("C", "arm", "cosine", 1.0, 0.9, True)], tier="C",
                         stats=[OutputStats("y", 0.0, 1.0, math.inf)],
                         metrics={"arm64 .nb": {"exact_match": 99.0, "char_accuracy": 99.9}}, notes=["n"],
                         extra={"C": {"abi": "aarch64"}})
    assert base.checks == () and base.outputs == {} and base.notes == ()
    assert more.accuracy == {"arm64 .nb": 99.0} and more.outputs["C"][0].output == "y"
    assert more.to_json()["tiers"] == {"C": {"abi": "aarch64"}} and more.passed


def test_check_same_is_the_one_shape_of_every_transform_check():
    from edgekit.model.parity import SameTolerance, check_same

    before = [np.array([[0.0, 100.0]], np.float32), np.array([[0.5, 0.25]], np.float32)]
    after = [np.array([[0.0, 100.005]], np.float32), np.array([[0.5, 0.2505]], np.float32)]
    per_output = check_same(before, after, ["big", "small"], SameTolerance(1e-4, 0.99999), "folded vs unfolded")
    # each output's limit grows with its own scale: 1e-2 for the big one, 1e-4 for the small one
    assert [round(o.max_abs_limit, 6) for o in per_output.outputs] == [0.01, 0.0001]
    assert [o.passed for o in per_output.outputs] == [True, False] and per_output.failure.output == "small"
    overall = check_same(before, after, ["big", "small"], SameTolerance(1e-4, per_output=False), "rewrite")
    assert overall.passed and overall.worst_max_abs == pytest.approx(0.005, rel=1e-3)
    absolute = check_same(before, after, ["big", "small"], SameTolerance(1e-4, scaled=False), "export")
    assert not absolute.passed
    assert set(per_output.to_json()) == {"what", "samples", "outputs", "passed"} and per_output.samples == 1
    nan = check_same([np.ones((1, 2))], [np.full((1, 2), np.nan)], ["y"], SameTolerance(1.0), "x")
    assert not nan.passed
    with pytest.raises(ParityError):
        check_same([np.ones((1, 2))], [np.ones((1, 3))], ["y"], SameTolerance(1.0), "x")
