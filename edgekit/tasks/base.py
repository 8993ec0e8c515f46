"""What every task kind provides: metrics against ground truth, readable results, truth (de)serialisation.

A task turns a model's raw outputs (one array per fetch, samples stacked on the
first axis, as the reference engine, the x86 twin and the INT8 simulation return
them) into a task metric. Every metric is a percentage where higher is better, so
one gate ("the primary metric may drop by at most N points") fits every task.
"""

from __future__ import annotations

import abc
import enum
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from edgekit.core.errors import ConfigError, DataError


class TaskKind(str, enum.Enum):
    classification = "classification"
    ocr_det = "ocr_det"
    ocr_rec = "ocr_rec"
    ocr_cls = "ocr_cls"
    detection = "detection"
    segmentation = "segmentation"


class Task(abc.ABC):
    """One task kind with its options (a frozen dataclass in each subclass)."""

    kind: ClassVar[TaskKind]
    primary: ClassVar[str]            # the key of evaluate()'s result that gates and reports use
    # the x86 twin's (and FP32 tier C's) max abs against the reference per output, when [parity] twin_max_abs is not
    # given: the kernels' float error on this task's outputs, measured on the real models
    twin_max_abs: ClassVar[float] = 1e-4

    @abc.abstractmethod
    def evaluate(self, outputs: Sequence[np.ndarray], truth: Sequence) -> dict[str, float]:
        """Metrics in percent (higher is better) of `outputs` against `truth` (one entry per sample)."""

    def score(self, outputs: Sequence[np.ndarray], truth: Sequence) -> float:
        """The primary metric alone: what gates, budgets and rankings compare."""
        return self.evaluate(outputs, truth)[self.primary]

    @abc.abstractmethod
    def postprocess(self, outputs: Sequence[np.ndarray]) -> list:
        """One human-readable (JSON-serialisable) result per sample."""

    @abc.abstractmethod
    def predictions(self, outputs: Sequence[np.ndarray]) -> list:
        """What the model says per sample, in the form of ground truth (class, text, boxes)."""

    def agreement(self, outputs: Sequence[np.ndarray], other: Sequence[np.ndarray]) -> float:
        """How often `outputs` say what `other` says, in the primary metric with `other`'s predictions as the truth:
        top-1 agreement, the same text, the same boxes (hmean)."""
        return self.agreement_with(outputs, self.predictions(other))

    def agreement_with(self, outputs: Sequence[np.ndarray], theirs: Sequence) -> float:
        """`agreement` against the other engine's `predictions`, decoded already (a judge of many candidates
        decodes its one reference once)."""
        return self.score(outputs, theirs)

    @abc.abstractmethod
    def truth_from_json(self, raw: Any) -> list:
        """Validate truth read from a truth file; DataError says what is wrong with it."""

    def truth_to_json(self, truth: Sequence) -> list:
        return [t.tolist() if isinstance(t, np.ndarray) else t for t in truth]

    @abc.abstractmethod
    def options(self) -> dict:
        """JSON options that rebuild this task with `make_task(kind, options)` (written into bundles)."""

    @classmethod
    @abc.abstractmethod
    def from_options(cls, options: Mapping[str, Any]) -> "Task":
        """The task from `[task]` options or a truth file's options; ConfigError for unknown or bad ones."""


def check_options(kind: TaskKind, options: Mapping[str, Any], known: Sequence[str]) -> None:
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"unknown option(s) for task {kind.value}: {', '.join(unknown)}",
                          f"known options: {', '.join(known) if known else 'none'}")


def number_option(kind: TaskKind, options: Mapping[str, Any], key: str, default: float,
                  low: float, high: float) -> float:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ConfigError(f"task {kind.value} option {key} = {value!r} is not a number in [{low:g}, {high:g}]",
                          f"write {key} as a number, e.g. {default:g}")
    return float(value)


def first_output(kind: TaskKind, outputs: Sequence[np.ndarray], ndim: int, what: str) -> np.ndarray:
    """The output the task reads (the model's first fetch), with the rank it must have."""
    if not outputs:
        raise DataError(f"task {kind.value} got no model outputs", "the model must return at least one output")
    out = np.asarray(outputs[0])
    if out.ndim != ndim:
        raise DataError(f"task {kind.value} reads {what}, but the model's first output has shape {list(out.shape)}",
                        "pick the task kind that matches the model ([task] kind)")
    return out


def check_count(kind: TaskKind, samples: int, truth: Sequence) -> None:
    if len(truth) != samples:
        raise DataError(f"task {kind.value}: {samples} model outputs but {len(truth)} ground-truth entries",
                        "regenerate the truth file together with the evaluation data")


def percent(value: float) -> float:
    return round(float(value) * 100.0, 4)
