"""edgekit.export.program: locating model files, PIR detection (no Paddle import)."""

from __future__ import annotations

import json

import pytest

from edgekit.core.errors import InputModelError
from edgekit.export.program import is_pir_json, locate

PIR = json.dumps({"base_code": {"magic": "pir", "version": 1}, "program": {"regions": []}})
PROTO = b"\n\x8e\x02\n\x0b\x08\x00\x12\x07feed\x00\xff"


def test_is_pir_json(tmp_path):
    (tmp_path / "a.json").write_text(PIR)
    (tmp_path / "b.json").write_text("\n   " + PIR)
    (tmp_path / "c.pdmodel").write_bytes(PROTO)
    (tmp_path / "d.json").write_text("{ truncated")
    (tmp_path / "e.json").write_bytes(b"{\xff\xfe}")
    assert is_pir_json(tmp_path / "a.json") is True
    assert is_pir_json(tmp_path / "b.json") is True
    assert is_pir_json(tmp_path / "c.pdmodel") is False
    assert is_pir_json(tmp_path / "d.json") is False
    assert is_pir_json(tmp_path / "e.json") is False
    assert is_pir_json(tmp_path / "missing.json") is False


def test_pir_json_file_is_rejected_by_the_legacy_reader(tmp_path):
    """The legacy reader takes .pdmodel only; `edgekit build` routes PIR programs to the translation instead."""
    (tmp_path / "model.json").write_text(PIR)
    with pytest.raises(InputModelError, match="PIR") as info:
        locate(tmp_path / "model.json", None)
    assert info.value.exit_code == 3
    assert "edgekit build -m" in info.value.hint


def test_pir_content_under_pdmodel_name_is_rejected(tmp_path):
    (tmp_path / "net.pdmodel").write_text(PIR)
    with pytest.raises(InputModelError, match="PIR"):
        locate(tmp_path / "net.pdmodel", None)


def test_folder_with_only_pir_json_is_rejected(tmp_path):
    (tmp_path / "model.json").write_text(PIR)
    (tmp_path / "model.pdiparams").write_bytes(b"p")
    with pytest.raises(InputModelError, match="Paddle 3 PIR program"):
        locate(tmp_path, None)


def test_missing_path(tmp_path):
    with pytest.raises(InputModelError, match="does not exist"):
        locate(tmp_path / "nope.pdmodel", None)


def test_folder_with_nothing_usable(tmp_path):
    (tmp_path / "readme.txt").write_text("hi")
    with pytest.raises(InputModelError, match="no .pdmodel or __model__"):
        locate(tmp_path, None)


def test_folder_with_model_and_params(tmp_path):
    (tmp_path / "model.pdmodel").write_bytes(PROTO)
    (tmp_path / "model.pdiparams").write_bytes(b"params")
    assert locate(tmp_path, None) == (tmp_path / "model.pdmodel", tmp_path / "model.pdiparams", False)


def test_folder_with_custom_names(tmp_path):
    (tmp_path / "resnet.pdmodel").write_bytes(PROTO)
    (tmp_path / "resnet.pdiparams").write_bytes(b"params")
    assert locate(tmp_path, None) == (tmp_path / "resnet.pdmodel", tmp_path / "resnet.pdiparams", False)


def test_folder_with_separate_params(tmp_path):
    (tmp_path / "__model__").write_bytes(PROTO)
    (tmp_path / "conv1_weights").write_bytes(b"w")
    assert locate(tmp_path, None) == (tmp_path / "__model__", None, True)


def test_file_with_sibling_params(tmp_path):
    (tmp_path / "net.pdmodel").write_bytes(PROTO)
    with pytest.raises(InputModelError):   # without params the program is read to see whether it needs them
        locate(tmp_path / "net.pdmodel", None)
    (tmp_path / "net.pdiparams").write_bytes(b"p")
    assert locate(tmp_path / "net.pdmodel", None) == (tmp_path / "net.pdmodel", tmp_path / "net.pdiparams", False)


def test_explicit_params(tmp_path):
    (tmp_path / "net.pdmodel").write_bytes(PROTO)
    (tmp_path / "weights.bin").write_bytes(b"p")
    assert locate(tmp_path / "net.pdmodel", tmp_path / "weights.bin")[1] == tmp_path / "weights.bin"
    with pytest.raises(InputModelError, match="params file .*missing.pdiparams does not exist"):
        locate(tmp_path / "net.pdmodel", tmp_path / "missing.pdiparams")
