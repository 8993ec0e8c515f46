"""edgekit.contracts: the one reader and writer of each bundle file and of the runner's record, a module per file."""

from __future__ import annotations

import ast
import io
import json
import tokenize
from pathlib import Path

import pytest

from edgekit.contracts import files, runner
from edgekit.contracts.env import LITE_ARM_ENV, lite_arm_root
from edgekit.contracts.manifest import SCHEMA, Manifest, write_manifest
from edgekit.contracts.preprocess import PreprocessFile, PreprocessSpec
from edgekit.contracts.task import TASK_SCHEMA, TaskFile
from edgekit.core.errors import BundleError, DataError, InputModelError, ToolError

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("edgekit", "export", "lite", "quantize", "prune")
# the files another program reads: only edgekit/contracts/ may name them (and so read or write them)
CONTRACT_FILES = {files.MANIFEST, files.TASK, files.PREPROCESS, files.GOLDEN_INDEX, runner.RUNNER_RECORD}
CONTRACT_SETTINGS = {LITE_ARM_ENV}


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
    assert offenders == [], "read these through edgekit.contracts: " + "; ".join(offenders)


def test_the_runner_record_schema_and_exit_codes_are_stated_once():
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ROOT / "edgekit" / "contracts" not in path.parents:
                assert runner.RUNNER_SCHEMA not in dict(_string_literals(path)).values(), path


def test_task_file_round_trip_and_versions(tmp_path):
    written = TaskFile("classification", "top1", {"labels": ["a", "b"]})
    written.write(tmp_path)
    raw = json.loads((tmp_path / files.TASK).read_text(encoding="utf-8"))
    assert raw["schema"] == TASK_SCHEMA
    assert TaskFile.read(tmp_path) == written
    # a bundle written before the schema was recorded is version 1
    del raw["schema"]
    (tmp_path / files.TASK).write_text(json.dumps(raw), encoding="utf-8")
    assert TaskFile.read(tmp_path) == written
    raw["schema"] = "edgekit.task/2"
    (tmp_path / files.TASK).write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(BundleError, match="edgekit.task/2"):
        TaskFile.read(tmp_path)
    assert TaskFile.read(tmp_path / "absent") is None


@pytest.mark.parametrize("text", ['[]', '{"kind": 3}', '{"kind": "classification", "options": []}',
                                  '{"kind": "classification", "primary": 1}'])
def test_a_crafted_task_file_is_one_bundle_error(tmp_path, text):
    (tmp_path / files.TASK).write_text(text, encoding="utf-8")
    with pytest.raises(BundleError, match="is not a task.json"):
        TaskFile.read(tmp_path)


def test_preprocess_file_round_trip(tmp_path):
    spec = PreprocessSpec(resize=(32, 24), mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    PreprocessFile(("x",), spec).write(tmp_path)
    read = PreprocessFile.read(tmp_path)
    assert read.inputs == ("x",) and read.spec == spec
    assert json.loads((tmp_path / files.PREPROCESS).read_text())["preprocess"]["order"][0] == "decode"
    PreprocessFile(("x",), None).write(tmp_path)
    assert PreprocessFile.read(tmp_path).spec is None
    assert PreprocessFile.read(tmp_path / "absent").spec is None


@pytest.mark.parametrize("text", ['"x"', '{"preprocess": 3}', '{"inputs": {}, "preprocess": null}'])
def test_a_crafted_preprocess_file_is_one_bundle_error(tmp_path, text):
    (tmp_path / files.PREPROCESS).write_text(text, encoding="utf-8")
    with pytest.raises(BundleError, match="is not a preprocess.json"):
        PreprocessFile.read(tmp_path)


def test_runner_record_reading(tmp_path):
    assert runner.read_runner_record(tmp_path) is None
    (tmp_path / runner.RUNNER_RECORD).write_text("{not json", encoding="utf-8")
    assert runner.read_runner_record(tmp_path) is None          # a runner killed while writing
    (tmp_path / runner.RUNNER_RECORD).write_text(json.dumps({"schema": runner.RUNNER_SCHEMA, "status": "ok"}))
    record = runner.read_runner_record(tmp_path)
    assert runner.runner_finished(record)
    assert not runner.runner_finished({"schema": "edgekit.runner/0", "status": "ok"})
    assert not runner.runner_finished({"schema": runner.RUNNER_SCHEMA, "status": "error"})


def test_runner_error_line_and_codes():
    stderr = "noise\nedgekit-lite-run: error: input x is 1x3 not 1x4; pass --expect x:1x4:float32\n"
    assert runner.runner_error_line(stderr) == ("input x is 1x3 not 1x4", "pass --expect x:1x4:float32")
    assert runner.runner_error_line("nothing here") == ("", "")
    codes = runner.runner_errors()
    assert codes[4] is InputModelError and codes[5] is DataError and codes[1] is ToolError and set(codes) == set(range(1, 8))


def test_lite_arm_root_prefers_the_flag(tmp_path):
    env = {LITE_ARM_ENV: str(tmp_path / "env")}
    assert lite_arm_root(None, env) == tmp_path / "env"
    assert lite_arm_root(tmp_path / "flag", env) == tmp_path / "flag"
    assert lite_arm_root(None, {}) is None


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
    files.write_json(path, {"snr_db": float("inf"), "rows": [1.5, float("nan"), (float("-inf"), 2)]})
    assert json.loads(path.read_text()) == {"snr_db": None, "rows": [1.5, None, [None, 2]]}
    assert "Infinity" not in path.read_text() and "NaN" not in path.read_text()


# ---------------------------------------------------------------- manifest.json, typed

def _manifest_document() -> dict:
    """A complete manifest as the build writes one, with the parts readers type: NMS, tier C with counts, floors."""
    from untrusted_bundles import document

    m = document("det", precision="int8")
    m["model"].update(bytes=1000, program_bytes=300, params_bytes=700,
                      nms={"op": "multiclass_nms3", "kept": True, "reason": "opt converts it"})
    m["golden"]["tolerances"]["detections"] = {"min_recall": 0.9, "min_precision": 0.8, "min_iou": 0.5,
                                               "score_threshold": 0.3, "basis": "worst image"}
    m["config"].update(fold=False)
    m["pruning"] = {"ratio": 0.25}
    m["files"] = {"model.nb": {"sha256": "a" * 64, "bytes": 1000}}
    m["emulation"] = {"ran": True, "samples": 8, "abi": "aarch64", "runtime_version": "v2.13-rc", "int8_kernels": "neon",
                      "ms_per_sample_median": 1.5, "cpu_profile": "default",
                      "instruction_counts": {"ran": True, "paths": {"default": {
                          "kernel_path": "neon", "first_inference": 900,
                          "per_inference": {"total": 800, "simd_fp": 400, "load_store": 300, "branch": 50, "other": 50,
                                            "dot_product": 0}}},
                          "latency_estimate": {"cores": {"A77": {"ms": 0.13, "loo_error_pct": {"median": 5.5, "max": 9}}}}}}
    return m


def test_the_manifest_round_trips_typed_and_byte_identical(tmp_path):
    from edgekit.core.tables import Precision, Target

    document = _manifest_document()
    written = write_manifest(tmp_path, document)
    assert (tmp_path / files.MANIFEST).read_text(encoding="utf-8") == files.json_text(dict(document, schema=SCHEMA))
    read = Manifest.read(tmp_path)
    assert read == written and read.to_json() == dict(document, schema=SCHEMA)
    model = read.model
    assert (model.name, model.target, model.precision, model.paddlelite, model.bytes) == (
        "det", Target.arm64, Precision.int8, "2.13rc0", 1000)
    assert [d.text for d in model.inputs] == ["x:-1x1x8x8:float32"] and model.outputs == ("y",) and model.nms_kept
    assert read.host_twin.file == "host/model_x86.nb" and read.host_twin.precision == "fp32"
    assert read.golden.main.inputs[0].shape == (2, 1, 8, 8) and read.golden.widths == ()
    tolerances = read.golden.tolerances
    assert (tolerances.min_cosine, tolerances.max_abs, tolerances.floor("detections")["min_recall"]) == (0.99, None, 0.9)
    assert tolerances.floor("masks") is None and tolerances.floor(None) is None
    assert read.files["model.nb"].bytes == 1000 and read.parity.accuracy == {"fp32": 100.0} and read.parity.passed
    assert (read.gates.twin_max_abs, read.fold, read.pruned, read.task.primary) == (1e-4, False, True, "top1")
    counts = read.emulation.instruction_counts
    assert read.emulation.ran and read.emulation.samples == 8 and counts.paths["default"].total == 800
    assert (counts.latency["A77"].median_error_pct, counts.latency["A77"].max_error_pct) == (5.5, 9)
    assert read.versions["paddlelite"] == "2.13rc0"
    # a manifest without NMS, tier C or a task: the typed answers say so
    for key in ("emulation", "task"):
        document[key] = None
    del document["model"]["nms"]
    bare = write_manifest(tmp_path, document)
    assert not bare.model.nms_kept and bare.emulation is None and bare.task is None


@pytest.mark.parametrize("edit, needle", [
    (lambda m: m["model"]["nms"].update(kept="yes"), r"model.nms.kept is \"yes\", expected true or false"),
    (lambda m: m["model"].update(bytes=-1), r"model.bytes is -1, expected a non-negative integer"),
    (lambda m: m["model"].update(target="riscv"), r"model.target is \"riscv\", expected one of"),
    (lambda m: m["host_twin"].update(precision=16), r"host_twin.precision is 16, expected a string"),
    (lambda m: m["config"].update(fold="no"), r"config.fold is \"no\""),
    (lambda m: m["task"].update(primary=3), r"task.primary is 3"),
    (lambda m: m["parity"]["accuracy"].update(fp32="high"), r"parity.accuracy\[\"fp32\"\] is \"high\", expected a number"),
    (lambda m: m["golden"]["tolerances"]["detections"].pop("min_recall"), r"golden.tolerances.detections.min_recall is "
                                                                            r"missing"),
    (lambda m: m["emulation"].pop("ran"), r"emulation.ran is missing"),
    (lambda m: m["emulation"]["instruction_counts"]["paths"]["default"]["per_inference"].pop("simd_fp"),
     r"emulation.instruction_counts.paths\[\"default\"\].per_inference.simd_fp is missing"),
    (lambda m: m["emulation"]["instruction_counts"].pop("paths"), r"instruction_counts says it ran but has no paths"),
    (lambda m: m["emulation"]["instruction_counts"]["latency_estimate"]["cores"]["A77"].update(ms=None),
     r"\"A77\"\]\.ms is null, expected a number"),
    (lambda m: m["model"]["runtime_required"].update(opt_version="v2.12"), r"differs from runtime_required.opt_version"),
    (lambda m: m["golden"]["inputs"][0].update(shape=[2, 1, 8, 9]), r"golden input 'x' is float32 \[2, 1, 8, 9\]"),
])
def test_a_malformed_manifest_field_is_one_bundle_error_at_read_and_never_written(tmp_path, edit, needle):
    document = _manifest_document()
    edit(document)
    with pytest.raises(BundleError, match=needle) as info:
        write_manifest(tmp_path, document)
    assert "\n" not in info.value.message and not (tmp_path / files.MANIFEST).exists()
    files.write_json(tmp_path / files.MANIFEST, dict(document, schema=SCHEMA))      # as an attacker would
    with pytest.raises(BundleError, match=needle):
        Manifest.read(tmp_path)


def _indexes_of_the_raw_manifest(path: Path, shown: str) -> list[str]:
    """Subscripts and .get() calls on anything named *manifest* (or a name assigned from one, or its to_json())."""
    def named(node, aliases) -> bool:
        if isinstance(node, ast.Name):
            return "manifest" in node.id.lower() or node.id in aliases
        if isinstance(node, ast.Attribute):
            return "manifest" in node.attr.lower()
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to_json":
            return named(node.func.value, aliases)
        return False

    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and named(node.value, set())
               for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and named(node.value, aliases) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and named(node.func.value, aliases)):
            found.append(f"{shown}:{node.lineno}: {ast.unparse(node)[:60]}")
    return found


def test_no_module_outside_the_contracts_indexes_the_raw_manifest(tmp_path):
    """Readers use the typed Manifest (edgekit.contracts.manifest); build_manifest assembles the JSON (it writes keys,
    never reads them)."""
    offenders = [hit for folder in SOURCES for path in sorted((ROOT / folder).rglob("*.py"))
                 if ROOT / "edgekit" / "contracts" not in path.parents
                 for hit in _indexes_of_the_raw_manifest(path, str(path.relative_to(ROOT)))]
    assert offenders == [], "read these through edgekit.contracts.manifest.Manifest:\n" + "\n".join(offenders)
    # the check sees what it must: the ways the code read the manifest before it was typed, not the typed reads
    probe = tmp_path / "probe.py"
    probe.write_text('m = bundle.manifest\nm["model"]\nresult.bundle.manifest["model"]\nmanifest.get("task")\n'
                     'bundle.manifest.to_json()["golden"]\nbundle.manifest.model.name\n')
    assert [hit.split(": ", 1)[1] for hit in _indexes_of_the_raw_manifest(probe, "probe")] == [
        "m['model']", "result.bundle.manifest['model']", "manifest.get('task')", "bundle.manifest.to_json()['golden']"]
