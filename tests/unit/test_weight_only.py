"""The host simulation of opt's weight-only quantisation (pure numpy)."""

import numpy as np

from edgekit.quantize.weight_only import fake_quant, round_fp16


def test_per_channel_int8_keeps_each_channels_max_and_grid():
    w = np.array([[0.5, -1.0, 0.25], [100.0, 3.0, -50.0]], np.float32)   # 2 output channels on axis 0
    q = fake_quant(w, 8, axis=0).astype(np.float64)
    for row, scale in ((0, 1.0 / 127), (1, 100.0 / 127)):
        steps = q[row] / scale
        np.testing.assert_allclose(steps, np.round(steps), atol=1e-4)        # on the channel's own grid
        assert np.abs(q[row] - w[row]).max() <= scale / 2 + 1e-6             # at most half a step away
    assert q[0, 1] == -1.0 and q[1, 0] == 100.0                              # each channel's abs-max is exact


def test_int16_error_is_far_smaller_than_int8():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    e8 = np.abs(fake_quant(w, 8, 0) - w).max()
    e16 = np.abs(fake_quant(w, 16, 0) - w).max()
    assert e16 < e8 / 200


def test_axis_is_respected_for_matmul_weights():
    w = np.array([[1.0, 1000.0], [0.004, 1.0]], np.float32)      # [in, out]: output channels on axis 1
    q = fake_quant(w, 8, axis=1)
    assert q[1, 0] == np.float32(np.round(0.004 / (1.0 / 127)) * (1.0 / 127))   # channel 0's scale is 1/127, not 1000/127


def test_zero_channel_and_fp16_rounding():
    w = np.zeros((2, 3), np.float32)
    assert (fake_quant(w, 8, 0) == 0).all()
    assert round_fp16(np.array([1.0001], np.float32))[0] == np.float32(np.float16(1.0001))
