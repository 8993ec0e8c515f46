"""The build's data, read and preprocessed once: evaluation samples with their task and ground truth, and
calibration samples.

`EvalSet` keeps the truth aligned with the samples through `head` and `spread`, so
every consumer (the export check, pruning, the INT8 search, tiers A/B/C, golden
vectors) sees the same samples and scores them in the same task metric.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from edgekit.contracts.settings import BuildConfig, InputSpec
from edgekit.model.data import Samples, load_samples, read_labels, spread_indices
from edgekit.core import limits
from edgekit.core.errors import ConfigError, DataError, InputModelError

if TYPE_CHECKING:
    from edgekit.tasks import Task


@dataclass(frozen=True)
class EvalSet:
    """Evaluation samples; `task` and `truth` (one entry per sample) when the data has ground truth."""

    samples: Samples
    task: Task | None = None
    truth: tuple | None = None          # one entry per sample, in the form the task reads (class, text, boxes)

    def __post_init__(self) -> None:
        if (self.task is None) != (self.truth is None):
            raise ValueError("an EvalSet has both a task and its truth, or neither")
        if self.truth is not None and len(self.truth) != len(self.samples):
            raise ValueError(f"truth has {len(self.truth)} entries for {len(self.samples)} samples")

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def inputs(self) -> Mapping[str, np.ndarray]:
        return self.samples.inputs

    @property
    def has_truth(self) -> bool:
        return self.truth is not None

    @property
    def primary(self) -> str | None:
        """The task's primary metric (top1, exact_match, hmean, ...), with truth."""
        return self.task.primary if self.task is not None else None

    def head(self, n: int) -> "EvalSet":
        return EvalSet(self.samples.head(n), self.task, self.truth[:n] if self.truth is not None else None)

    def spread(self, n: int) -> "EvalSet":
        if n >= len(self):
            return self
        picks = spread_indices(len(self), n)
        truth = tuple(self.truth[i] for i in picks) if self.truth is not None else None
        return EvalSet(self.samples.spread(n), self.task, truth)

    def evaluate(self, outputs: Sequence[np.ndarray]) -> dict | None:
        """Every task metric of `outputs` (in %), or None without truth."""
        return self.task.evaluate(list(outputs), list(self.truth)) if self.task is not None else None

    def digest(self) -> str:
        """Identifies the tensors and the truth that scores on this set depend on."""
        truth = ""
        if self.task is not None:
            payload = {"kind": self.task.kind.value, "options": self.task.options(),
                       "truth": self.task.truth_to_json(list(self.truth))}
            truth = json.dumps(payload, sort_keys=True, default=str)
        return hashlib.sha256(f"{self.samples.digest(with_labels=True)}|{truth}".encode()).hexdigest()


def synthetic(feeds: Sequence[InputSpec], count: int, layout: str = "NCHW") -> Samples:
    """Seeded N(0, 1) inputs (0/1 for integer feeds) when no data is given; PaddleDetection's im_shape and
    scale_factor beside one image hold what image data would feed them (`data.with_geometry`)."""
    from edgekit.model.data import geometry_name, with_geometry

    rng = np.random.default_rng(0)
    inputs = {}
    for spec in feeds:
        shape = spec.concrete(count)
        # the dims come from the model (a PIR program names any): bounded before numpy allocates them
        if not all(isinstance(d, (int, np.integer)) and d > 0 for d in shape):
            raise InputModelError(f"input {spec.name!r} has shape {list(spec.shape)}: synthetic data needs positive "
                                  "sizes except the batch", "fix the model's input shape or pass --input with sizes")
        limits.check_tensor(InputModelError, f"synthetic data for input {spec.name!r}", shape, np.dtype(spec.dtype).itemsize)
        inputs[spec.name] = rng.standard_normal(shape).astype(spec.dtype) if spec.dtype.startswith("float") \
            else rng.integers(0, 2, shape).astype(spec.dtype)
    samples = Samples(inputs, None, (), "synthetic N(0,1), seed 0")
    images = [s.name for s in feeds if not geometry_name(s.name)]
    if len(images) < len(feeds) and len(images) == 1 and inputs[images[0]].ndim == 4:
        samples = with_geometry(samples, [s.name for s in feeds], images[0], layout)
    return samples


def load_for(cfg: BuildConfig, feeds: Sequence[InputSpec], path: Path, aliases: Mapping[str, str] | None = None) -> Samples:
    """Read `path` for a model with `feeds`: preprocessed, shape-checked, cast to the feeds' dtypes.

    `aliases` maps ONNX input names (as users name their .npz arrays) to the program's feeds.
    """
    labels = read_labels(cfg.data.labels) if cfg.data.labels else None
    to_feed = dict(aliases or {})
    to_source = {feed: name for name, feed in to_feed.items()}
    samples = load_samples(path, [to_source.get(f.name, f.name) for f in feeds], cfg.data.preprocess, labels)
    inputs = {to_feed.get(k, k): v for k, v in samples.inputs.items()}
    for spec in feeds:
        arr, want = inputs[spec.name], spec.shape
        if arr.ndim != len(want) or any(w != -1 and w != g for w, g in zip(want[1:], arr.shape[1:])):
            raise DataError(f"{path} input {spec.name!r} has per-sample shape {list(arr.shape[1:])}, the model wants "
                            f"{list(want[1:])}", "fix the preprocessing resize/crop/layout or the tensor file")
    # tensors saved as float64 (numpy's default) feed a float32 model as float32
    dtypes = {f.name: f.dtype for f in feeds}
    cast = {k: v.astype(dtypes[k], copy=False) for k, v in inputs.items()}
    if samples.lines is not None and samples.lines.feed in to_feed:     # an ONNX name for the lines' feed
        samples = replace(samples, lines=replace(samples.lines, feed=to_feed[samples.lines.feed]))
    return samples.with_inputs(cast)


def with_truth(cfg: BuildConfig, samples: Samples) -> EvalSet:
    """Attach the task and ground truth: a truth file beside the evaluation data, else class labels, else none."""
    from edgekit.tasks import find_truth, make_task

    stored = find_truth(cfg.data.evaluation, len(samples)) if cfg.data.evaluation else None
    if stored is not None:
        if cfg.task.kind is not None and cfg.task.kind != stored.task.kind.value:
            raise ConfigError(f"[task] kind is {cfg.task.kind} but {stored.path} holds {stored.task.kind.value} truth",
                              "drop [task] kind or use evaluation data of that task")
        task = make_task(stored.task.kind, {**stored.task.options(), **cfg.task.options}) if cfg.task.options else stored.task
        return EvalSet(samples, _with_input(task, cfg, samples), tuple(stored.values))
    if samples.labels is not None:
        options = dict(cfg.task.options)
        if cfg.data.labels and (cfg.task.kind or "classification") == "classification":
            options.setdefault("labels", read_labels(cfg.data.labels))   # task.json then names the classes for apps
        return EvalSet(samples, make_task(cfg.task.kind or "classification", options),
                       tuple(int(v) for v in samples.labels))
    return EvalSet(samples)


def _with_input(task, cfg: BuildConfig, samples: Samples):
    """A task that decodes cells of the input (flattened detection heads) told the image tensor's height and width."""
    images = [v for v in samples.inputs.values() if np.ndim(v) == 4]
    if not hasattr(task, "with_input") or len(images) != 1:
        return task
    nhwc = cfg.data.preprocess is not None and cfg.data.preprocess.layout == "NHWC"
    shape = images[0].shape
    return task.with_input(*(shape[1:3] if nhwc else shape[2:4]))


def evaluation_set(cfg: BuildConfig, feeds: Sequence[InputSpec], aliases: Mapping[str, str] | None = None,
                   fallback: Samples | None = None) -> EvalSet | None:
    """`[data].evaluation` (or `fallback` when none is given) with its truth, cut to `[parity] max_samples`."""
    if cfg.data.evaluation is not None:
        samples = load_for(cfg, feeds, cfg.data.evaluation, aliases)
    elif fallback is not None:
        samples = fallback
    else:
        return None
    return with_truth(cfg, samples).head(cfg.gates.max_samples)
