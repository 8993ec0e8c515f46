"""edgekit.build.bundle: golden vectors, atomic finalize, load and verify."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from edgekit.build.bundle import MANIFEST, SCHEMA, finalize, load, verify, write_golden
from edgekit.core.errors import BundleError

NB_BYTES = b"\x02\x00fake-nb" * 10
TOLERANCES = {"min_cosine": 0.999, "max_abs": 1e-3}


def stage(folder: Path) -> dict:
    folder.mkdir(parents=True)
    (folder / "model.nb").write_bytes(NB_BYTES)
    (folder / "preprocess.json").write_text('{"inputs": ["x"]}\n', encoding="utf-8")
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    outputs = [np.array([[0.1, 0.9], [0.7, 0.3]], np.float32)]
    return write_golden(folder / "golden", feeds, outputs, ["prob"], dict(TOLERANCES), np.array([1, 0], np.int32))


def minimal(golden: dict) -> dict:
    """The fields load() requires, with just enough in them for these tests."""
    return {"model": {"name": "digits", "file": "model.nb", "target": "arm64", "precision": "int8",
                      "opt_version": "v2.13-rc", "runtime_required": {"paddlelite": "2.13rc0", "opt_version": "v2.13-rc"},
                      "inputs": [{"name": "x", "shape": [-1, 3], "dtype": "float32"}], "outputs": ["prob"]},
            "host_twin": {}, "golden": golden, "parity": {}, "config": {}}


def test_write_golden(tmp_path):
    entry = stage(tmp_path / "s")
    golden = tmp_path / "s" / "golden"
    assert entry["count"] == 2
    assert entry["inputs"] == [{"name": "x", "file": "golden/input_0.npy", "shape": [2, 3], "dtype": "float32"}]
    assert entry["outputs"] == [{"name": "prob", "file": "golden/output_0.npy", "shape": [2, 2], "dtype": "float32"}]
    assert entry["labels"] == "golden/labels.npy"
    assert entry["tolerances"] == TOLERANCES
    assert json.loads((golden / "golden.json").read_text(encoding="utf-8")) == entry
    np.testing.assert_array_equal(np.load(golden / "input_0.npy"), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(np.load(golden / "output_0.npy"), np.array([[0.1, 0.9], [0.7, 0.3]], np.float32))
    labels = np.load(golden / "labels.npy")
    assert labels.dtype == np.int64 and labels.tolist() == [1, 0]


def test_write_golden_without_labels(tmp_path):
    entry = write_golden(tmp_path / "g", {"a": np.zeros((3, 1)), "b": np.ones((3, 2))}, [], [], {}, None)
    assert "labels" not in entry and entry["count"] == 3
    assert [i["file"] for i in entry["inputs"]] == ["golden/input_0.npy", "golden/input_1.npy"]
    assert not (tmp_path / "g" / "labels.npy").exists()


def test_finalize_into_new_destination(tmp_path):
    golden = stage(tmp_path / "staging")
    dest = tmp_path / "build" / "digits" / "arm64-int8"
    bundle = finalize(tmp_path / "staging", dest, minimal(golden))
    assert bundle.path == dest
    assert bundle.nb_file == dest / "model.nb"
    assert not (tmp_path / "staging").exists()
    files = bundle.manifest.files
    assert sorted(files) == ["golden/golden.json", "golden/input_0.npy", "golden/labels.npy",
                             "golden/output_0.npy", "model.nb", "preprocess.json"]
    assert (files["model.nb"].sha256, files["model.nb"].bytes) == (hashlib.sha256(NB_BYTES).hexdigest(), len(NB_BYTES))
    on_disk = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))
    assert on_disk["schema"] == SCHEMA and on_disk == bundle.manifest.to_json()
    loaded = load(dest)
    assert loaded.manifest == bundle.manifest
    assert verify(loaded) == []


def test_finalize_replaces_existing_destination(tmp_path):
    dest = tmp_path / "out" / "b"
    dest.mkdir(parents=True)
    (dest / "stale.txt").write_text("old build")
    (dest / "model.nb").write_bytes(b"old")
    golden = stage(tmp_path / "staging")
    finalize(tmp_path / "staging", dest, minimal(golden))
    assert not (dest / "stale.txt").exists()
    assert (dest / "model.nb").read_bytes() == NB_BYTES
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["b"]      # no b.old-<pid> left over
    assert verify(load(dest)) == []


@pytest.fixture()
def built(tmp_path):
    golden = stage(tmp_path / "staging")
    dest = tmp_path / "bundle"
    finalize(tmp_path / "staging", dest, minimal(golden))
    return dest


def test_verify_reports_tampering(built):
    (built / "model.nb").write_bytes(NB_BYTES + b"!")
    (built / "golden" / "output_0.npy").unlink()
    (built / "extra.txt").write_text("sneaked in")
    (built / "golden" / "more.npy").write_bytes(b"x")
    assert sorted(verify(load(built))) == [
        "checksum mismatch: model.nb",
        "missing: golden/output_0.npy",
        "not in manifest: extra.txt",
        "not in manifest: golden/more.npy",
    ]


def test_load_rejects_non_bundles(tmp_path):
    with pytest.raises(BundleError, match="has no manifest.json") as info:
        load(tmp_path)
    assert info.value.exit_code == 10
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(BundleError, match="not valid JSON"):
        load(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"schema": "other/9", "files": {}}))
    with pytest.raises(BundleError, match="schema 'other/9'"):
        load(tmp_path)


@pytest.mark.parametrize("text, needle", [("[1, 2]", "schema 'list'"),
                                          ('{"schema": "edgekit.bundle/1"}', "lacks model, host_twin")])
def test_load_rejects_manifests_that_are_not_bundles(tmp_path, text, needle):
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(BundleError, match=needle):
        load(tmp_path)
