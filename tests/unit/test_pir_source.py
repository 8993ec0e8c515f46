"""edgekit.export.pir.locate on untrusted files: every malformed PIR program is a typed one-line error (no Paddle)."""

from __future__ import annotations

import json

import pytest

from edgekit.core.errors import InputModelError
from edgekit.export.pir import locate

PIR = {"base_code": {"magic": "pir", "version": 4}, "program": {"regions": []}}


@pytest.mark.parametrize("text, expected", [
    (json.dumps({"base_code": 5, "program": {}}), "not a PIR program"),
    (json.dumps({"base_code": {"magic": "pir"}, "program": 3}), "not a PIR program"),
    (json.dumps([1, 2, 3]), "not a PIR program"),
    ("{ truncated", "not valid JSON|cannot|JSON"),
    ("[" * 10_000 + "]" * 10_000, "MAX_JSON_DEPTH"),
])
def test_malformed_pir_programs_are_refused(tmp_path, text, expected):
    (tmp_path / "inference.json").write_text(text)
    with pytest.raises(InputModelError, match=expected) as info:
        locate(tmp_path / "inference.json", None)
    assert info.value.exit_code == 3 and info.value.hint


def test_a_program_larger_than_the_json_limit_is_refused(tmp_path, monkeypatch):
    from edgekit.core import limits

    monkeypatch.setattr(limits, "MAX_JSON_BYTES", 64)
    (tmp_path / "inference.json").write_text(json.dumps(PIR) + " " * 100)
    with pytest.raises(InputModelError, match="MAX_JSON_BYTES"):
        locate(tmp_path / "inference.json", None)


def test_a_program_with_parameters_needs_its_pdiparams(tmp_path):
    program = dict(PIR, program={"regions": [{"blocks": [{"ops": [{"#": "p", "A": [0, 1, 1, "w"]}]}]}]})
    (tmp_path / "inference.json").write_text(json.dumps(program, separators=(",", ":")))
    with pytest.raises(InputModelError, match="no inference.pdiparams beside inference.json"):
        locate(tmp_path, None)
    (tmp_path / "inference.pdiparams").write_bytes(b"\0")
    assert locate(tmp_path, None).params == tmp_path / "inference.pdiparams"
