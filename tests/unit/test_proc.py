"""edgekit.core.proc: exit codes, deaths by signal, timeouts."""

from __future__ import annotations

import signal
import sys

import pytest

from edgekit.core.errors import ToolError
from edgekit.core.proc import ProcessRecord, run


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.e2e    # starts real processes: the wrapper's subject
def test_exit_code_and_output_are_captured():
    record = run(py("import sys; print('out'); print('e1', file=sys.stderr); print('e2', file=sys.stderr); sys.exit(3)"),
                 timeout=30)
    assert record.returncode == 3
    assert record.signal_name is None
    assert record.stdout == "out\n"
    assert record.tail(1) == "e2"
    assert record.tail() == "e1 | e2"
    assert record.argv[0] == sys.executable
    assert record.seconds > 0


@pytest.mark.e2e    # starts real processes: the wrapper's subject
def test_death_by_sigsegv():
    record = run(py("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"), timeout=30)
    assert record.returncode < 0
    assert record.returncode == -signal.SIGSEGV
    assert record.signal_name == "SIGSEGV"


@pytest.mark.e2e    # starts real processes: the wrapper's subject
def test_timeout_is_a_tool_error():
    with pytest.raises(ToolError, match="sleeper did not finish within") as info:
        run(py("import time; time.sleep(30)"), timeout=0.3, what="sleeper")
    assert info.value.exit_code == 11


@pytest.mark.e2e    # starts real processes: the wrapper's subject
def test_missing_executable_is_a_tool_error(tmp_path):
    with pytest.raises(ToolError, match="could not be started"):
        run([str(tmp_path / "no-such-tool")], timeout=5)


@pytest.mark.e2e    # starts real processes: the wrapper's subject
def test_cwd_and_env_are_passed(tmp_path):
    record = run(py("import os; print(os.getcwd()); print(os.environ['EK_PROBE'])"), timeout=30, cwd=str(tmp_path),
                 env={"EK_PROBE": "42"})
    assert record.stdout.splitlines() == [str(tmp_path), "42"]


def test_record_to_manifest_and_unknown_signal():
    record = ProcessRecord(("tool", "--x"), -200, 1.23456, "lots of output", "err")
    assert record.to_manifest() == {"argv": ["tool", "--x"], "returncode": -200, "seconds": 1.235}
    assert record.signal_name == "signal 200"
    assert ProcessRecord(("t",), 0, 0.0, "only stdout\n", "").tail() == "only stdout"
