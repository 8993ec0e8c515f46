"""The runner's failures as one line: a silent exit still says something to go on."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from edgekit.core.errors import EdgekitError, ToolError
from edgekit.core.proc import ProcessRecord


def _silent_version(monkeypatch, runner: Path) -> EdgekitError:
    """runtime_version on `runner` when the emulator exits 1 and prints nothing (what qemu-user 7.2 does when it cannot
    load the program; tests/native/test_runner.py checks that on the real qemu)."""
    from edgekit.lite import native

    monkeypatch.setattr(native, "emulator_argv", lambda abi, runtime: ["qemu-aarch64"])
    monkeypatch.setattr(native.proc, "run", lambda argv, **kw: ProcessRecord(tuple(argv), 1, 0.1, "", ""))
    with pytest.raises(EdgekitError) as caught:
        native.runtime_version(SimpleNamespace(abi="aarch64", runner=runner), None)
    assert caught.value.exit_status == 1
    return caught.value


def test_a_silent_exit_of_a_loadable_runner_names_the_code_and_the_hosts_free_memory(monkeypatch, tmp_path):
    runner = tmp_path / "edgekit-lite-run"
    runner.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(57))
    runner.chmod(0o755)
    message = _silent_version(monkeypatch, runner).message
    assert message.startswith("edgekit-lite-run --version: exit 1 with nothing on stderr (host memory available: ")
    assert message.endswith(" MB)") or message.endswith("unknown)")


@pytest.mark.parametrize("damage, reason", [
    ("gone", "it does not exist"),                 # a loaded CI run's cached runner, pruned by another checkout's build
    ("not executable", "it is not executable"),
    ("empty", "it is not an ELF file"),
    ("a folder", "it is not a regular file"),
])
def test_a_runner_qemu_cannot_load_is_named_with_the_reason(monkeypatch, tmp_path, damage, reason):
    entry = tmp_path / "native" / "aarch64-0123456789abcdef"
    entry.mkdir(parents=True)
    runner = entry / "edgekit-lite-run"
    if damage == "not executable":
        runner.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(57))
    elif damage == "empty":
        runner.write_bytes(b"")
        runner.chmod(0o755)
    elif damage == "a folder":
        runner.mkdir()
    error = _silent_version(monkeypatch, runner)
    assert isinstance(error, ToolError)
    assert error.message == (f"edgekit-lite-run --version: qemu-aarch64 could not load the runner {runner}: {reason} "
                             "(qemu-user exits 1 without a message then)")
    assert error.hint == f"delete {entry} if it is there and rerun: edgekit builds the runner again"
