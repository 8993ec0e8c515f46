"""Signed asset sets across the language boundary (issue 22): `edgekit package --sign` (Python, cryptography)
writes assets.json.sig; the app core (C++, libsodium) verifies it through the C API (edgekit-capi --pubkey,
ek_open_signed), and both sides refuse the same tampered sets: a changed byte (checksums: C API 8 / edgekit 10),
a re-hashed assets.json, an unsigned set or another key (signature: 16 on both sides)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

REPO = Path(__file__).resolve().parents[2]


# A format-2 parameter section the C++ header reader walks: version 0, 4 bytes of meta data, a 6-byte header
# declaring no parameters (native/core/src/nbfile.cc's empty_nb_model ends the same way).
EMPTY_PARAMS = struct.pack("<HHIHHI", 0, 4, 0, 6, 0, 4)


def _make_bundle(root: Path) -> Path:
    """tests/unit/untrusted_bundles.make_bundle (a complete bundle without a Paddle build), with a model.nb whose
    parameter section the app core's loader accepts, re-hashed into the manifest."""
    spec = importlib.util.spec_from_file_location("untrusted_bundles", REPO / "tests" / "unit" / "untrusted_bundles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    bundle = module.make_bundle(root)
    (bundle / "model.nb").write_bytes(module.nb_bytes(params=EMPTY_PARAMS))
    module.rewrite_manifest(bundle, lambda manifest: None)
    return bundle


def _keys(folder: Path, name: str):
    key = ed25519.Ed25519PrivateKey.generate()
    private, public = folder / f"{name}.pem", folder / f"{name}.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return private, public, hashlib.sha256(raw).hexdigest()[:16]


def _python_verify(folder: Path, pubkey: Path | None) -> int:
    argv = ["package", "--verify", folder] + (["--pubkey", pubkey] if pubkey else [])
    done = subprocess.run([sys.executable, "-c", "from edgekit.cli import main; main()", *map(str, argv)],
                          capture_output=True, text=True, timeout=120)
    return done.returncode


def _capi(build, folder: Path, pubkey: Path | None):
    """edgekit-capi [--pubkey KEY] describe FOLDER: (exit code, described set or None, stderr)."""
    argv = [build.root / "edgekit-capi"] + (["--pubkey", pubkey] if pubkey else []) + ["describe", folder]
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120)
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else None, done.stderr


def _tampered(signed: Path, tmp_path: Path) -> dict:
    """Copies of a signed set with one thing changed each: folder -> (C API exit, edgekit exit, stderr part)."""
    index = json.loads((signed / "assets.json").read_text())
    model = index["models"][0]["dir"]
    cases = {}

    def copy(name):
        return Path(shutil.copytree(signed, tmp_path / name))

    byte = copy("byte")
    nb = byte / model / "model.nb"
    data = bytearray(nb.read_bytes())
    data[len(data) // 2] ^= 1
    nb.write_bytes(bytes(data))
    cases["byte"] = (byte, 8, 10, f"refused (checksum mismatch): {model}/model.nb has sha256")

    index_byte = copy("index-byte")                 # one byte of assets.json itself: a space becomes a tab
    text = (index_byte / "assets.json").read_bytes()
    at = text.index(b" ")
    (index_byte / "assets.json").write_bytes(text[:at] + b"\t" + text[at + 1:])
    cases["index-byte"] = (index_byte, 16, 16, "refused (signature): the signature in assets.json.sig does not match")

    rehashed = copy("rehashed")                     # the 0 -> 7 attack: a spec edited, assets.json re-hashed
    edited = rehashed / model / "preprocess.json"
    spec = json.loads(edited.read_text())
    spec["preprocess"]["mean"] = [7.0]                # the input every app computes changes, the checksums follow
    edited.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    index_edit = json.loads((rehashed / "assets.json").read_text())
    index_edit["files"][f"{model}/preprocess.json"] = {"sha256": hashlib.sha256(edited.read_bytes()).hexdigest(),
                                                       "bytes": edited.stat().st_size}
    (rehashed / "assets.json").write_text(json.dumps(index_edit, indent=2) + "\n")
    cases["rehashed"] = (rehashed, 16, 16, "refused (signature): the signature in assets.json.sig does not match")

    unsigned = copy("unsigned")
    (unsigned / "assets.json.sig").unlink()
    cases["unsigned"] = (unsigned, 16, 16, "refused (signature): the set is not signed (no assets.json.sig)")
    return cases


def _check_both_sides(build, signed: Path, public: Path, key_id: str, other: Path, other_id: str, tmp_path: Path):
    code, described, stderr = _capi(build, signed, public)
    assert code == 0 and described["signed_by"] == key_id, stderr
    assert _python_verify(signed, public) == 0
    code, described, _ = _capi(build, signed, None)           # no key: checksums only, as before
    assert code == 0 and described["signed_by"] is None
    code, _, stderr = _capi(build, signed, other)
    assert code == 16 and f"signed by key {key_id}, not by the app's key {other_id}" in stderr, stderr
    assert _python_verify(signed, other) == 16
    for name, (folder, capi_code, python_code, part) in _tampered(signed, tmp_path).items():
        code, _, stderr = _capi(build, folder, public)
        assert code == capi_code and part in stderr, (name, code, stderr)
        assert "\n" not in stderr.strip() and "; " in stderr, (name, stderr)   # one line: what; fix
        assert _python_verify(folder, public) == python_code, name
        if name in ("rehashed", "unsigned"):        # checksums alone accept these (corruption, not tampering)
            assert _capi(build, folder, None)[0] == 0 and _python_verify(folder, None) == 0, name


def test_python_signs_and_the_c_api_verifies(emulation, edgekit_cli, tmp_path):
    """`edgekit package --sign` on a bundle (made without Paddle), verified by the app core on the host."""
    _, build = emulation("host")
    if "EDGEKIT_HAVE_SIGNATURES:INTERNAL=ON" not in (build.root / "CMakeCache.txt").read_text(errors="replace"):
        pytest.skip("the host build found no libsodium (apt-get install libsodium-dev, or native/install-deps.sh)")
    private, public, key_id = _keys(tmp_path, "key")
    _, other, other_id = _keys(tmp_path, "other")
    signed = tmp_path / "assets"
    edgekit_cli(["package", _make_bundle(tmp_path / "b"), "--platform", "linux", "--out", signed, "--sign", private],
                timeout=300)
    record = json.loads((signed / "assets.json.sig").read_text())
    assert record["schema"] == "edgekit.signature/1"
    assert hashlib.sha256(bytes.fromhex(record["public_key"])).hexdigest()[:16] == key_id
    _check_both_sides(build, signed, public, key_id, other, other_id, tmp_path / "cases")
    # the harness's loader mode takes the same key file
    done = subprocess.run([str(build.root / "edgekit-app-tests"), "--verify", str(signed), "--pubkey", str(public)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout)["signed_by"] == key_id, done.stderr
    done = subprocess.run([str(build.root / "edgekit-app-tests"), "--verify", str(tmp_path / "cases" / "unsigned"),
                           "--pubkey", str(public)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 16 and "refused (signature)" in done.stderr
    # a private key where the public one belongs: refused, with the command that makes the public half
    code, _, stderr = _capi(build, signed, private)
    assert code == 2 and "is a private key" in stderr and "openssl pkey" in stderr


@pytest.mark.e2e
def test_signed_digits_set_verifies_in_the_c_api(emulation, edgekit_cli, digits_fp32, digits_int8, tmp_path):
    """The same on the digits FP32 and INT8 bundles built by the real toolchain."""
    _, build = emulation("host")
    private, public, key_id = _keys(tmp_path, "key")
    _, other, other_id = _keys(tmp_path, "other")
    signed = tmp_path / "assets"
    edgekit_cli(["package", digits_fp32, digits_int8, "--platform", "linux", "--out", signed, "--sign", private])
    _check_both_sides(build, signed, public, key_id, other, other_id, tmp_path / "cases")


def _variants(signed: Path, tmp_path: Path) -> dict:
    """Issue 32's probe: sets on which the two sides used to disagree; name -> (folder, checked with the key)."""
    model = json.loads((signed / "assets.json").read_text())["models"][0]["dir"]
    cases = {}

    def copy(name):
        return Path(shutil.copytree(signed, tmp_path / name, symlinks=True))

    cases["unlisted"] = copy("unlisted")
    (cases["unlisted"] / model / "extra.txt").write_text("x")
    cases["file-link"] = copy("file-link")
    (cases["file-link"] / model / "hostname").symlink_to("/etc/hostname")
    cases["dir-link"] = copy("dir-link")
    (cases["dir-link"] / model / "up").symlink_to(cases["dir-link"], target_is_directory=True)
    cases["fifo"] = copy("fifo")
    os.mkfifo(cases["fifo"] / model / "fifo")
    for name, edit in {"signed-other": lambda r: r.update(signed="model.nb"),
                       "spaced-hex": lambda r: r.update(public_key=" ".join(
                           r["public_key"][i:i + 2] for i in range(0, 64, 2))),
                       "upper-hex": lambda r: r.update(signature=r["signature"].upper())}.items():
        cases[name] = copy(name)
        record = json.loads((cases[name] / "assets.json.sig").read_text())
        edit(record)
        (cases[name] / "assets.json.sig").write_text(json.dumps(record))
    for name, edit in {"dir-up": lambda i: i["models"][0].update(dir="../../.."),
                       "runtime-null": lambda i: i.update(runtime_required=None),
                       "upper-sha": lambda i: i["files"][f"{model}/model.nb"].update(
                           sha256=i["files"][f"{model}/model.nb"]["sha256"].upper()),
                       "no-bytes": lambda i: i["files"][f"{model}/model.nb"].pop("bytes"),
                       "overflow": lambda i: i["runtime_required"].update(paddlelite=1e999)}.items():
        cases[name] = copy(name)
        (cases[name] / "assets.json.sig").unlink()            # unsigned sets, checked without a key
        index = json.loads((cases[name] / "assets.json").read_text())
        edit(index)
        text = json.dumps(index, indent=2)
        (cases[name] / "assets.json").write_text(text.replace("Infinity", "1e999"))
    return cases


def test_both_sides_agree_on_what_a_set_may_contain(emulation, edgekit_cli, tmp_path):
    """docs/security.md's rule, on both readers: exactly the listed regular files, no links or special files, one
    spelling of hex and paths, finite numbers. Each crafted set is refused by the C API and by package --verify."""
    _, build = emulation("host")
    if "EDGEKIT_HAVE_SIGNATURES:INTERNAL=ON" not in (build.root / "CMakeCache.txt").read_text(errors="replace"):
        pytest.skip("the host build found no libsodium (apt-get install libsodium-dev, or native/install-deps.sh)")
    private, public, _ = _keys(tmp_path, "key")
    signed = tmp_path / "assets"
    edgekit_cli(["package", _make_bundle(tmp_path / "b"), "--platform", "linux", "--out", signed, "--sign", private],
                timeout=300)
    assert _capi(build, signed, public)[0] == 0 and _python_verify(signed, public) == 0
    agreed = {}
    for name, folder in _variants(signed, tmp_path / "cases").items():
        key = public if (folder / "assets.json.sig").exists() else None
        capi, _, stderr = _capi(build, folder, key)
        python = _python_verify(folder, key)
        assert capi != 0 and python != 0, (name, capi, python, stderr)
        assert "\n" not in stderr.strip(), (name, stderr)
        agreed[name] = (capi, python)
    assert len(agreed) == 12
