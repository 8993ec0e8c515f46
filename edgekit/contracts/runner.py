"""The runner's record and exit codes.

edgekit-lite-run (native/runner) writes OUT/record.json and exits with one of these codes (native/README.md); the
tier-C emulation (lite/native.py) and the device suite (edgekit/device/session.py) read both through this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from edgekit.contracts.files import Json
from edgekit.core import limits
from edgekit.core.errors import DataError, EdgekitError, InputModelError, ToolError

RUNNER_RECORD = "record.json"
RUNNER_SCHEMA = "edgekit.runner/1"
RUNNER_ERROR_MARK = "edgekit-lite-run: error: "     # the runner's one stderr line when it fails


def runner_errors() -> dict[int, type[EdgekitError]]:
    """The runner's exit code -> the error a caller gets (codes 1..7 of native/README.md)."""
    return {
        1: ToolError,          # internal error in the runner
        2: ToolError,          # usage: edgekit built a bad command line
        3: InputModelError,    # unreadable, truncated or foreign .nb; Lite could not load it
        4: InputModelError,    # the .nb's opt version differs from the runtime's
        5: DataError,          # input count, names, shapes or dtypes do not fit the model
        6: ToolError,          # Lite failed while running
        7: ToolError,          # outputs or record could not be written
    }


def read_runner_record(folder: Path) -> dict[str, Json] | None:
    """The runner's record in `folder` (its --out), or None when it wrote none or not a JSON object (killed)."""
    file = folder / RUNNER_RECORD
    if not file.is_file():
        return None
    try:
        record = limits.read_json(file, ToolError, "rebuild native/ and rerun")
    except ToolError:
        return None
    return record if isinstance(record, dict) else None


def runner_finished(record: Mapping[str, Json] | None) -> bool:
    """A record of this runner version that says it finished."""
    return record is not None and record.get("schema") == RUNNER_SCHEMA and record.get("status", "ok") == "ok"


def runner_error_line(stderr: str) -> tuple[str, str]:
    """(message, fix) from the runner's last error line on stderr, ("", "") without one."""
    line = next((ln for ln in reversed(stderr.splitlines()) if RUNNER_ERROR_MARK in ln), "")
    message, _, fix = line.partition(RUNNER_ERROR_MARK)[2].partition("; ")
    return message, fix
