"""edgekit.parity: metrics, gate checks, output comparison and the report."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgekit.errors import ParityError
from edgekit.parity import Check, ParityReport, compare, cosine, max_abs, snr_db, top1


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
                          outputs={"A": [{"output": "y", "max_abs": 1e-6, "cosine": 1.0, "snr_db": 120.0}]},
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
