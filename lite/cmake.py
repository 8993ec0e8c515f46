"""Building native/ with CMake: where its sources are, which files are build inputs, the tools' versions."""

from __future__ import annotations

import shutil
from pathlib import Path

from edgekit.core import proc
from edgekit.core.errors import EmulationUnavailable

NATIVE_DIR = Path(__file__).resolve().parents[1] / "native"
NOT_BUILD_INPUTS = (".md", ".sh")   # native/'s README and install-deps.sh change no binary
PRUNE_AFTER_SECONDS = 3600  # never remove a build younger than this: a concurrent process may be using it


def tool_line(argv: list[str]) -> str:
    """The first line a tool prints for `argv` (its version), or why it gave none: part of a build's key."""
    done = proc.run(argv, timeout=60, what=argv[0])
    return (done.stdout or done.stderr).strip().splitlines()[0] if done.returncode == 0 else f"{argv[0]}: exit {done.returncode}"


def native_dir() -> Path:
    if not (NATIVE_DIR / "CMakeLists.txt").is_file():
        raise EmulationUnavailable(f"edgekit's native sources are not at {NATIVE_DIR}",
                                   "install edgekit from its repository (pip install -e <checkout>)")
    return NATIVE_DIR


def cmake_generator() -> str:
    return "Ninja" if shutil.which("ninja") else "Unix Makefiles"
