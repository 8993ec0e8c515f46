"""The one wrapper for external processes (opt children, X2Paddle, adb, ...).

Every call captures output, applies a timeout, and returns a `ProcessRecord` the
caller stores in the manifest. A death by signal becomes a typed error instead of
taking the CLI down.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

from .errors import ToolError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessRecord:
    argv: tuple[str, ...]
    returncode: int
    seconds: float
    stdout: str
    stderr: str

    @property
    def signal_name(self) -> str | None:
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    def tail(self, lines: int = 6) -> str:
        text = (self.stderr or self.stdout).strip().splitlines()
        return " | ".join(line.strip() for line in text[-lines:])

    def to_manifest(self) -> dict:
        record = asdict(self)
        record["argv"] = list(self.argv)
        record["seconds"] = round(self.seconds, 3)
        del record["stdout"], record["stderr"]
        return record


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    what: str = "",
) -> ProcessRecord:
    """Run `argv`; never raises for a non-zero exit (callers decide), only for timeouts."""
    what = what or argv[0]
    log.debug("running %s", " ".join(argv))
    start = time.monotonic()
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout,
            env=dict(env) if env is not None else None, cwd=cwd,
        )
    except subprocess.TimeoutExpired as exc:
        raise ToolError(
            f"{what} did not finish within {timeout:.0f} s",
            "raise the timeout (EDGEKIT_TOOL_TIMEOUT) or try a smaller model",
        ) from exc
    except OSError as exc:
        raise ToolError(f"{what} could not be started: {exc}", "check the installation (./run recreates the venv)") from exc
    return ProcessRecord(
        argv=tuple(argv), returncode=done.returncode, seconds=time.monotonic() - start,
        stdout=done.stdout, stderr=done.stderr,
    )


def python_module(module: str, *args: str, timeout: float, what: str = "") -> ProcessRecord:
    """Run `python -m module args` with this interpreter (used to isolate C++ crashes)."""
    return run([sys.executable, "-m", module, *args], timeout=timeout, what=what or module)
