"""Optional Ed25519 signatures over assets.json (issue 22): a signed set verifies with its public key; one byte
changed anywhere, a re-hashed assets.json without the key, an unsigned set or another key is refused (exit 10/16)."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from typer.testing import CliRunner
from untrusted_bundles import make_bundle

from edgekit.cli import app
from edgekit.core.errors import BundleError, ConfigError, SignatureError
from edgekit.consumers.package import INDEX, SIGNATURE, Platform, _file_table, package, verify_set


def _keys(folder, name="key"):
    key = ed25519.Ed25519PrivateKey.generate()
    private, public = folder / f"{name}.pem", folder / f"{name}.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


@pytest.fixture()
def signed(tmp_path):
    private, public = _keys(tmp_path)
    out = tmp_path / "assets"
    package([make_bundle(tmp_path)], Platform.android, out, sign=private)
    return out, public


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_signed_set_verifies_with_its_public_key(signed):
    out, public = signed
    record = json.loads((out / SIGNATURE).read_text())
    assert record["algorithm"] == "ed25519" and record["signed"] == INDEX and len(record["signature"]) == 128
    assert verify_set(out, public)[1].startswith("signature verifies: signed by key ")
    result = _invoke("package", "--verify", out, "--pubkey", public)
    assert result.exit_code == 0 and "signature verifies" in result.output


def test_one_byte_changed_anywhere_is_refused(signed):
    out, public = signed
    data = bytearray((out / "digits" / "model.nb").read_bytes())
    data[-1] ^= 1
    (out / "digits" / "model.nb").write_bytes(bytes(data))
    with pytest.raises(BundleError, match="does not verify: checksum mismatch: digits/model.nb"):
        verify_set(out, public)
    assert _invoke("package", "--verify", out, "--pubkey", public).exit_code == 10


def test_a_rehashed_assets_json_without_the_key_is_refused(signed):
    out, public = signed
    (out / "digits" / "preprocess.json").write_text('{"inputs": ["x"], "preprocess": null}\n')   # the 0 -> 7 attack
    index = json.loads((out / INDEX).read_text())
    index["files"] = _file_table(out)
    del index["files"][SIGNATURE]
    (out / INDEX).write_text(json.dumps(index))
    assert verify_set(out)[1].startswith("signed by key")      # checksums alone are fooled: corruption, not tampering
    with pytest.raises(SignatureError, match="does not match assets.json") as info:
        verify_set(out, public)
    assert info.value.exit_code == 16
    result = _invoke("package", "--verify", out, "--pubkey", public)
    assert result.exit_code == 16 and "Traceback" not in result.output


def test_unsigned_or_signed_by_another_key_is_refused_when_a_key_is_given(tmp_path, signed):
    out, public = signed
    _, other = _keys(tmp_path, "other")
    with pytest.raises(SignatureError, match="is signed by key [0-9a-f]{16}, not by"):
        verify_set(out, other)
    (out / SIGNATURE).unlink()
    assert verify_set(out)[1] == "unsigned: the checksums detect corruption, not tampering"
    result = _invoke("package", "--verify", out, "--pubkey", public)
    assert result.exit_code == 16 and "is not signed" in result.output


def test_a_mangled_signature_file_is_a_signature_error(signed):
    out, public = signed
    (out / SIGNATURE).write_text('{"schema": "edgekit.signature/1", "algorithm": "ed25519", "public_key": 5}')
    with pytest.raises(SignatureError, match="is not an edgekit.signature/1 record"):
        verify_set(out, public)


def test_a_bad_signing_key_fails_before_anything_is_written(tmp_path):
    (tmp_path / "key.pem").write_text("not a key")
    with pytest.raises(ConfigError, match="not an unencrypted PEM private key"):
        package([make_bundle(tmp_path)], Platform.linux, tmp_path / "assets", sign=tmp_path / "key.pem")
    assert not (tmp_path / "assets").exists()
    result = _invoke("package", make_bundle(tmp_path, "other"), "--platform", "linux", "--out", tmp_path / "a",
                     "--sign", tmp_path / "key.pem")
    assert result.exit_code == 2 and not (tmp_path / "a").exists()


def test_the_cli_signs_and_verifies(tmp_path):
    private, public = _keys(tmp_path)
    out = tmp_path / "assets"
    result = _invoke("package", make_bundle(tmp_path), "--platform", "linux", "--out", out, "--sign", private)
    assert result.exit_code == 0 and "signed:" in result.output and (out / SIGNATURE).is_file()
    assert _invoke("package", "--verify", out, "--pubkey", public).exit_code == 0
    assert _invoke("package", "--verify", out, "--pubkey", public, "--sign", private).exit_code == 2
