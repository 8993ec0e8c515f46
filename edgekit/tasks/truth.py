"""Ground truth stored next to evaluation data: `<name>.truth.json` beside a tensor file, `truth.json` in an image folder.

The file names the task kind and its options, so evaluation data carries
everything needed to score a model on it:

    {"format": "edgekit-truth/1", "task": "ocr_rec", "options": {...}, "count": 200,
     "truth": ["Hq7bn", ...], "meta": {"generator": ..., "seed": ...}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from edgekit.core import atomic, limits
from edgekit.core.errors import DataError, EdgekitError

from .base import Task

TRUTH_FORMAT = "edgekit-truth/1"
TENSOR_SUFFIXES = (".npz", ".npy")


@dataclass(frozen=True)
class Truth:
    task: Task
    values: list                      # one entry per sample, in the data's sample order
    meta: dict = field(default_factory=dict)
    path: Path | None = None

    def __len__(self) -> int:
        return len(self.values)


def truth_file(data: Path) -> Path:
    """Where the truth for the evaluation data at `data` lives."""
    data = Path(data)
    if data.suffix in TENSOR_SUFFIXES:
        return data.with_name(data.stem + ".truth.json")
    return data / "truth.json"


def write_truth(path: Path, task: Task, values: Sequence, meta: Mapping[str, Any] | None = None) -> Path:
    """Write atomically (temp file, then rename); the same inputs give the same bytes."""
    checked = task.truth_from_json(task.truth_to_json(values))
    payload = {"format": TRUTH_FORMAT, "task": task.kind.value, "options": task.options(), "count": len(checked),
               "truth": task.truth_to_json(checked), "meta": dict(meta or {})}
    path = Path(path)
    atomic.write_json(path, payload, indent=1)
    return path


def read_truth(path: Path, samples: int | None = None) -> Truth:
    """The truth file at `path`, validated; `samples` (when known) must equal its entry count."""
    from . import make_task

    path = Path(path)
    # evaluation data someone else may have made: within the JSON limits (its numbers as written: not a bundle file)
    raw = limits.read_json(path, DataError, "regenerate it with the evaluation data", finite=False)
    if not isinstance(raw, dict) or raw.get("format") != TRUTH_FORMAT:
        raise DataError(f"{path} is not an edgekit truth file (format {TRUTH_FORMAT})",
                        "write it with edgekit.tasks.write_truth, or remove it")
    try:
        task = make_task(raw.get("task"), raw.get("options") or {})
        values = task.truth_from_json(raw.get("truth"))
    except EdgekitError as exc:
        raise DataError(f"ground truth {path}: {exc.message}", exc.hint) from exc
    if raw.get("count") != len(values):
        raise DataError(f"ground truth {path} says count {raw.get('count')} but holds {len(values)} entries",
                        "regenerate it with the evaluation data")
    if samples is not None and samples != len(values):
        raise DataError(f"ground truth {path} has {len(values)} entries for {samples} evaluation samples",
                        "regenerate the truth file together with the evaluation data")
    return Truth(task, values, dict(raw.get("meta") or {}), path)


def find_truth(data: Path, samples: int | None = None) -> Truth | None:
    """The truth stored next to `data`, or None when there is none."""
    path = truth_file(data)
    return read_truth(path, samples) if path.is_file() else None
