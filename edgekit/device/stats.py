"""Latency statistics of a device run: pure functions over lists of milliseconds.

Percentiles interpolate linearly between order statistics (numpy's default), so the
figures equal `numpy.percentile` and the runner's own `latency_ms`. The trimmed mean
cuts `int(trim * n)` samples from each end (scipy's `trim_mean`). Noise is also measured
robustly: the median absolute deviation, scaled by 1.4826 to estimate a standard
deviation when the samples are roughly normal (`robust_sigma`), and relative to the
median (`robust_cv`): decisions on medians use it, so a few slow outliers (a
background task) do not make a run unstable, while a drifting or bimodal run does.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

MAD_TO_SIGMA = 1.4826      # 1 / Phi^-1(3/4): MAD of a normal distribution times this is its sigma
TRIM = 0.1                  # the trimmed mean drops 10 % of the samples at each end


@dataclass(frozen=True)
class Summary:
    count: int
    min: float
    max: float
    mean: float
    median: float
    p90: float
    p99: float
    trimmed_mean: float     # mean of the samples left after cutting TRIM at each end
    stdev: float            # sample standard deviation (n - 1); 0 for one sample
    cv: float               # stdev / mean: the run's relative noise
    mad: float              # median absolute deviation from the median (unscaled)
    robust_cv: float        # robust_sigma / median: the noise a few outlier runs cannot inflate

    def to_json(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between order statistics."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50.0)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    centre = median(values)
    return median([abs(v - centre) for v in values])


def robust_sigma(values: Sequence[float]) -> float:
    """A standard deviation estimated from the MAD: one outlier cannot inflate it."""
    return MAD_TO_SIGMA * mad(values)


def trimmed_mean(values: Sequence[float], trim: float = TRIM) -> float:
    if not values:
        raise ValueError("trimmed mean of no values")
    ordered = sorted(values)
    cut = int(trim * len(ordered))
    kept = ordered[cut:len(ordered) - cut] or ordered
    return sum(kept) / len(kept)


def summarize(values: Sequence[float]) -> Summary:
    """Every figure the reports show, for a non-empty list of milliseconds."""
    if not values:
        raise ValueError("no latency samples to summarise")
    values = [float(v) for v in values]
    n = len(values)
    mean = sum(values) / n
    stdev = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return Summary(count=n, min=min(values), max=max(values), mean=mean, median=median(values),
                   p90=percentile(values, 90.0), p99=percentile(values, 99.0), trimmed_mean=trimmed_mean(values),
                   stdev=stdev, cv=stdev / mean if mean > 0 else 0.0, mad=mad(values),
                   robust_cv=robust_sigma(values) / median(values) if median(values) > 0 else 0.0)
