"""Atomic writes: a reader sees the old content or the new, never half of a file or folder.

Every file or folder edgekit publishes (bundles, pruned-model folders, cache
entries, truth files, reports) is written under a temporary name beside its
destination (same filesystem, so the final rename is atomic) and renamed into
place only when complete. A failure or a kill leaves the destination untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block succeeds it replaces `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())     # mkstemp makes 0600; published files are as readable as any other
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path: Path, text: str) -> None:
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: Path, value: Any, *, indent: int | None = 2) -> None:
    """Sorted keys and a final newline: the same value always gives the same bytes."""
    write_text(path, json.dumps(value, indent=indent, sort_keys=True, ensure_ascii=False, default=str) + "\n")


@contextmanager
def staging_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A fresh folder inside `parent` (absolute: PaddleSlim changes the working directory), removed afterwards.

    Publish what it holds with `publish_dir` before the block ends; anything left is deleted.
    """
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent)).absolute()
    os.chmod(folder, 0o777 & ~_umask())      # mkdtemp makes 0700; a published folder is as readable as any other
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def publish_dir(staged: Path, destination: Path, *, keep_existing: Callable[[Path], bool] | None = None) -> bool:
    """Move the finished folder `staged` to `destination` in one rename; True if it was moved.

    An existing destination is swapped out and deleted after the rename (restored if
    the rename fails), unless `keep_existing(destination)` says it is already good:
    a cache entry that a concurrent writer published first, say. Then `staged` is
    left for the caller's `staging_dir` to delete.
    """
    staged, destination = Path(staged), Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    if destination.exists() and keep_existing is not None and keep_existing(destination):
        return False
    old = None
    if destination.exists():
        old = destination.with_name(f".{destination.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(destination, old)
    try:
        os.replace(staged, destination)
    except BaseException as error:
        # a Ctrl-C (KeyboardInterrupt) or SIGTERM (SystemExit) between the two renames too: the old folder goes
        # back, never deleted with no new one in its place
        if old is not None and not destination.exists():
            os.replace(old, destination)
        if isinstance(error, OSError) and keep_existing is not None and destination.exists() \
                and keep_existing(destination):
            return False        # lost a race to a writer of the same good content
        raise
    finally:
        if old is not None and old.exists():
            shutil.rmtree(old, ignore_errors=True)
    return True
