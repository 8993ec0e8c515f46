"""Bundles made by someone else (issue 22): names, links, paths, golden vectors and the version lock are checked
before anything is copied, hashed or run; every refusal is one typed error, nothing is written."""

from __future__ import annotations

import json
import os
import re
import stat

import numpy as np
import pytest
from typer.testing import CliRunner
from untrusted_bundles import make_bundle, nb_bytes, rewrite_manifest

from edgekit.consumers import inspection
from edgekit.build.bundle import MANIFEST, load, verify
from edgekit.cli import app
from edgekit.core.errors import BundleError, ConfigError, VersionLockError
from edgekit.consumers.package import INDEX, Platform, package, verify_assets


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _listing(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


# --- 1. a model name is a folder name --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../../X", "/tmp/abs", "./digits", "a/b", "..", "", "x" * 65, "ok\0no"])
def test_a_model_name_that_is_no_safe_folder_name_is_refused_and_nothing_is_written(tmp_path, name):
    bundle = make_bundle(tmp_path / "work", name)
    before = _listing(tmp_path)
    with pytest.raises(BundleError, match="model.name is .*expected a name of 1-64 letters") as info:
        package([bundle], Platform.linux, tmp_path / "work" / "out" / "assets")
    assert info.value.exit_code == 10
    assert _listing(tmp_path) == before            # no X beside the output, no staging folder left


def test_the_cli_says_so_in_one_line(tmp_path):
    bundle = make_bundle(tmp_path, "../../X")
    result = _invoke("package", bundle, "--platform", "linux", "--out", tmp_path / "o" / "assets")
    assert result.exit_code == 10 and "model.name is \"../../X\"" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "X").exists() and not (tmp_path / "o").exists()


# --- 2. links and paths outside the bundle ---------------------------------------------------------------------------

def test_a_symlinked_directory_in_a_bundle_is_refused_not_copied(tmp_path):
    secrets = tmp_path / "home" / ".ssh"
    secrets.mkdir(parents=True)
    (secrets / "id_ed25519").write_text("PRIVATE KEY")
    bundle = make_bundle(tmp_path)
    os.symlink(secrets, bundle / "golden" / "x")
    assert verify(load(bundle)) == ["symbolic link: golden/x"]
    with pytest.raises(BundleError, match="does not verify: symbolic link: golden/x"):
        package([bundle], Platform.linux, tmp_path / "assets")
    assert not (tmp_path / "assets").exists()


def test_a_symlinked_file_is_refused_even_when_the_manifest_lists_it_with_its_hash(tmp_path):
    (tmp_path / "secret.txt").write_text("TOKEN")
    bundle = make_bundle(tmp_path)
    os.symlink(tmp_path / "secret.txt", bundle / "golden" / "notes.txt")
    rewrite_manifest(bundle, lambda m: None)          # file_table follows no link: re-list what is there
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["files"]["golden/notes.txt"] = {"sha256": "0" * 64, "bytes": 5}
    (bundle / MANIFEST).write_text(json.dumps(manifest))
    assert verify(load(bundle)) == ["symbolic link: golden/notes.txt"]


@pytest.mark.parametrize("rel", ["../secret.txt", "/etc/hostname", "golden/../../secret.txt", "a\\..\\b", "./model.nb"])
def test_manifest_paths_outside_the_bundle_are_refused_before_anything_is_hashed(tmp_path, rel):
    (tmp_path / "secret.txt").write_text("TOKEN")
    bundle = make_bundle(tmp_path)

    def edit(m):
        m["files"][rel] = {"sha256": "1" * 64, "bytes": 5}
    rewrite_manifest(bundle, edit, rehash=False)
    with pytest.raises(BundleError, match="not a relative path inside the bundle"):
        load(bundle)


def test_the_model_file_must_be_inside_the_bundle(tmp_path):
    bundle = make_bundle(tmp_path)
    rewrite_manifest(bundle, lambda m: m["model"].update(file="../model.nb"))
    with pytest.raises(BundleError, match="model.file is \"../model.nb\", expected a relative path"):
        load(bundle)


def test_the_asset_set_holds_exactly_the_listed_files(tmp_path):
    out = tmp_path / "assets"
    index = package([make_bundle(tmp_path)], Platform.android, out)
    assert sorted(index["files"]) == ["digits/golden/golden.json", "digits/golden/input_0.npy",
                                      "digits/golden/output_0.npy", "digits/labels.txt", "digits/manifest.json",
                                      "digits/model.nb", "digits/preprocess.json", "digits/task.json"]
    assert verify_assets(out) == []


@pytest.mark.parametrize("rel, meta, needle", [
    ("../outside", {"sha256": "0" * 64, "bytes": 1}, "files lists '../outside', which is not a relative path"),
    ("digits/model.nb", {"bytes": 3}, r'files\["digits/model.nb"\].sha256 is missing'),
])
def test_verify_assets_refuses_paths_out_of_the_set_and_mistyped_entries(tmp_path, rel, meta, needle):
    out = tmp_path / "assets"
    package([make_bundle(tmp_path)], Platform.linux, out)
    index = json.loads((out / INDEX).read_text())
    index["files"][rel] = meta
    (out / INDEX).write_text(json.dumps(index))
    problems = verify_assets(out)
    assert len(problems) == 1 and problems[0].startswith("assets.json unusable") and re.search(needle, problems[0])


def test_verify_assets_reports_links_and_unlisted_files(tmp_path):
    out = tmp_path / "assets"
    package([make_bundle(tmp_path)], Platform.linux, out)
    (out / "digits" / "extra.bin").write_bytes(b"x")
    os.symlink(tmp_path, out / "digits" / "golden" / "up")
    assert verify_assets(out) == ["symbolic link: digits/golden/up", "not in assets.json: digits/extra.bin"]


# --- 5. golden vectors must fit the model before Paddle-Lite sees them ------------------------------------------------

@pytest.mark.parametrize("edit, needle", [
    (lambda g: g["inputs"][0].update(name="../../x"), r"golden inputs \['../../x'\] are not the model's inputs \['x'\]"),
    (lambda g: g["inputs"][0].update(dtype="int64"), "golden input 'x' is int64"),
    (lambda g: g["inputs"][0].update(shape=[2, 1, 9, 8]), r"golden input 'x' is float32 \[2, 1, 9, 8\]"),
    (lambda g: g["inputs"][0].update(shape=[3, 1, 8, 8]), r"for 2 samples"),
    (lambda g: g["inputs"].append(dict(g["inputs"][0], name="y")), "are not the model's inputs"),
    (lambda g: g["outputs"][0].update(name="z"), r"golden outputs \['z'\] are not the model's outputs"),
])
def test_golden_inputs_that_are_not_the_models_are_refused(tmp_path, edit, needle):
    bundle = make_bundle(tmp_path, edit=lambda m: edit(m["golden"]))
    with pytest.raises(BundleError, match=needle):
        inspection.replay_golden(bundle)                # before: the name went to Paddle-Lite (exit 139)


def test_a_golden_file_must_hold_what_the_manifest_declares(tmp_path):
    bundle = make_bundle(tmp_path)
    np.save(bundle / "golden" / "input_0.npy", np.zeros((2, 1, 8, 9), np.float32))
    rewrite_manifest(bundle, lambda m: None)
    with pytest.raises(BundleError, match=r"input_0.npy is float32 \[2, 1, 8, 9\], but the manifest says float32 "):
        inspection.golden_vectors(inspection.verified(bundle))


# --- 6. the version lock ---------------------------------------------------------------------------------------------

def test_package_takes_the_version_from_the_nb_header_and_refuses_a_manifest_that_disagrees(tmp_path):
    bundle = make_bundle(tmp_path, nb_opt="v2.12")
    with pytest.raises(VersionLockError, match="was written by opt v2.12, but the manifest says v2.13-rc") as info:
        package([bundle], Platform.linux, tmp_path / "assets")
    assert info.value.exit_code == 3 and not (tmp_path / "assets").exists()


def test_inspect_of_a_bundle_breaking_the_version_lock_exits_3_after_the_description(tmp_path, monkeypatch):
    monkeypatch.setattr(inspection, "_host_runtime_version", lambda: None)     # no paddle_lite_opt child
    bundle = make_bundle(tmp_path, nb_opt="v2.12")
    result = _invoke("inspect", bundle)
    assert result.exit_code == 3, result.output
    assert "model digits: arm64" in result.output and "error: version lock:" in result.output
    assert _invoke("inspect", make_bundle(tmp_path, "fine")).exit_code == 0


@pytest.mark.parametrize("where", ["model.nb", "host/model_x86.nb"])
def test_run_and_parity_refuse_a_model_or_twin_of_another_version(tmp_path, where):
    from edgekit.consumers.predict import BundleModel

    bundle = make_bundle(tmp_path)
    (bundle / where).write_bytes(nb_bytes("v2.12"))
    rewrite_manifest(bundle, lambda m: None)
    with pytest.raises(VersionLockError, match=f"{where} was written by opt v2.12"):
        inspection.replay_golden(bundle)
    with pytest.raises(VersionLockError):
        BundleModel.load(bundle, runner=object())


# --- 7. malformed manifests: a typed error, never a traceback ---------------------------------------------------------

def test_a_deeply_nested_manifest_names_the_depth_limit(tmp_path):
    bundle = make_bundle(tmp_path)
    for depth in (100, 100_000):
        (bundle / MANIFEST).write_text('{"schema": "edgekit.bundle/1", "model": ' + "[" * depth + "]" * depth + "}")
        with pytest.raises(BundleError, match="MAX_JSON_DEPTH = 64"):
            load(bundle)


def test_an_oversized_manifest_names_the_size_limit(tmp_path, monkeypatch):
    from edgekit.core import limits

    monkeypatch.setattr(limits, "MAX_JSON_BYTES", 1000)
    bundle = make_bundle(tmp_path)
    with pytest.raises(BundleError, match="beyond the limit MAX_JSON_BYTES = 1,000"):
        load(bundle)


def test_a_file_entry_without_sha256_is_a_bundle_error(tmp_path):
    bundle = make_bundle(tmp_path)
    rewrite_manifest(bundle, lambda m: m["files"]["model.nb"].pop("sha256"), rehash=False)
    with pytest.raises(BundleError, match=r'files\["model.nb"\].sha256 is missing'):
        package([bundle], Platform.linux, tmp_path / "assets")


def test_the_same_bundle_twice_or_names_equal_but_for_case_are_refused(tmp_path, monkeypatch):
    bundle = make_bundle(tmp_path)
    monkeypatch.chdir(bundle.parent)
    with pytest.raises(ConfigError, match="two bundles of the same model name"):
        package([bundle.name, f"./{bundle.name}"], Platform.linux, tmp_path / "a1")
    upper = make_bundle(tmp_path, "Digits")
    with pytest.raises(ConfigError, match=r"Digits, digits; names that differ only in case collide"):
        package([upper, bundle], Platform.linux, tmp_path / "a2")
    assert not (tmp_path / "a1").exists() and not (tmp_path / "a2").exists()


# --- 9. what the asset set looks like on disk; wording ----------------------------------------------------------------

def test_published_asset_sets_are_readable_by_others(tmp_path):
    old = os.umask(0o022)
    try:
        out = tmp_path / "assets"
        package([make_bundle(tmp_path)], Platform.linux, out)
    finally:
        os.umask(old)
    modes = {p.relative_to(out).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [out, *out.rglob("*")]}
    assert modes["."] == 0o755 and modes[INDEX] == 0o644 and modes["digits"] == 0o755
    assert set(modes.values()) == {0o755, 0o644}


def test_a_bundle_in_the_wrong_place_of_the_ocr_system_is_named_with_its_article():
    from edgekit.consumers.predict import ocr_system
    from edgekit.tasks import make_task

    class Fake:
        path, task = "det-bundle", make_task("ocr_det", {})
    with pytest.raises(BundleError, match="det-bundle is an ocr_det bundle, not ocr_rec"):
        ocr_system(np.zeros((4, 4, 3), np.uint8), Fake(), Fake())

