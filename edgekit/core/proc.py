"""The one wrapper for external processes (opt children, X2Paddle, compilers, qemu, ...).

Every call captures output, applies a timeout, and returns a `ProcessRecord` the
caller stores in the manifest. A death by signal becomes a typed error instead of
taking the CLI down.

Python children (`python -m edgekit.<...>._child '<json request>'`) keep C++ crashes
of the toolchain out of the CLI's process. They answer with one protocol: a stdout
line `EDGEKIT-RESULT <json>` on success or `EDGEKIT-ERROR <json>` for a failure they
caught (`emit_result` / `emit_error`); no such line means the child died.
`run_child` starts one and returns its record with the parsed answer.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from edgekit.core.errors import ToolError

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



RESULT_MARK = "EDGEKIT-RESULT "
ERROR_MARK = "EDGEKIT-ERROR "


@dataclass(frozen=True)
class ChildAnswer:
    record: ProcessRecord
    result: dict | None        # the EDGEKIT-RESULT payload, when the child finished its work
    error: dict | None         # the EDGEKIT-ERROR payload, when the child caught a failure

    @property
    def ok(self) -> bool:
        return self.record.returncode == 0 and self.result is not None

    def cause(self) -> str:
        """Why the child gave no result, in a few words (for the caller's one-line error)."""
        if self.record.signal_name:
            return f"died from {self.record.signal_name}"
        return f"exited with {self.record.returncode}"


def run_child(module: str, request: Mapping[str, Any], *, timeout: float, what: str, cwd: str | None = None) -> ChildAnswer:
    """Run `python -m module '<json request>'` with this interpreter and parse its answer line."""
    return run_child_argv([sys.executable, "-m", module], request, timeout=timeout, what=what, cwd=cwd)


def run_child_argv(argv: Sequence[str], request: Mapping[str, Any], *, timeout: float, what: str, cwd: str | None = None,
                   env: Mapping[str, str] | None = None) -> ChildAnswer:
    """Run `argv '<json request>'` (a child of this protocol under any interpreter) and parse its answer line."""
    record = run([*argv, json.dumps(dict(request))], timeout=timeout, cwd=cwd, env=env, what=what)
    result = error = None
    for line in record.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            result = json.loads(line[len(RESULT_MARK):])
        elif line.startswith(ERROR_MARK):
            error = json.loads(line[len(ERROR_MARK):])
    return ChildAnswer(record, result, error)


def emit_result(payload: Mapping[str, Any]) -> None:
    """Child side: the success line (flushes what the toolchain printed first, so the line comes last)."""
    sys.stdout.flush()
    print(RESULT_MARK + json.dumps(dict(payload)), flush=True)


def emit_error(payload: Mapping[str, Any]) -> None:
    """Child side: a failure the child caught and described."""
    sys.stdout.flush()
    print(ERROR_MARK + json.dumps(dict(payload)), flush=True)
