"""Building native/ with CMake: where its sources are, which files are build inputs, the tools' versions, and the
cache entries' in-use marks (`use_entry`, `remove_if_unused`) and pruning (`prune`)."""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from pathlib import Path
from typing import IO

from edgekit.core import proc
from edgekit.core.errors import EmulationUnavailable

NATIVE_DIR = Path(__file__).resolve().parents[1] / "native"
NOT_BUILD_INPUTS = (".md", ".sh")   # native/'s README and install-deps.sh change no binary
PRUNE_AFTER_SECONDS = 3600  # never remove a build younger than this (a process that does not mark its use, e.g. an
                            # older checkout sharing the cache, may be running it)

# Cache entries this process uses -> the open file holding its shared lock. Process-wide state on purpose: a lock
# must live as long as the process may run the entry's binaries, and the OS releases it when the process ends.
_IN_USE: dict[str, IO[str]] = {}


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


def _use_file(entry: Path) -> Path:
    return entry.parent / f".{entry.name}.use"


def use_entry(entry: Path) -> None:
    """Mark the cache entry `entry` (a folder) as used by this process until it exits: a shared flock on
    `.<name>.use` beside it, which `remove_if_unused` in any process respects. Take it before looking into the
    entry: a removal that started first then finishes first, and the caller finds the entry gone and rebuilds it.

    Why: cache entries of other keys are pruned when a new key is built, and several checkouts share the cache.
    A CI run took its runner at the start of a build and asked it for --version minutes later, after another
    checkout's build had pruned it; qemu-user then exits 1 without a word (see `unloadable`)."""
    name = str(entry)
    if name in _IN_USE:
        return
    entry.parent.mkdir(parents=True, exist_ok=True)
    handle = _use_file(entry).open("a")
    fcntl.flock(handle, fcntl.LOCK_SH)        # waits only while a removal of this entry is under way
    _IN_USE[name] = handle                     # closed (and the lock released) when the process ends


def remove_if_unused(entry: Path) -> bool:
    """Delete the cache entry unless some process uses it (`use_entry`); True if it was removed. The folder is
    renamed away before it is deleted, so it disappears whole, never half-deleted under a reader."""
    with _use_file(entry).open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        gone = entry.with_name(f".{entry.name}.gone-{os.getpid()}")
        try:
            os.replace(entry, gone)
        except FileNotFoundError:
            return False
        shutil.rmtree(gone, ignore_errors=True)
        return True


def prune(folder: Path, prefix: str, keep: Path, keep_newest: int = 0) -> None:
    """The cache entries `folder/<prefix>*` other than `keep` go, but the `keep_newest` newest of them, any built
    in the last PRUNE_AFTER_SECONDS and any a process uses (`remove_if_unused`); so do the remains of a removal
    that could not delete a renamed entry whole."""
    now = time.time()
    ages = {p: age_seconds(p, now) for p in folder.glob(f"{prefix}*") if p.is_dir() and p != keep}
    entries = sorted((p for p, age in ages.items() if age is not None), key=lambda p: ages[p])
    for old in entries[keep_newest:]:
        if ages[old] > PRUNE_AFTER_SECONDS:
            remove_if_unused(old)
    for gone in folder.glob(f".{prefix}*.gone-*"):
        if (age_seconds(gone, now) or 0) > PRUNE_AFTER_SECONDS:
            shutil.rmtree(gone, ignore_errors=True)


def age_seconds(path: Path, now: float) -> float | None:
    """Seconds since `path` last changed, None when it is gone (a concurrent prune took it)."""
    try:
        return now - path.stat().st_mtime
    except FileNotFoundError:
        return None
