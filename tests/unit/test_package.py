"""edgekit.consumers.package: app asset sets from verified bundles; what the apps' loader checks at start-up."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgekit.build.bundle import finalize, write_golden
from edgekit.core.errors import BundleError, ConfigError
from edgekit.consumers.package import INDEX, Platform, package, verify_assets


def _bundle(root: Path, name: str, target: str = "arm64", opt: str = "v2.13-rc") -> Path:
    staging = root / f"stage-{name}"
    staging.mkdir(parents=True)
    (staging / "model.nb").write_bytes(b"\x02\x00" + opt.encode().ljust(16, b"\0") + b"\0" * 8)
    (staging / "preprocess.json").write_text('{"inputs": ["x"], "preprocess": null}\n')
    (staging / "task.json").write_text('{"kind": "classification", "options": {}, "primary": "top1"}\n')
    (staging / "host").mkdir()
    (staging / "host" / "model_x86.nb").write_bytes(b"twin")
    golden = write_golden(staging / "golden", {"x": np.zeros((2, 3), np.float32)}, [np.ones((2, 2), np.float32)], ["y"],
                          {"min_cosine": 0.99, "max_abs": None}, None)
    manifest = {"model": {"name": name, "file": "model.nb", "target": target, "precision": "int8", "opt_version": opt,
                          "runtime_required": {"paddlelite": "2.13rc0", "opt_version": opt},
                          "inputs": [{"name": "x", "shape": [-1, 3], "dtype": "float32"}], "outputs": ["y"]},
                "host_twin": {}, "golden": golden, "parity": {}, "config": {}, "task": {"kind": "classification"}}
    return finalize(staging, root / "bundles" / name, manifest).path


def test_asset_set_holds_what_the_app_needs_with_checksums(tmp_path):
    a, b = _bundle(tmp_path, "det"), _bundle(tmp_path, "rec")
    out = tmp_path / "assets"
    index = package([a, b], Platform.android, out)
    assert index["runtime_required"]["opt_version"] == "v2.13-rc" and [m["name"] for m in index["models"]] == ["det", "rec"]
    assert (out / "det" / "model.nb").is_file() and not (out / "det" / "host").exists()     # no x86 twin in an app
    assert json.loads((out / INDEX).read_text()) == index and verify_assets(out) == []
    assert "det/golden/input_0.npy" in index["files"]


def test_a_tampered_asset_set_is_refused(tmp_path):
    out = tmp_path / "assets"
    package([_bundle(tmp_path, "m")], Platform.linux, out)
    (out / "m" / "model.nb").write_bytes(b"\x02\x00changed")
    (out / "m" / "task.json").unlink()
    assert sorted(verify_assets(out)) == ["checksum mismatch: m/model.nb", "missing: m/task.json"]


def test_bundles_for_another_platform_or_runtime_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="built for armv7; ios apps run arm64 models"):
        package([_bundle(tmp_path, "a", target="armv7")], Platform.ios, tmp_path / "o1")
    with pytest.raises(BundleError, match="different opt versions"):
        package([_bundle(tmp_path, "b"), _bundle(tmp_path, "c", opt="v2.12")], Platform.linux, tmp_path / "o2")
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


def test_a_corrupted_bundle_is_not_packaged(tmp_path):
    bundle = _bundle(tmp_path, "m")
    (bundle / "model.nb").write_bytes(b"broken")
    with pytest.raises(BundleError, match="does not verify"):
        package([bundle], Platform.linux, tmp_path / "out")
