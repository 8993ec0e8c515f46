"""Task kinds: how a model's raw outputs become a task metric and a readable result.

    task = make_task("ocr_rec", {"dictionary": "rec.onnx"})
    task.evaluate(outputs, truth)   # {"exact_match": 98.5, "char_accuracy": 99.7}; task.primary = "exact_match"
    task.postprocess(outputs)       # [{"text": "Hq7bn", "confidence": 0.99}, ...]

Ground truth lives next to the evaluation data (`truth.py`). Every metric is a
percentage, higher is better.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from edgekit.core.errors import ConfigError

from .base import Task, TaskKind
from .classification import Classification
from .detection import Detection
from .ocr import OcrCls, OcrDet, OcrRec
from .segmentation import Segmentation
from .truth import Truth, find_truth, read_truth, truth_file, write_truth


@dataclass(frozen=True)
class TaskInfo:
    task: type[Task]
    metrics: tuple[str, ...]          # evaluate()'s keys; the first is the primary metric


TASKS: dict[TaskKind, TaskInfo] = {
    TaskKind.classification: TaskInfo(Classification, ("top1",)),
    TaskKind.ocr_det: TaskInfo(OcrDet, ("hmean", "precision", "recall")),
    TaskKind.ocr_rec: TaskInfo(OcrRec, ("exact_match", "char_accuracy")),
    TaskKind.ocr_cls: TaskInfo(OcrCls, ("accuracy",)),
    TaskKind.detection: TaskInfo(Detection, ("map50", "map", "map_small", "map_medium", "map_large", "f1")),
    TaskKind.segmentation: TaskInfo(Segmentation, ("miou", "pixel_accuracy")),
}


def make_task(kind: TaskKind | str | None, options: Mapping[str, Any] | None = None) -> Task:
    """The task of `kind` with `options` (the `[task]` table without `kind`, or a truth file's options)."""
    try:
        kind = TaskKind(kind.value if isinstance(kind, TaskKind) else str(kind))
    except ValueError as exc:
        raise ConfigError(f"task kind {kind!r} is not known", f"use one of {', '.join(k.value for k in TaskKind)}") from exc
    if options is not None and not isinstance(options, Mapping):
        raise ConfigError(f"options of task {kind.value} are not a table", "write them as key = value pairs under [task]")
    task = TASKS[kind].task.from_options(dict(options or {}))
    assert task.primary == TASKS[kind].metrics[0], kind    # internal invariant: the table and the class agree
    return task


def task_of(task_file) -> Task:
    """A bundle's task.json (`edgekit.contracts.task.TaskFile`) as its task object, its options validated."""
    return make_task(task_file.kind, dict(task_file.options))


__all__ = [
    "TASKS",
    "Classification",
    "Detection",
    "OcrCls",
    "OcrDet",
    "OcrRec",
    "Segmentation",
    "Task",
    "TaskInfo",
    "TaskKind",
    "Truth",
    "find_truth",
    "make_task",
    "task_of",
    "read_truth",
    "truth_file",
    "write_truth",
]
