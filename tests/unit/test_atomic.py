"""edgekit.core.atomic: a reader sees the old content or the new, never half of it."""

from __future__ import annotations

import json

import pytest

from edgekit.core import atomic


def test_write_json_is_deterministic_and_replaces(tmp_path):
    path = tmp_path / "sub" / "a.json"
    atomic.write_json(path, {"b": 1, "a": [1, 2]})
    first = path.read_bytes()
    atomic.write_json(path, {"a": [1, 2], "b": 1})
    assert path.read_bytes() == first and json.loads(first) == {"a": [1, 2], "b": 1}
    assert [p.name for p in path.parent.iterdir()] == ["a.json"]      # no temp files left


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic.replacing(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed mid-write")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_publish_dir_replaces_an_existing_folder(tmp_path):
    old = tmp_path / "dest"
    old.mkdir()
    (old / "stale").write_text("x")
    with atomic.staging_dir(tmp_path, ".stage-") as staged:
        (staged / "new").write_text("y")
        assert atomic.publish_dir(staged, old)
    assert sorted(p.name for p in old.iterdir()) == ["new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest"]     # staging and the swapped-out copy are gone


def test_publish_dir_keeps_a_good_existing_entry(tmp_path):
    dest = tmp_path / "entry"
    dest.mkdir()
    (dest / "ok").write_text("first writer")
    with atomic.staging_dir(tmp_path, ".stage-") as staged:
        (staged / "ok").write_text("second writer")
        assert not atomic.publish_dir(staged, dest, keep_existing=lambda d: (d / "ok").exists())
    assert (dest / "ok").read_text() == "first writer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]


def test_staging_dir_is_removed_on_failure(tmp_path):
    with pytest.raises(ValueError):
        with atomic.staging_dir(tmp_path, ".stage-") as staged:
            (staged / "partial").write_text("z")
            raise ValueError
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_ctrl_c_between_the_two_renames_keeps_the_old_folder(tmp_path, monkeypatch, interrupt):
    """Issue 32: Ctrl-C (or SIGTERM, which the CLI turns into SystemExit) after the old bundle was moved aside and
    before the new one was moved in used to delete the old one too: no bundle at all."""
    import os

    destination, staged = tmp_path / "bundle", tmp_path / "staged"
    destination.mkdir()
    (destination / "model.nb").write_text("old")
    staged.mkdir()
    (staged / "model.nb").write_text("new")
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:              # the second rename: staged -> destination
            raise interrupt()
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(interrupt):
        atomic.publish_dir(staged, destination)
    assert (destination / "model.nb").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "staged"]
