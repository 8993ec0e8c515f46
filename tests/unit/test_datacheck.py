"""Calibration data checks: each warning fires on the data it is for, with its numbers, and only there."""

import numpy as np
import pytest

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


def test_calibration_batches_keep_the_sample_budget_for_fixed_batch_programs():
    from edgekit.contracts.settings import QuantConfig
    from edgekit.core.errors import DataError
    from edgekit.quantize.ptq import calibration_batches

    cfg = QuantConfig(batch_size=16, batch_nums=8)                       # a budget of 128 samples
    assert calibration_batches(500, cfg) == (16, 8)
    assert calibration_batches(500, cfg, fixed_batch=1) == (1, 128)      # batch 1 fixed: 128 batches, not 8
    assert calibration_batches(100, cfg) == (16, 6)                      # whole batches of what there is
    assert calibration_batches(100, cfg, fixed_batch=3) == (3, 33)
    with pytest.raises(DataError, match="at least 16"):
        calibration_batches(12, cfg)
    with pytest.raises(DataError, match="at least 8"):
        calibration_batches(7, cfg, fixed_batch=1)
