"""edgekit.build.pipeline: declared stages, their order, skipping by declaration, and the run loop (fake stages)."""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace
from pathlib import Path

import pytest

from edgekit.build import pipeline
from edgekit.contracts.settings import BuildConfig, DataConfig, InputSpec, ModelConfig
from edgekit.build.pipeline import STAGES, Stage, StageOrderError, plan, run_stages
from edgekit.build.record import BuildRecord
from edgekit.core.tables import Precision, Target


def _cfg(**changes) -> BuildConfig:
    model = ModelConfig(name="m", factory="pkg.mod:make", inputs=(InputSpec("x", (-1, 1, 8, 8)),))
    return replace(BuildConfig(model=model), **changes)


def _names(cfg: BuildConfig) -> list[str]:
    return [s.name for s in plan(cfg)]


def test_a_factory_fp32_build_for_arm64_runs_these_stages_in_this_order():
    assert _names(_cfg()) == ["factory-inputs", "read-data", "export-factory", "optimise", "coverage", "fp32-reference",
                              "convert-target", "convert-twin", "tier-a", "tier-c", "gates", "write-bundle"]


def test_stages_are_chosen_by_declaration():
    int8 = _cfg(precision=Precision.int8, data=DataConfig(calibration=Path("/c")))
    assert "quantize-int8" in _names(int8) and "tier-b" in _names(int8) and "simulate-weights" not in _names(int8)
    weight = _names(_cfg(precision=Precision.int8_weight))
    assert "simulate-weights" in weight and "tier-b" in weight and "quantize-int8" not in weight
    assert "tier-c" not in _names(_cfg(target=Target.x86))
    exported = _names(_cfg(model=ModelConfig(name="m", model_file=Path("/m/model.pdmodel"))))
    assert exported[:3] == ["load-exported", "read-data", "optimise"] and "export-factory" not in exported
    onnx = _names(_cfg(model=ModelConfig(name="m", model_file=Path("/m/model.onnx"))))
    assert onnx[:3] == ["import-onnx", "read-data", "optimise"] and onnx[3] == "import-metric"
    assert "fp32-reference" not in onnx and "fp32-reference" in exported     # ONNX Runtime's outputs are the reference


def test_every_declared_configuration_has_a_valid_order():
    models = [ModelConfig(name="m", factory="p.m:f", inputs=(InputSpec("x", (1, 3)),)),
              ModelConfig(name="m", model_file=Path("/m.pdmodel")), ModelConfig(name="m", model_file=Path("/m.onnx"))]
    for model in models:
        for precision in Precision:
            for target in Target:
                cfg = _cfg(model=model, precision=precision, target=target, data=DataConfig(calibration=Path("/c")),
                           prune=object())
                chosen = plan(cfg)
                assert chosen[-1].name == "write-bundle"


def test_a_stage_needing_what_nothing_provides_is_refused_before_anything_runs():
    ran = []

    def fake(record):
        ran.append("first")
        return record

    stages = (Stage("first", fake, provides=("static",)), Stage("second", fake, needs=("device",)))
    with pytest.raises(StageOrderError, match="'second' needs device"):
        plan(_cfg(), stages)
    assert ran == []
    wrong_order = (Stage("twin", fake, needs=("device",)), Stage("lite", fake, provides=("device",)))
    with pytest.raises(StageOrderError, match="'twin' needs device"):
        plan(_cfg(), wrong_order)


def test_a_skipped_stage_provides_nothing():
    stages = (Stage("maybe", lambda r: r, provides=("static",), when=lambda cfg: False),
              Stage("after", lambda r: r, needs=("static",)))
    with pytest.raises(StageOrderError, match="'after' needs static"):
        plan(_cfg(), stages)


def test_run_stages_chains_records_times_each_stage_and_reports_progress(tmp_path):
    events = []

    def provide_feeds(record):
        return record.with_(feeds=(InputSpec("x", (1, 2)),))

    def provide_static(record):
        assert record.feeds        # sees what the previous stage provided
        return record.with_(static="static model")

    stages = (Stage("a", provide_feeds, provides=("feeds",)), Stage("b", provide_static, needs=("feeds",),
                                                                   provides=("static",)))
    start = BuildRecord(_cfg(), tmp_path, tmp_path / "bundle")
    done = run_stages(start, plan(_cfg(), stages), lambda name, state: events.append((name, state)))
    assert done.static == "static model" and start.static is None and start.feeds == ()   # the input is left alone
    assert list(done.timings) == ["a", "b"] and all(t >= 0 for t in done.timings.values())
    assert events == [("a", "start"), ("a", "done"), ("b", "start"), ("b", "done")]


def test_a_stage_that_does_not_provide_what_it_declares_is_caught(tmp_path):
    stages = (Stage("liar", lambda record: record, provides=("device",)),)
    with pytest.raises(StageOrderError, match="'liar' did not provide device"):
        run_stages(BuildRecord(_cfg(), tmp_path, tmp_path), stages, lambda name, state: None)


def test_no_function_in_the_pipeline_module_is_longer_than_60_lines():
    tree = ast.parse(inspect.getsource(pipeline))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno - node.lineno + 1 <= 60, node.name


def test_stage_names_are_unique_and_every_stage_function_is_declared():
    names = [s.name for s in STAGES]
    assert len(names) == len(set(names))
    from edgekit.build import stages as stage_functions

    declared = {s.run for s in STAGES}
    public = {fn for name, fn in inspect.getmembers(stage_functions, inspect.isfunction)
              if fn.__module__ == stage_functions.__name__ and not name.startswith("_")
              and list(inspect.signature(fn).parameters) == ["rec"]}
    assert public == declared


def test_every_stage_is_named_after_its_function_and_declares_on_itself():
    for stage in STAGES:
        assert stage.name == stage.run.__name__.replace("_", "-")
        reads, writes = stage.run.declared
        assert stage.needs == reads.required and stage.provides == writes.required


def test_no_field_of_the_build_record_is_any():
    from dataclasses import fields

    for f in fields(BuildRecord):
        assert "Any" not in str(f.type) and str(f.type) not in ("Mapping", "dict", "object"), (f.name, f.type)


def test_a_stage_reading_what_it_does_not_declare_fails_the_build(tmp_path):
    def nosy(record):
        return record.with_(device=record.twin)       # reads twin, undeclared

    stages = (Stage("nosy", nosy, provides=("device",)),)
    with pytest.raises(StageOrderError, match="'nosy' read 'twin', which it does not declare"):
        run_stages(BuildRecord(_cfg(), tmp_path, tmp_path), stages, lambda name, state: None)


def test_a_stage_writing_what_it_does_not_declare_fails_the_build(tmp_path):
    stages = (Stage("writer", lambda record: record.with_(device="nb", twin="twin"), provides=("device",)),)
    with pytest.raises(StageOrderError, match="'writer' wrote twin, which it does not declare"):
        run_stages(BuildRecord(_cfg(), tmp_path, tmp_path), stages, lambda name, state: None)


def test_every_stages_writes_are_kept_and_the_observer_sees_reads_and_writes(tmp_path):
    seen = []
    stages = (Stage("first", lambda r: r.with_(static="exported"), provides=("static",)),
              Stage("second", lambda r: r.with_(static=r.static + "+folded"), needs=("static",), provides=("static",)))
    done = run_stages(BuildRecord(_cfg(), tmp_path, tmp_path), stages, lambda name, state: None,
                      lambda name, reads, writes: seen.append((name, set(reads), set(writes))))
    assert done.static == "exported+folded"
    assert done.output_of("first", "static") == "exported" and done.writers_of("static") == ("first", "second")
    assert seen == [("first", set(), {"static"}), ("second", {"static"}, {"static"})]


def test_a_declaration_naming_no_record_field_is_refused():
    from edgekit.build.record import declares

    with pytest.raises(StageOrderError, match="stattic"):
        declares(reads=("stattic",), writes=())


def test_the_architecture_pages_stage_table_is_what_stages_declares():
    names = {s.name for s in STAGES}
    rows = {}
    for line in (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].strip("`") in names:
            rows[cells[0].strip("`")] = tuple({x.strip() for x in cell.split(",") if x.strip()} for cell in cells[2:])
    assert set(rows) == names
    for stage in STAGES:
        reads, writes = stage.run.declared
        assert rows[stage.name] == (set(reads.names), set(writes.names)), stage.name
