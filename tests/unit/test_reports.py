"""edgekit.model.reports: the build's reports as frozen dataclasses give the manifest the JSON their producers made,
key for key, and their contents cannot be changed after the stage that made them."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError

import pytest

from edgekit.model.reports import (Emulation, Folding, Geometry, Golden, NmsDecision, OnnxImport, Paddle3, SourceFile,
                                   freeze, thaw)

# the shapes the producers write (export/onnx_import.py, export/import_gate.py, export/pir.py, export/fold.py,
# lite/nms.py, export/geometry.py, edgekit/verify/tier_c.py, edgekit/build/bundle.py), trimmed
ONNX = {"source": {"path": "/m/det.onnx", "sha256": "ab" * 32, "opset": 13, "ir_version": 8, "producer": "pytorch 2.1"},
        "versions": {"x2paddle": "1.6.0", "paddle": "2.6.2", "onnx": "1.16.2", "onnxruntime": "1.19.2"},
        "width_free": None, "simplify": {"applied": True, "nodes": [120, 96]},
        "legalise": {"by_op": [{"op": "HardSwish", "nodes": 2}], "check": {"max_abs": 1e-6}},
        "x2paddle": {"argv": ["x2paddle", "--model", "<scratch>/model.onnx"], "seconds": 3.2},
        "input_shapes": {"x": [1, 3, 32, 32]}, "renamed": {}, "feeds": {"x": "x2paddle_x"},
        "fetches": {"y": "save_infer_model/scale_0.tmp_0"},
        "check": {"samples": 4, "outputs": [{"output": "y", "max_abs": 2e-6, "passed": True}]}, "notes": []}
JUDGED = {"data_check": {"probe": "evaluation", "outputs": [{"output": "y", "passed": True}]}, "task_metric": None,
          "verdict": {"decided_by": "tensors", "tensor_check_passed": True}}
PADDLE3 = {"source": {"path": "/m/inference.json", "sha256": "cd" * 32, "params": "/m/inference.pdiparams",
                      "params_sha256": "ef" * 32},
           "paddle": "3.0.0", "python": "/venv-paddle3/bin/python", "prefix": "/w/export/source/inference",
           "pir_ops": {"pd_op.conv2d": 3}, "translated_ops": {"conv2d": 3}, "legacy_ops": {"conv2d": 3},
           "control_flow_blocks": 0}
FOLDED = {"conv_chains_folded": 2, "activations": {"hard_swish": 1}, "ops": {"before": 40, "after": 31},
          "check": {"passed": True, "outputs": [{"output": "y", "max_abs": 1e-6, "cosine": 1.0, "passed": True}]}}
NMS = {"type": "multiclass_nms3", "boxes": "b", "scores": "s", "attrs": {"score_threshold": 0.05, "keep_top_k": 100},
       "kept": False, "reason": "tier C: Lite's op disagrees", "measured": {"tier_a": {"agree": True}}, "choice": "auto",
       "cut": {"passed": True, "match_percent": 100.0}, "outputs": ["boxes", "scores"], "task": {"head": "nms"}}
TIER_C = {"abi": "aarch64", "runtime": "/lite", "cpu_profile": "default", "threads": 1, "ran": True, "samples": 8,
          "of": 8, "seconds": 12.5, "cached": False, "int8_kernels": "neon", "agreement_with_b": None,
          "instruction_counts": {"ran": True, "paths": {"default": {"per_inference": {"total": 1000}}}},
          "detections": {"min_recall": 0.9, "min_precision": 0.95, "images": 8}}
GOLDEN = {"inputs": [{"name": "x", "file": "golden/input_0.npy", "shape": [4, 3], "dtype": "float32"}],
          "outputs": [{"name": "y", "file": "golden/output_0.npy", "shape": [4, 2], "dtype": "float32"}],
          "tolerances": {"min_cosine": 0.9999, "max_abs": 0.001, "basis": "fp32"}, "count": 4,
          "widths": [{"width": 320, "inputs": [], "outputs": [], "count": 2}]}


def same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize("kind, raw", [(OnnxImport, ONNX), (OnnxImport, dict(ONNX, description={"ok": True}, **JUDGED)),
                                       (Paddle3, PADDLE3), (Paddle3, dict(PADDLE3, export_check={"max_abs": 0.0},
                                                                          factory="m:net")),
                                       (Folding, dict(FOLDED, applied=True)),
                                       (Folding, dict(FOLDED, applied=False, reason="check failed on y")),
                                       (Folding, {"applied": False, "reason": "nothing to fold"}),
                                       (NmsDecision, NMS), (Geometry, {"bound": {"im_shape": [[64.0, 64.0]]},
                                                                       "image_input": "image"}),
                                       (Geometry, {"bound": None, "inputs": ["im_shape"], "why": "an ONNX import"}),
                                       (Emulation, {"ran": False, "reason": "no runtime (set EDGEKIT_LITE_ARM)"}),
                                       (Golden, GOLDEN), (Golden, {"count": 3})])
def test_the_manifest_gets_the_producers_json_back(kind, raw):
    assert same(kind.of(raw).to_json(), raw)
    json.dumps(kind.of(raw).to_json())           # plain JSON: no read-only mapping reaches the writer


def test_later_stages_read_typed_facts():
    imported = OnnxImport.of(ONNX)
    assert dict(imported.feeds) == {"x": "x2paddle_x"} and list(imported.fetches) == ["y"]
    assert imported.source == SourceFile("/m/det.onnx", "ab" * 32) and imported.judged is None
    judged = imported.with_judgement(JUDGED)
    assert judged.judged.task_metric is None and judged.judged.verdict["decided_by"] == "tensors"
    assert same(judged.to_json(), dict(ONNX, **JUDGED)) and imported.judged is None      # a new report, the old kept
    p3 = Paddle3.of(PADDLE3).with_check({"max_abs": 1e-6, "samples": 8}, {"metric": "top1", "agreement": 100.0})
    assert (p3.python, p3.prefix) == ("/venv-paddle3/bin/python", "/w/export/source/inference")
    assert p3.source_file == SourceFile("/m/inference.json", "cd" * 32)
    assert same(p3.to_json(), dict(PADDLE3, check={"max_abs": 1e-6, "samples": 8},
                                   task_metric={"metric": "top1", "agreement": 100.0}))
    emulation = Emulation.of(TIER_C, "detections")
    assert emulation.ran and emulation.abi == "aarch64" and emulation.int8_kernels == "neon"
    assert emulation.measured("detections") == TIER_C["detections"] and emulation.measured("masks") is None
    assert same(emulation.to_json(), TIER_C)
    assert same(Emulation.of(TIER_C).to_json(), TIER_C)            # an fp32 build: the figures stay details
    assert NmsDecision.of(NMS).kept is False and NmsDecision.of(NMS).outputs == ("boxes", "scores")
    assert Folding.of(dict(FOLDED, applied=True)).check["passed"] is True


def test_reports_are_frozen_all_the_way_down():
    imported = OnnxImport.of(ONNX)
    with pytest.raises(FrozenInstanceError):
        imported.feeds = {}
    with pytest.raises(TypeError):
        imported.feeds["x"] = "other"
    with pytest.raises(TypeError):
        imported.check["outputs"][0]["passed"] = False
    assert isinstance(imported.details["x2paddle"]["argv"], tuple)
    raw = json.loads(json.dumps(ONNX))
    copy = OnnxImport.of(raw)
    raw["check"]["outputs"][0]["passed"] = False          # the producer's dict changed afterwards: the report is not
    assert copy.check["outputs"][0]["passed"] is True


def test_freeze_and_thaw():
    value = {"a": [1, {"b": [2.5, None]}], "c": "x"}
    frozen = freeze(value)
    assert frozen["a"][1]["b"] == (2.5, None) and thaw(frozen) == value


def test_the_record_keeps_what_stages_wrote_read_only():
    from types import MappingProxyType

    from edgekit.build.pipeline import Stage, run_stages
    from edgekit.build.record import BuildRecord, declares
    from edgekit.contracts.settings import BuildConfig, ModelConfig

    @declares(reads=(), writes=("folding",))
    def fold(rec):
        return rec.with_(folding=Folding(applied=False, reason="nothing to fold"))

    stage = Stage("fold-graph", fold, provides=("folding",))
    cfg = BuildConfig(model=ModelConfig(name="m", model_file=None))
    done = run_stages(BuildRecord(cfg, None, None), [stage], lambda name, state: None)
    assert isinstance(done.timings, MappingProxyType) and list(done.timings) == ["fold-graph"]
    (kept,) = done.history
    with pytest.raises(TypeError):
        kept.artifacts["folding"] = None
    assert done.output_of("fold-graph", "folding").to_json() == {"applied": False, "reason": "nothing to fold"}
