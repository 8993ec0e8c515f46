"""task.json: the task kind, its primary metric and options, which `edgekit run` and the apps post-process with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from edgekit.contracts.files import REBUILD, TASK, Json, schema_ok, write_json
from edgekit.core import limits
from edgekit.core.errors import BundleError

TASK_SCHEMA = "edgekit.task/1"


@dataclass(frozen=True)
class TaskFile:
    """What `edgekit run` and the apps need to post-process outputs: the task kind, its primary metric, options."""

    kind: str
    primary: str | None
    options: Mapping[str, Json]

    @classmethod
    def of(cls, task) -> "TaskFile":
        return cls(task.kind.value, task.primary, task.options())

    def write(self, folder: Path) -> None:
        write_json(folder / TASK, {"schema": TASK_SCHEMA, "kind": self.kind, "primary": self.primary,
                                   "options": dict(self.options)}, indent=1, ascii_only=False)

    @classmethod
    def read(cls, folder: Path) -> "TaskFile | None":
        """The bundle's task, or None when it has none (built without labels or truth)."""
        file = folder / TASK
        if not file.is_file():
            return None
        raw = limits.read_json(file, BundleError, REBUILD)
        if not isinstance(raw, dict) or not isinstance(raw.get("kind"), str) \
                or not isinstance(raw.get("options", {}), dict) or not isinstance(raw.get("primary"), (str, type(None))):
            raise BundleError(f"{file} is not a task.json (an object with a kind and an options object)", REBUILD)
        schema_ok(raw, TASK_SCHEMA, file)
        return cls(raw["kind"], raw.get("primary"), raw.get("options", {}))
