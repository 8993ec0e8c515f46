"""edgekit.device.stats: the latency figures, checked against numpy and by hand."""

import numpy as np
import pytest

from edgekit.device import stats

SAMPLES = [4.1, 3.9, 4.0, 4.3, 12.0, 4.2, 3.8, 4.0, 4.1, 4.05]


def test_percentiles_equal_numpys_linear_ones():
    for q in (0, 10, 50, 90, 99, 100):
        assert stats.percentile(SAMPLES, q) == pytest.approx(np.percentile(SAMPLES, q))
    s = stats.summarize(SAMPLES)
    assert (s.median, s.p90, s.p99) == pytest.approx(tuple(np.percentile(SAMPLES, [50, 90, 99])))
    assert (s.count, s.min, s.max) == (10, 3.8, 12.0)


def test_mean_stdev_and_cv():
    s = stats.summarize(SAMPLES)
    assert s.mean == pytest.approx(np.mean(SAMPLES))
    assert s.stdev == pytest.approx(np.std(SAMPLES, ddof=1))
    assert s.cv == pytest.approx(np.std(SAMPLES, ddof=1) / np.mean(SAMPLES))        # 0.48: the one 12 ms outlier


def test_trimmed_mean_cuts_ten_percent_at_each_end():
    # 10 samples: one cut at each end (3.8 and 12.0), the mean of the other 8
    kept = sorted(SAMPLES)[1:-1]
    assert stats.trimmed_mean(SAMPLES) == pytest.approx(sum(kept) / 8)
    assert stats.trimmed_mean([5.0, 7.0]) == 6.0                                  # too few to cut anything


def test_mad_and_robust_figures_ignore_one_outlier():
    assert stats.mad([1, 2, 3, 4, 100]) == 1.0                                    # |x - 3| = 2,1,0,1,97 -> median 1
    assert stats.robust_sigma([1, 2, 3, 4, 100]) == pytest.approx(1.4826)
    assert stats.mad([5.0]) == 0.0
    s = stats.summarize(SAMPLES)
    assert s.robust_cv == pytest.approx(1.4826 * stats.mad(SAMPLES) / np.median(SAMPLES))
    assert s.robust_cv < 0.05 < s.cv                                              # the outlier inflates only the CV


def test_one_sample_and_no_samples():
    s = stats.summarize([2.5])
    assert (s.median, s.p99, s.stdev, s.cv, s.mad) == (2.5, 2.5, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        stats.summarize([])
    with pytest.raises(ValueError):
        stats.percentile([1.0], 101)
