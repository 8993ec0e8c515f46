"""edgekit.build.manifest: built from the build record in one place (fake record, real header reading)."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np

from edgekit.model.artifacts import LiteModel, QuantizedModel, StaticModel
from edgekit.contracts.settings import BuildConfig, InputSpec, ModelConfig
from edgekit.model.data import Samples
from edgekit.model.evalset import EvalSet
from edgekit.build.manifest import build_manifest
from edgekit.model.parity import Check, ParityReport
from edgekit.build.record import BuildRecord
from edgekit.model.reports import Emulation, Golden
from edgekit.core.tables import Precision
from edgekit.tasks import make_task


def _nb(path: Path, program: int, params: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<H16sQ", 2, b"v2.13-rc", program) + b"\1" * program + b"\2" * params)
    return path


def _record(tmp_path: Path, precision=Precision.fp32, quantized=None) -> BuildRecord:
    model_file = tmp_path / "given" / "model.pdmodel"
    model_file.parent.mkdir()
    model_file.write_bytes(b"program")
    (model_file.parent / "model.pdiparams").write_bytes(b"params")
    cfg = BuildConfig(model=ModelConfig(name="m", model_file=model_file), precision=precision)
    static = StaticModel(model_file, model_file.with_suffix(".pdiparams"), (InputSpec("x", (-1, 2)),), ("y",), "inference",
                         ("feed", "fc", "fetch"))
    staging = tmp_path / "bundle"
    device = LiteModel(_nb(staging / "model.nb", 30, 70), "arm64", precision.value, "v2.13-rc", ("paddle_lite_opt",), 0.5)
    twin = LiteModel(_nb(staging / "host" / "model_x86.nb", 40, 70), "x86", "fp32", "v2.13-rc", ("paddle_lite_opt",), 0.25)
    samples = Samples({"x": np.zeros((3, 2), np.float32)}, np.array([0, 1, 1]), (), "eval.npz")
    evaluation = EvalSet(samples, make_task("classification"), (0, 1, 1))
    report = ParityReport(samples=3).extended(checks=[Check("A", "twin", "max_abs", 0.0, 1e-4, False)],
                                              metrics={"fp32 reference": {"top1": 100.0}})
    return BuildRecord(cfg, tmp_path / "work", staging, feeds=static.feeds, static=static, evaluation=evaluation,
                       quantized=quantized, device=device, twin=twin, report=report, golden=Golden.of({"count": 3}),
                       emulation=Emulation(ran=False, reason="no runtime"), timings={"load": 0.1})


def test_manifest_holds_what_reproduces_and_audits_the_build(tmp_path):
    m = build_manifest(_record(tmp_path))
    assert m["model"]["bytes"] == 26 + 30 + 70 and m["model"]["program_bytes"] == 30
    assert m["model"]["runtime_required"]["opt_version"] == "v2.13-rc"
    assert m["model"]["inputs"] == [{"name": "x", "shape": [-1, 2], "dtype": "float32"}]
    assert m["host_twin"]["file"] == "host/model_x86.nb" and m["host_twin"]["bytes"] == 136
    assert m["source"]["model_file"]["sha256"] == hashlib.sha256(b"program").hexdigest()
    assert [c["output"] for c in m["commands"]] == ["model.nb", "host/model_x86.nb"]
    assert m["stages_seconds"] == {"load": 0.1}
    assert m["data"]["evaluation"]["samples"] == 3 and m["data"]["calibration"] is None
    assert m["task"] == {"kind": "classification", "primary": "top1", "metrics": {"fp32 reference": {"top1": 100.0}}}
    assert m["emulation"] == {"ran": False, "reason": "no runtime"}
    assert m["parity"]["passed"] is True and "quantization" not in m and "pruning" not in m
    assert m["config"]["precision"] == "fp32" and m["versions"]["opt"] == "v2.13-rc"


def test_manifest_of_a_weight_only_build_names_opt_as_the_tool(tmp_path):
    static = StaticModel(Path("/sim.pdmodel"), None, (), (), "inference")
    quantized = QuantizedModel(static, "per-channel int8 weights", 0, 0.25)
    m = build_manifest(_record(tmp_path, Precision.int8_weight, quantized))
    assert m["quantization"] == {"tool": "paddle_lite_opt", "mode": "int8-weight",
                                 "host_simulation": "per-channel int8 weights", "seconds": 0.25}
