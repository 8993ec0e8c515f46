"""edgekit.contracts.bundle: the one reader and writer of each bundle file and of the runner's record."""

from __future__ import annotations

import ast
import io
import json
import tokenize
from pathlib import Path

import pytest

from edgekit.contracts import bundle as contracts
from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.core.errors import BundleError, DataError, InputModelError, ToolError

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("edgekit", "export", "lite", "quantize", "prune")
# the files another program reads: only edgekit/contracts/ may name them (and so read or write them)
CONTRACT_FILES = {contracts.MANIFEST, contracts.TASK, contracts.PREPROCESS, contracts.GOLDEN_INDEX,
                  contracts.RUNNER_RECORD}
CONTRACT_SETTINGS = {contracts.LITE_ARM_ENV}


def _string_literals(path: Path):
    for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if token.type == tokenize.STRING:
            try:
                value = ast.literal_eval(token.string)
            except (ValueError, SyntaxError):     # f-strings
                continue
            if isinstance(value, str):
                yield token.start[0], value


def test_no_bundle_or_runner_file_is_named_outside_the_contracts_module():
    offenders = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ROOT / "edgekit" / "contracts" in path.parents:
                continue
            for line, value in _string_literals(path):
                name = value.rsplit("/", 1)[-1]
                if name in CONTRACT_FILES or value in CONTRACT_SETTINGS:
                    offenders.append(f"{path.relative_to(ROOT)}:{line}: {value!r}")
    assert offenders == [], "read these through edgekit.contracts.bundle: " + "; ".join(offenders)


def test_the_runner_record_schema_and_exit_codes_are_stated_once():
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ROOT / "edgekit" / "contracts" not in path.parents:
                assert contracts.RUNNER_SCHEMA not in dict(_string_literals(path)).values(), path


def test_task_file_round_trip_and_versions(tmp_path):
    written = contracts.TaskFile("classification", "top1", {"labels": ["a", "b"]})
    written.write(tmp_path)
    raw = json.loads((tmp_path / contracts.TASK).read_text(encoding="utf-8"))
    assert raw["schema"] == contracts.TASK_SCHEMA
    assert contracts.TaskFile.read(tmp_path) == written
    # a bundle written before the schema was recorded is version 1
    del raw["schema"]
    (tmp_path / contracts.TASK).write_text(json.dumps(raw), encoding="utf-8")
    assert contracts.TaskFile.read(tmp_path) == written
    raw["schema"] = "edgekit.task/2"
    (tmp_path / contracts.TASK).write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(BundleError, match="edgekit.task/2"):
        contracts.TaskFile.read(tmp_path)
    assert contracts.TaskFile.read(tmp_path / "absent") is None


@pytest.mark.parametrize("text", ['[]', '{"kind": 3}', '{"kind": "classification", "options": []}',
                                  '{"kind": "classification", "primary": 1}'])
def test_a_crafted_task_file_is_one_bundle_error(tmp_path, text):
    (tmp_path / contracts.TASK).write_text(text, encoding="utf-8")
    with pytest.raises(BundleError, match="is not a task.json"):
        contracts.TaskFile.read(tmp_path)


def test_preprocess_file_round_trip(tmp_path):
    spec = PreprocessSpec(resize=(32, 24), mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    contracts.PreprocessFile(("x",), spec).write(tmp_path)
    read = contracts.PreprocessFile.read(tmp_path)
    assert read.inputs == ("x",) and read.spec == spec
    assert json.loads((tmp_path / contracts.PREPROCESS).read_text())["preprocess"]["order"][0] == "decode"
    contracts.PreprocessFile(("x",), None).write(tmp_path)
    assert contracts.PreprocessFile.read(tmp_path).spec is None
    assert contracts.PreprocessFile.read(tmp_path / "absent").spec is None


@pytest.mark.parametrize("text", ['"x"', '{"preprocess": 3}', '{"inputs": {}, "preprocess": null}'])
def test_a_crafted_preprocess_file_is_one_bundle_error(tmp_path, text):
    (tmp_path / contracts.PREPROCESS).write_text(text, encoding="utf-8")
    with pytest.raises(BundleError, match="is not a preprocess.json"):
        contracts.PreprocessFile.read(tmp_path)


def test_runner_record_reading(tmp_path):
    assert contracts.read_runner_record(tmp_path) is None
    (tmp_path / contracts.RUNNER_RECORD).write_text("{not json", encoding="utf-8")
    assert contracts.read_runner_record(tmp_path) is None          # a runner killed while writing
    (tmp_path / contracts.RUNNER_RECORD).write_text(json.dumps({"schema": contracts.RUNNER_SCHEMA, "status": "ok"}))
    record = contracts.read_runner_record(tmp_path)
    assert contracts.runner_finished(record)
    assert not contracts.runner_finished({"schema": "edgekit.runner/0", "status": "ok"})
    assert not contracts.runner_finished({"schema": contracts.RUNNER_SCHEMA, "status": "error"})


def test_runner_error_line_and_codes():
    stderr = "noise\nedgekit-lite-run: error: input x is 1x3 not 1x4; pass --expect x:1x4:float32\n"
    assert contracts.runner_error_line(stderr) == ("input x is 1x3 not 1x4", "pass --expect x:1x4:float32")
    assert contracts.runner_error_line("nothing here") == ("", "")
    codes = contracts.runner_errors()
    assert codes[4] is InputModelError and codes[5] is DataError and codes[1] is ToolError and set(codes) == set(range(1, 8))


def test_lite_arm_root_prefers_the_flag(tmp_path):
    env = {contracts.LITE_ARM_ENV: str(tmp_path / "env")}
    assert contracts.lite_arm_root(None, env) == tmp_path / "env"
    assert contracts.lite_arm_root(tmp_path / "flag", env) == tmp_path / "flag"
    assert contracts.lite_arm_root(None, {}) is None


def test_the_runner_abi_names_come_from_the_target_table():
    """Python names runner ABIs in edgekit.core.tables.TARGETS; the C++ side in native/core's compiled_abi() (one function,
    checked by native/tests/test_limits.cc)."""
    from edgekit.device import facts, transports
    from edgekit.lite.native import Abi
    from edgekit.core.tables import TARGETS

    table = {info.emulation for info in TARGETS.values() if info.emulation}
    assert {a.value for a in Abi if a is not Abi.host} == table == set(transports.ABIS) == set(facts.ANDROID_ABIS.values())


def test_non_finite_numbers_are_written_as_null(tmp_path):
    """An exact match's SNR is infinite; JSON (and the apps' C++ reader) has no Infinity."""
    path = tmp_path / "x.json"
    contracts.write_json(path, {"snr_db": float("inf"), "rows": [1.5, float("nan"), (float("-inf"), 2)]})
    assert json.loads(path.read_text()) == {"snr_db": None, "rows": [1.5, None, [None, 2]]}
    assert "Infinity" not in path.read_text() and "NaN" not in path.read_text()
