"""Text lines of a dynamic-width folder run in groups of similar width, not all padded to the folder's widest.

Padded to the widest, PP-OCRv5 mobile rec's INT8 .nb read 10 of 16 page crops, and 15 of 16 each at its own width
(bench/bench_rec_widths.py): the tiers and the INT8 search judged lines as no deployment runs them.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.model.data import GROUP_RATIO, first_sample, fit_outputs, group_width, load_images, run_lines

SPEC = PreprocessSpec(color="gray", resize=(4, 8), resize_mode="fit_height", width_mode="dynamic", max_width=200,
                      width_step=8, scale=1.0 / 255, pad_value=-1.0)


def fake_recogniser(inputs):
    """A model whose output at each step depends on every column (as attention over the line does): per block of
    4 columns, the block's mean plus the mean of the whole tensor, padding included; [N, W / 4, 2]."""
    x = inputs["x"]                                  # [N, 1, 4, W]
    n, _, _, w = x.shape
    blocks = x.reshape(n, 1, 4, w // 4, 4).mean(axis=(1, 2, 4))
    everything = x.mean(axis=(1, 2, 3))[:, None].repeat(w // 4, axis=1)
    return [np.stack([blocks, blocks + everything], axis=-1).astype(np.float32)]


@pytest.fixture
def lines(tmp_path):
    rng = np.random.default_rng(0)
    for i, columns in enumerate((3, 30, 9, 90, 12, 31)):         # 8 .. 184 columns at height 4
        cv2.imwrite(str(tmp_path / f"line{i}.png"), rng.integers(0, 255, (2, columns), np.uint8))
    return load_images(tmp_path, SPEC, "x")


def alone(samples, i):
    """Line i run in a batch of its own, cut to its own group's width."""
    return fake_recogniser(first_sample(samples.take([i])))[0][0]


def test_group_edges_are_fixed_and_bounded():
    edges = sorted({group_width(w, 32, 10_000) for w in range(32, 3201, 32)})
    assert all(b <= GROUP_RATIO * a + 32 for a, b in zip(edges, edges[1:]))
    assert group_width(320, 32, 3200) == 384 and group_width(1312, 32, 3200) == 1536
    assert group_width(1312, 32, 1400) == 1400          # never wider than the batch


def test_a_line_reads_the_same_whoever_runs_beside_it(lines):
    assert lines.lines is not None and lines.inputs["x"].shape[-1] == 184
    outputs = run_lines(fake_recogniser, lines)[0]
    for i in range(len(lines)):
        own = alone(lines, i)
        assert np.array_equal(outputs[i, :len(own)], own), i
        assert (outputs[i, len(own):] == 0).all()        # zero past its group's end: CTC's blank
    padded = fake_recogniser(lines.inputs)[0]           # the old way: every line as wide as the widest
    assert not np.array_equal(padded[0, :2], outputs[0, :2])


def test_a_subset_agrees_with_the_whole_set_row_by_row(lines):
    whole = run_lines(fake_recogniser, lines)
    subset = lines.spread(3)
    picks = [0, 2, 5]
    assert subset.lines.widths == tuple(lines.lines.widths[i] for i in picks)
    part = run_lines(fake_recogniser, subset)
    left, right = fit_outputs([w[picks] for w in whole], part)
    assert np.array_equal(left[0], right[0])


def test_a_fixed_width_folder_runs_as_one_batch(tmp_path):
    fixed = PreprocessSpec(color="gray", resize=(4, 8), scale=1.0 / 255)
    cv2.imwrite(str(tmp_path / "a.png"), np.zeros((4, 8), np.uint8))
    samples = load_images(tmp_path, fixed, "x")
    assert samples.lines is None
    calls = []
    run_lines(lambda inputs: calls.append(inputs["x"].shape) or [inputs["x"]], samples)
    assert calls == [(1, 1, 4, 8)]


def test_calibration_batches_hold_one_width_group_each(lines):
    from edgekit.model.data import width_groups
    from quantize.ptq import line_batches

    batches = line_batches(width_groups(lines), 2)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lines)))     # every line, once
    assert all(len(batch) <= 2 for batch in batches)
    widths = lines.lines.widths
    for batch in batches:
        assert len({group_width(widths[i], 8, 184) for i in batch}) == 1
