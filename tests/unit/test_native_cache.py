"""The native build cache keeps what a process uses: pruning old keys never removes a runner some process took.

A loaded CI run took its cached runner at the start of a build and asked it for --version minutes later; meanwhile
another checkout sharing the cache built a newer key and pruned it (the entry was over an hour old). qemu-user then
exits 1 without a word. tests/native/test_runner.py replays that on the real runner and qemu."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from edgekit.lite import cmake, native


def _entry(folder: Path, name: str, age_seconds: float) -> Path:
    entry = folder / name
    entry.mkdir(parents=True)
    (entry / "edgekit-build.json").write_text("{}")
    (entry / "edgekit-lite-run").write_bytes(b"\x7fELF")
    then = time.time() - age_seconds
    os.utime(entry, (then, then))
    return entry


def test_prune_keeps_entries_in_use_and_the_newest_and_young_ones(tmp_path):
    folder = tmp_path / "native"
    hour = cmake.PRUNE_AFTER_SECONDS
    in_use = _entry(folder, "aarch64-00000000000000a1", 3 * hour)
    unused = _entry(folder, "aarch64-00000000000000a2", 3 * hour)
    newest = [_entry(folder, f"aarch64-00000000000000b{i}", hour / 10 + i) for i in range(native.CACHE_KEEP - 1)]
    young = _entry(folder, "aarch64-00000000000000a3", hour / 2)       # beyond them, but under an hour old
    other_abi = _entry(folder, "armhf-00000000000000c1", 3 * hour)
    built = _entry(folder, "aarch64-00000000000000d1", 0)
    cmake.use_entry(in_use)            # as build() does for the runner it returns

    native._prune(folder, native.Abi.aarch64, keep=built)

    assert not unused.exists()
    assert all(e.is_dir() for e in (in_use, young, *newest, other_abi, built))
    assert (in_use / "edgekit-lite-run").is_file()
    assert not list(folder.glob(".*.gone-*"))       # removed whole: renamed away, then deleted


def test_an_entry_is_removed_once_no_process_uses_it(tmp_path):
    entry = _entry(tmp_path / "native", "icount-00000000000000e1", 0)
    with open(tmp_path / "native" / f".{entry.name}.use", "a") as other:      # another process's use_entry
        fcntl.flock(other, fcntl.LOCK_SH)
        assert cmake.remove_if_unused(entry) is False
        assert entry.is_dir()
    assert cmake.remove_if_unused(entry) is True
    assert not entry.exists()
    assert cmake.remove_if_unused(entry) is False      # already gone: nothing to do

