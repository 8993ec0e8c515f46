"""`edgekit device`: option errors, the cheap help, and a corrupted bundle refused before any device is contacted."""

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from typer.testing import CliRunner
from untrusted_bundles import document

from edgekit.cli import app


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.e2e    # the CLI in a fresh interpreter
def test_device_help_does_not_import_the_toolchain():
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom edgekit.cli import app\n"
            "for args in (['device', '--help'], ['device', 'test', '--help'], ['device', 'list', '--help']):\n"
            "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
            "print(sorted(m for m in ('paddle', 'paddlelite', 'cv2', 'matplotlib', 'numpy') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == "[]"


def test_bad_options_are_one_line_errors(tmp_path):
    result = invoke("device", "test", tmp_path, "--device", "usb:1")
    assert result.exit_code == 2 and "is not adb:SERIAL, ssh:user@host[:port] or qemu[:cpu]" in result.output
    result = invoke("device", "test", tmp_path, "--device", "qemu", "--device", "adb:X", "--baseline", tmp_path / "b.json")
    assert result.exit_code == 2 and "use --baseline-dir DIR" in result.output
    result = invoke("device", "test", tmp_path, "--device", "qemu", "--runner-env", "no-equals")
    assert result.exit_code == 2 and "is not NAME=VALUE" in result.output


def fake_bundle(folder):
    """A bundle whose manifest lists model.nb with another checksum: what a corrupted copy looks like."""
    folder.mkdir(parents=True)
    (folder / "model.nb").write_bytes(b"\x02\x00v2.13-rc" + bytes(100))
    manifest = document("tiny")
    manifest["files"] = {"model.nb": {"sha256": "0" * 64, "bytes": 110}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_a_corrupted_bundle_fails_at_once_without_touching_the_device(tmp_path, monkeypatch):
    monkeypatch.delenv("EDGEKIT_LITE_ARM", raising=False)    # not even a runtime is needed to refuse it
    bundle = fake_bundle(tmp_path / "tiny" / "arm64-fp32")
    start = time.monotonic()
    result = invoke("device", "test", bundle, "--device", "ssh:nobody@192.0.2.1", "--junit", tmp_path / "j.xml",
                    "--json", tmp_path / "r.json")
    assert time.monotonic() - start < 5
    assert result.exit_code == 10
    assert "does not verify: checksum mismatch: model.nb" in result.output
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert run["status"] == "error" and run["complete"] is False and run["device"]["facts"] is None
    assert run["latency"] is None and run["launches"] == []
    case = ET.parse(tmp_path / "j.xml").getroot().find("testsuite/testcase")
    assert case.get("name") == "bundle integrity" and "checksum mismatch" in case.find("failure").get("message")
