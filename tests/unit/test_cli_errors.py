"""The CLI maps edgekit's errors once, for every command: one line, a fix, the error's exit code, nothing else."""

from __future__ import annotations

import struct

from typer.testing import CliRunner

from edgekit.cli import app


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_inspect_of_a_missing_path_is_one_error_line_with_a_fix(tmp_path):
    result = _invoke("inspect", tmp_path / "nope")
    assert result.exit_code == 3
    assert f"error: {tmp_path / 'nope'} does not exist" in result.output
    assert "  fix: pass a .nb file or a bundle folder" in result.output
    assert "Traceback" not in result.output


def test_inspect_of_a_foreign_file(tmp_path):
    bad = tmp_path / "model.nb"
    bad.write_bytes(b"PK\x03\x04" + b"\0" * 40)
    result = _invoke("inspect", bad)
    assert result.exit_code == 3 and "is not a naive_buffer .nb model" in result.output


def test_parity_of_a_folder_that_is_no_bundle(tmp_path):
    result = _invoke("parity", tmp_path)
    assert result.exit_code == 10 and "not an edgekit bundle" in result.output


def test_subcommand_errors_are_mapped_too(tmp_path):
    existing = tmp_path / "out"
    existing.mkdir()
    result = _invoke("import", "onnx", tmp_path / "m.onnx", "--out", existing)
    assert result.exit_code == 2 and "already exists" in result.output and "pass a new folder to --out" in result.output


def test_bad_config_values_exit_2_before_any_toolchain(tmp_path):
    result = _invoke("build", "--model", tmp_path / "m.pdmodel", "--cpu", "z80", "--out", tmp_path / "o")
    assert result.exit_code == 2 and "CPU profile 'z80' is unknown" in result.output
    assert not (tmp_path / "o").exists()


def test_debug_shows_the_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEKIT_DEBUG", "1")
    result = _invoke("inspect", tmp_path / "nope")
    assert result.exit_code != 0 and result.exception is not None


def test_inspect_reads_a_header_without_any_runtime(tmp_path):
    nb = tmp_path / "m.nb"
    nb.write_bytes(struct.pack("<H16sQ", 2, b"v2.13-rc", 10) + b"\0" * 10 + b"\1" * 5)
    result = _invoke("inspect", nb, "--json")
    assert result.exit_code == 0 and '"opt_version": "v2.13-rc"' in result.output
