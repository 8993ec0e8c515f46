"""Text lines of a dynamic-width folder run in groups of similar width, not all padded to the folder's widest.

Padded to the widest, PP-OCRv5 mobile rec's INT8 .nb read 10 of 16 page crops, and 15 of 16 each at its own width
(bench/bench_rec_widths.py): the tiers and the INT8 search judged lines as no deployment runs them.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

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


def test_golden_lines_are_one_width_group_at_its_width(lines):
    """The golden vectors a device replays as one tensor are lines of one width group cut to its width, so each
    reads there as the build's tiers read it (padded to the folder's widest, the PP-OCRv5 rec INT8 .nb under qemu
    missed its golden cosine floor)."""
    from edgekit.model.data import one_width, width_groups

    golden = one_width(lines, 8)
    biggest = max(width_groups(lines), key=lambda group: len(group[0]))
    assert len(golden) == len(biggest[0]) >= 2 and golden.inputs["x"].shape == biggest[1]["x"].shape
    whole = run_lines(fake_recogniser, lines)[0]
    replayed = fake_recogniser(golden.inputs)[0]          # as a device runs the stored tensor, in one batch
    for row, i in enumerate(biggest[0]):
        assert np.array_equal(replayed[row], whole[i, :replayed.shape[1]]), i
    assert one_width(lines, 1).inputs["x"].shape[0] == 1


def test_golden_of_a_fixed_width_folder_is_spread_over_it(tmp_path):
    from edgekit.model.data import one_width

    fixed = PreprocessSpec(color="gray", resize=(4, 8), scale=1.0 / 255)
    for i in range(5):
        cv2.imwrite(str(tmp_path / f"{i}.png"), np.full((4, 8), i, np.uint8))
    golden = one_width(load_images(tmp_path, fixed, "x"), 3)
    assert golden.files == ("0.png", "2.png", "4.png")


def test_outputs_without_the_batch_first_are_refused_not_merged(lines):
    from edgekit.core.errors import InputModelError

    def time_major(inputs):                 # [T, N, C]: merged by rows, time and batch would be mixed silently
        return [np.swapaxes(fake_recogniser(inputs)[0], 0, 1)]

    with pytest.raises(InputModelError, match="batch as its first axis"):
        run_lines(time_major, lines)
    with pytest.raises(InputModelError, match="batch as its first axis"):
        run_lines(lambda inputs: [np.zeros((1, 3), np.float32)], lines)


def test_groups_answering_in_other_dtypes_merge_without_truncation(lines):
    def mixed(inputs):
        out = fake_recogniser(inputs)[0]
        return [out.astype(np.int64) if inputs["x"].shape[-1] <= 8 else out + np.float32(0.5)]

    merged = run_lines(mixed, lines)[0]
    assert merged.dtype.kind == "f" and (merged[3, 0] % 1 != 0).any()


def test_a_device_eval_launches_each_width_group_at_its_width(lines, tmp_path):
    """`edgekit device test --eval` on text lines: one runner launch per width group, scored on the merged outputs,
    as the build's tiers scored them (it used to push the folder padded to its widest line, in one launch)."""
    from edgekit.device.session import DeviceSession

    class Pushes:
        def push(self, files, folder):
            assert all(Path(f).is_file() for f in files)

    class Scored:                       # an EvalSet's face: the samples, and a metric over the merged outputs
        samples, primary, seen = lines, "m", []

        def __len__(self):
            return len(lines)

        def evaluate(self, outputs):
            self.seen.append(outputs[0])
            return {"m": 1.0}

        def digest(self):
            return "d"

    session = DeviceSession.__new__(DeviceSession)
    session.scratch, session.transport, launched = tmp_path / "pull", Pushes(), []

    def runner(p, folder, label, argv, warmup, repeat):
        with np.load(session.scratch / "b0" / argv[-1]) as data:
            x = data["x"]
        launched.append((label, x.shape[-1]))
        out = tmp_path / f"{label}.npy"
        np.save(out, fake_recogniser({"x": x})[0])
        return {}, [out], 0.0

    session._run = runner
    p, evaluation = SimpleNamespace(index=0, eval_source="data"), Scored()
    p.evaluation = evaluation
    found = session.evaluate(p, "remote")
    assert [w for _, w in launched] == [width for _, width in lines.lines.groups(184)] and len(launched) > 1
    assert launched[0][0] == "eval" and len({label for label, _ in launched}) == len(launched)
    assert np.array_equal(evaluation.seen[0], run_lines(fake_recogniser, lines)[0]) and found["samples"] == len(lines)
