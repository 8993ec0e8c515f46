"""What every test tier shares: the policy for tests that need ARM emulation (tier C, native/ on ARM).

Without EDGEKIT_LITE_ARM (Paddle-Lite's ARM Linux runtime), a cross compiler, qemu or
cmake they skip and say why; with EDGEKIT_REQUIRE_EMULATION=1 (CI sets it) they fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def emulation_required() -> bool:
    return os.environ.get("EDGEKIT_REQUIRE_EMULATION", "").strip().lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """Skip, or fail when emulation is required: never a silent pass."""
    if emulation_required():
        pytest.fail(f"EDGEKIT_REQUIRE_EMULATION=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def lite_arm() -> Path:
    """The ARM runtime folder (EDGEKIT_LITE_ARM) with the tools to use it, for aarch64 at least."""
    from edgekit.core.errors import ConfigError, EmulationUnavailable
    from edgekit.lite import native

    root = os.environ.get("EDGEKIT_LITE_ARM")
    if not root:
        unavailable("EDGEKIT_LITE_ARM is not set (the folder holding inference_lite_lib.armlinux.armv8)")
    try:
        native.check_tools("aarch64")
        native.find_runtime(root, "aarch64")
    except (EmulationUnavailable, ConfigError) as exc:
        unavailable(f"{exc.message} ({exc.hint})")
    return Path(root)


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request, monkeypatch):
    """The fast tier (`-m "not e2e and not native"`) starts no tool: a test that starts a process is marked e2e or
    native (or lives in tests/e2e, tests/native, tests/apps)."""
    if request.node.get_closest_marker("e2e") or request.node.get_closest_marker("native"):
        return
    import subprocess

    import platform

    import numpy.testing  # noqa: F401  (its first import runs lscpu: a library's probe, not a tool the test starts)

    platform.platform()   # caches uname -p the same way
    import matplotlib.font_manager  # noqa: F401  (its import builds the font cache with fc-list: a library's probe too)

    def refuse(*args, **kwargs):
        raise AssertionError(f"{request.node.nodeid} started a process in the fast tier: mark it e2e or native")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)


def pytest_sessionfinish(session, exitstatus):
    """Worker processes still alive when the tests end would keep Python's exit waiting on their pool for ever (a CI
    run once passed every test and then hung until its time ran out): kill them, and fail the run naming them."""
    import multiprocessing

    leaked = multiprocessing.active_children()
    for child in leaked:
        child.kill()
        child.join(timeout=10)
    if leaked:
        names = ", ".join(f"{child.name} (pid {child.pid})" for child in leaked)
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"worker processes outlived the tests and were killed: {names}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
