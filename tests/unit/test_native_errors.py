"""The runner's failures as one line: a silent exit still says something to go on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from edgekit.core.errors import EdgekitError
from edgekit.core.proc import ProcessRecord


def test_a_silent_runner_exit_names_the_code_and_the_hosts_free_memory(monkeypatch):
    # a loaded CI run saw `edgekit-lite-run --version: exit 1` and nothing else while ~1 GB of memory was free
    from edgekit.lite import native

    monkeypatch.setattr(native, "emulator_argv", lambda abi, runtime: ["qemu-aarch64"])
    monkeypatch.setattr(native.proc, "run", lambda argv, **kw: ProcessRecord(tuple(argv), 1, 0.1, "", ""))
    with pytest.raises(EdgekitError) as caught:
        native.runtime_version(SimpleNamespace(abi="aarch64", runner="edgekit-lite-run"), None)
    message = caught.value.message
    assert message.startswith("edgekit-lite-run --version: exit 1 with nothing on stderr (host memory available: ")
    assert message.endswith(" MB)") or message.endswith("unknown)")
