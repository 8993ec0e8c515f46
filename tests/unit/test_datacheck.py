"""Calibration data checks: each warning fires on the data it is for, with its numbers, and only there."""

import numpy as np

from edgekit.quantize.datacheck import check_calibration


def _data(n, shift=0.0, scale=1.0, seed=0):
    return {"x": (np.random.default_rng(seed).standard_normal((n, 3, 8, 8)) * scale + shift).astype(np.float32)}


def test_representative_data_gives_no_warning():
    assert check_calibration(_data(64), _data(200, seed=1), used=64) == []


def test_too_few_samples():
    (warning,) = check_calibration(_data(8), _data(200, seed=1), used=8)
    assert "uses 8 samples (< 32)" in warning


def test_identical_samples():
    same = {"x": np.repeat(_data(1)["x"], 64, axis=0)}
    found = check_calibration(same, None, used=64)
    assert any("nearly identical" in w for w in found) and any("only 1 of 64 samples are distinct" in w for w in found)


def test_shifted_and_rescaled_calibration_data():
    found = check_calibration(_data(64, shift=2.0), _data(200, seed=1), used=64)
    assert any("channel" in w and "evaluation std apart" in w for w in found)
    found = check_calibration(_data(64, scale=1 / 255), _data(200, seed=1), used=64)
    assert any("ratio 0.00" in w for w in found)
