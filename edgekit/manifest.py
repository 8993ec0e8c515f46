"""The bundle manifest: everything needed to reproduce and audit a build."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from . import parity, versions
from .artifacts import LiteModel, StaticModel, sha256_file
from .config import BuildConfig
from .data import Samples
from .tables import TARGETS, Precision


def factory_source(factory: str) -> dict:
    """The file that defines the model class: a build is only reproducible with the same code."""
    import importlib
    import inspect

    module = importlib.import_module(factory.split(":")[0])
    path = inspect.getsourcefile(module)
    return {"spec": factory, "path": path, "sha256": sha256_file(Path(path)) if path else None}


def build_manifest(cfg: BuildConfig, timings: dict, onnx_import: dict | None, static: StaticModel, quantized, device: LiteModel, twin: LiteModel,
              report: parity.ParityReport, evaluation: Samples, calibration: Samples | None, golden: dict,
              source: StaticModel | None = None) -> dict:
    """`source`: the model as given, when a stage (prune) replaced `static` before export to .nb."""
    from .lite import read_header

    header = read_header(device.nb_file)
    twin_header = read_header(twin.nb_file)
    source_files = {}
    if cfg.model.factory:
        source_files["factory"] = factory_source(cfg.model.factory)
    if cfg.model.weights is not None:
        source_files["weights"] = {"path": str(cfg.model.weights), "sha256": sha256_file(cfg.model.weights)}
    given = source or static
    if given.origin == "inference":   # the stage's copies are byte-identical to the given files
        source_files["model_file"] = {"path": str(cfg.model.model_file), "sha256": sha256_file(given.model_file)}
        if given.params_file is not None:
            source_files["params_file"] = {"path": str(cfg.model.params_file or cfg.model.model_file),
                                           "sha256": sha256_file(given.params_file)}
    if onnx_import:
        source_files["onnx"] = {k: onnx_import["source"][k] for k in ("path", "sha256")}
    tool_versions = versions.collect()
    manifest = {
        "created_utc": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "model": {
            "name": cfg.model.name, "file": "model.nb", "target": cfg.target.value, "abi": TARGETS[cfg.target].abi,
            "precision": cfg.precision.value, "opt_version": header.opt_version, "nb_format": header.format_version,
            # the apps must link the Paddle-Lite runtime of the same release as the opt that wrote the .nb
            "runtime_required": {"paddlelite": tool_versions["paddlelite"], "opt_version": header.opt_version},
            "bytes": header.file_bytes, "program_bytes": header.program_bytes, "params_bytes": header.params_bytes,
            "inputs": [{"name": f.name, "shape": list(f.shape), "dtype": f.dtype} for f in static.feeds],
            "outputs": list(static.fetches), "source_ops": list(static.op_types), "origin": static.origin,
        },
        "host_twin": {"file": str(twin.nb_file.relative_to(device.nb_file.parent)), "target": "x86", "precision": "fp32",
                      "bytes": twin_header.file_bytes, "rewrites": list(twin.rewrites)},
        "source": source_files,
        "onnx_import": onnx_import,
        "versions": dict(tool_versions, opt=device.opt_version, edgekit_source=versions.source_revision()),
        "config": cfg.to_json(),
        "commands": [{"equivalent": list(lm.argv), "ran": list(lm.process_argv), "inputs_sha256": lm.inputs_sha256,
                      "seconds": round(lm.seconds, 3), "output": str(lm.nb_file.relative_to(device.nb_file.parent))}
                     for lm in (device, twin)],
        "stages_seconds": dict(timings),
        "data": {
            "evaluation": {"source": evaluation.source, "samples": len(evaluation), "sha256": evaluation.digest(),
                           "labels": evaluation.labels is not None},
            "calibration": None if calibration is None else {
                "source": calibration.source, "samples": len(calibration), "sha256": calibration.digest(),
                "samples_used": quantized.calibration_samples if quantized else 0,
                "used_sha256": quantized.calibration_sha256 if quantized else None},
        },
        "parity": report.to_json(),
        "golden": golden,
    }
    if quantized is not None and cfg.precision is not Precision.int8:
        manifest["quantization"] = {"tool": "paddle_lite_opt", "mode": cfg.precision.value,
                                    "host_simulation": quantized.algo, "seconds": round(quantized.seconds, 3)}
    elif quantized is not None:
        from .quantize import count_quantized_ops

        manifest["quantization"] = {"tool": "paddleslim.quant.quant_post_static", "algo": quantized.algo,
                                    "calibration_samples": quantized.calibration_samples,
                                    "seconds": round(quantized.seconds, 3), "ops": count_quantized_ops(quantized.model),
                                    "settings": cfg.to_json()["quant"]}
    return manifest
