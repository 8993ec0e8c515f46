"""The pass manager: one check shape for every model-to-model transform, checked after each pass (pure logic)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from edgekit.core.errors import ConversionError
from edgekit.model.parity import OutputCheck, SameCheck, check_same
from edgekit.model.passes import TOLERANCES, TRANSFORMS, Pass, PassCheckError, PassResult, run_passes

ROOT = Path(__file__).resolve().parents[2]


def _check(what: str, passed: bool) -> SameCheck:
    return SameCheck(what, 4, (OutputCheck("y", 0.0 if passed else 0.25, 1.0, 1e-4, passed),))


def _pass(name: str, passed: bool | None, optional: bool = False, error=None) -> Pass:
    """A pass that appends its name to the model (a tuple); None: it changes nothing."""
    def run(model):
        if passed is None:
            return PassResult(model)
        return PassResult(model + (name,), _check(f"{name} vs before", passed), {"pass": name})
    return Pass(name, run, optional=optional, error=error)


def test_passes_run_in_order_and_each_is_recorded():
    model, records = run_passes((), [_pass("engine", True), _pass("geometry", None), _pass("fold", True)])
    assert model == ("engine", "fold")
    assert [(r.name, r.changed, r.kept) for r in records] == [("engine", True, True), ("geometry", False, True),
                                                                ("fold", True, True)]
    assert records[1].to_json() == {"name": "geometry", "changed": False, "kept": True, "check": None}


def test_a_failed_required_pass_stops_the_run_naming_the_passes_before_it():
    with pytest.raises(PassCheckError) as info:
        run_passes((), [_pass("engine", True), _pass("geometry", None), _pass("nms", False)])
    text = info.value.message
    assert "pass nms (nms vs before)" in text and "on y (max abs 0.25" in text
    assert "passes before it: engine" in text and "geometry" not in text    # geometry changed nothing


def test_a_pass_names_its_own_error_type():
    with pytest.raises(ConversionError, match="it was the first pass"):
        run_passes((), [_pass("lite-rewrite", False, error=ConversionError)])


def test_a_failed_optional_pass_is_dropped_and_the_run_goes_on_from_its_input():
    model, records = run_passes((), [_pass("fold", False, optional=True), _pass("lite-rewrite", True)])
    assert model == ("lite-rewrite",)
    assert (records[0].changed, records[0].kept, records[0].check.passed) == (True, False, False)


def test_a_pass_must_be_a_listed_transform():
    with pytest.raises(ValueError):
        Pass("something-new", lambda m: PassResult(m))


def test_check_same_judges_with_the_tables_tolerance():
    import numpy as np

    before = [np.array([[1.0, 2.0]], np.float32)]
    assert check_same(before, [before[0] + 5e-5], ["y"], TOLERANCES["fold"], "fold").passed
    assert not check_same(before, [before[0] + 5e-4], ["y"], TOLERANCES["fold"], "fold").passed
    assert not check_same(before, [before[0] + 1e-7], ["y"], TOLERANCES["geometry"], "geometry").passed


# Every transform, the module that performs it and the name it uses for its tolerance: each module reads its limit
# from the one table (no constant of its own), and the ones the pass manager runs build Pass objects.
TRANSFORM_MODULES = {
    "export": "export/dygraph.py", "paddle3-export": "export/pir.py", "pir-translate": "export/pir.py",
    "simplify": "export/simplify.py", "legalise": "export/legalize.py", "width-free": "export/width_free.py",
    "engine": "export/inference.py", "geometry": "export/geometry.py", "nms": "lite/nms.py", "fold": "export/fold.py",
    "lite-rewrite": "lite/rewrite.py", "onnx-import": "export/onnx_import.py",
}
RUN_BY_THE_MANAGER = {
    "export": "export/dygraph.py", "paddle3-export": "export/pir.py", "pir-translate": "export/pir.py",
    "simplify": "export/simplify.py", "legalise": "export/legalize.py", "width-free": "export/width_free.py",
    "engine": "edgekit/build/optimise.py", "geometry": "edgekit/build/optimise.py", "nms": "edgekit/build/optimise.py",
    "fold": "edgekit/build/optimise.py", "lite-rewrite": "lite/rewrite.py"}
# The ONNX import is the one transform judged by a gate of its own (export/import_gate.py): against ONNX Runtime
# per output with a signal floor for the cosine, and on the build's data in the task metric, which decides.
JUDGED_BY_THEIR_OWN_GATE = {"onnx-import"}


def _manager_calls(module: str) -> set[str]:
    """The transform names a module hands the manager: Pass("name", ...) or judge(model, "name", ...)."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / module).read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        position = {"Pass": 0, "judge": 1}.get(func)
        if position is not None and len(node.args) > position and isinstance(node.args[position], ast.Constant):
            names.add(node.args[position].value)
    return names


def test_every_transform_goes_through_the_pass_manager():
    assert set(RUN_BY_THE_MANAGER) | JUDGED_BY_THEIR_OWN_GATE == set(TRANSFORMS)
    for name, module in RUN_BY_THE_MANAGER.items():
        assert name in _manager_calls(module), (name, module)


def test_judge_gives_a_measured_check_the_managers_verdict():
    from edgekit.model.passes import judge

    assert judge((), "simplify", _check("simplify", False), optional=True).kept is False
    with pytest.raises(ConversionError, match="pass legalise"):
        judge((), "legalise", _check("legalise", False), error=ConversionError)
    assert judge((), "export", _check("export", True)).kept
