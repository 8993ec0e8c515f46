"""The bundle manifest, built from the final build record in one place: everything needed to reproduce and audit
a build (inputs and their hashes, the resolved config, tool versions, the commands that ran, the data used, every
check's figures)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from edgekit.core import versions
from edgekit.model.artifacts import LiteModel, sha256_file
from edgekit.build.record import BuildRecord
from edgekit.model.reports import Emulation, Folding, Geometry, Golden, NmsDecision, OnnxImport, Paddle3
from edgekit.core.tables import TARGETS, Precision
from edgekit.verify import tiers


def factory_source(factory: str) -> dict:
    """The file that defines the model class: a build is only reproducible with the same code. Found, not imported:
    a factory written for Paddle 3 may not import under this environment's Paddle 2.6."""
    import importlib.util
    import sys

    cwd = str(Path.cwd())
    if cwd not in sys.path and "" not in sys.path:   # as edgekit.core.imports does: the working directory is importable
        sys.path.append(cwd)
    try:
        spec = importlib.util.find_spec(factory.split(":")[0])
    except (ImportError, ValueError):
        spec = None
    path = spec.origin if spec is not None and spec.origin not in (None, "built-in", "frozen") else None
    return {"spec": factory, "path": path, "sha256": sha256_file(Path(path)) if path and Path(path).is_file() else None}


def build_manifest(rec: BuildRecord) -> dict:
    from edgekit.lite import read_header

    cfg, static, device, twin = rec.cfg, rec.static, rec.device, rec.twin
    header = read_header(device.nb_file)
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
            # how the reference engine was checked, and what was changed in the program as given (slots dropped)
            "reference_check": dict(static.check) or None,
            "nms": _json(rec.nms),      # an NMS op in the source graph: kept or cut off for task.json's NMS (lite/nms.py)
            "geometry": _json(rec.geometry),   # im_shape/scale_factor inputs written into the graph (export/geometry.py)
            "rewrites": list(device.rewrites),   # lite_safe's rewrites of the program model.nb was converted from
        },
        "host_twin": {"file": _relative(twin, device), "target": "x86", "precision": "fp32",
                      "bytes": read_header(twin.nb_file).file_bytes, "rewrites": list(twin.rewrites)},
        "source": _sources(rec),
        "onnx_import": _json(rec.onnx_import),
        "paddle3": _json(rec.paddle3),
        "folding": _folding(rec.folding),
        "versions": dict(tool_versions, opt=device.opt_version, edgekit_source=versions.source_revision()),
        "config": _config(rec),
        "commands": [{"equivalent": list(lm.argv), "ran": list(lm.process_argv), "inputs_sha256": lm.inputs_sha256,
                      "seconds": round(lm.seconds, 3), "output": _relative(lm, device)} for lm in (device, twin)],
        "stages_seconds": dict(rec.timings),
        # the stages that made `model.source_ops`' program, the optimise stage with the passes that changed it
        "fp32_program_from": [named for stage in rec.writers_of("static") if (named := _with_passes(stage, rec.passes))],
        "passes": [r.to_json() for r in rec.passes],   # every optimise pass: changed, kept, its check
        "data": _data(rec),
        "parity": rec.report.to_json(),
        "emulation": _json(rec.emulation),
        "golden": _json(rec.golden),
        "task": None,
    }
    task = rec.evaluation.task
    if task is not None:
        manifest["task"] = {"kind": task.kind.value, "primary": task.primary, "metrics": rec.report.metrics}
    if rec.quantized is not None:
        manifest["quantization"] = _quantization(rec)
    if rec.pruned is not None:
        manifest["pruning"] = dict(rec.pruned.report.to_json(), seconds=rec.pruned.seconds)
    return manifest


def _config(rec: BuildRecord) -> dict:
    """The settings as resolved: the twin gate the tiers applied (the task's when [parity] gave none), so that the
    bundle's parity re-check and a rebuild from this config apply the same."""
    config = rec.cfg.to_json()
    task = rec.evaluation.task if rec.evaluation is not None else None
    config["gates"]["twin_max_abs"] = tiers.twin_tolerance(rec.cfg.gates, task).max_abs
    return config


def _relative(lm: LiteModel, device: LiteModel) -> str:
    return str(lm.nb_file.relative_to(device.nb_file.parent))


def _sources(rec: BuildRecord) -> dict:
    """The files the build started from, with their hashes (a pruned exported model: the file as given)."""
    cfg = rec.cfg
    found = {}
    if cfg.model.factory:
        found["factory"] = factory_source(cfg.model.factory)
    if cfg.model.weights is not None:
        found["weights"] = {"path": str(cfg.model.weights), "sha256": sha256_file(cfg.model.weights)}
    given = rec.pruned.unpruned if rec.pruned is not None and not cfg.model.factory else rec.static
    if given.origin == "inference":   # the stage's copies are byte-identical to the given files
        found["model_file"] = {"path": str(cfg.model.model_file), "sha256": sha256_file(given.model_file)}
        if given.params_file is not None:
            found["params_file"] = {"path": str(cfg.model.params_file or cfg.model.model_file),
                                    "sha256": sha256_file(given.params_file)}
    if rec.onnx_import is not None:
        source = rec.onnx_import.source
        found["onnx"] = {"path": source.path, "sha256": source.sha256}
    if cfg.model.description is not None:   # the inference.yml the [preprocess]/[task] defaults came from
        found["description"] = {"path": str(cfg.model.description), "sha256": sha256_file(cfg.model.description)}
    if rec.paddle3 is not None and cfg.model.factory is None:
        found["pir_program"] = rec.paddle3.to_json()["source"]
    return found


def _data(rec: BuildRecord) -> dict:
    evaluation, calibration, quantized = rec.evaluation.samples, rec.calibration, rec.quantized
    return {
        "evaluation": {"source": evaluation.source, "samples": len(evaluation), "sha256": evaluation.digest(),
                       "labels": evaluation.labels is not None},
        "calibration": None if calibration is None else {
            "source": calibration.source, "samples": len(calibration), "sha256": calibration.digest(),
            "samples_used": quantized.calibration_samples if quantized else 0,
            "used_sha256": quantized.calibration_sha256 if quantized else None},
    }


def _quantization(rec: BuildRecord) -> dict:
    cfg, quantized = rec.cfg, rec.quantized
    if cfg.precision is not Precision.int8:
        return {"tool": "paddle_lite_opt", "mode": cfg.precision.value, "host_simulation": quantized.algo,
                "seconds": round(quantized.seconds, 3)}
    from edgekit.quantize import count_quantized_ops

    entry = {"tool": "paddleslim.quant.quant_post_static", "algo": quantized.algo,
             "calibration_samples": quantized.calibration_samples, "seconds": round(quantized.seconds, 3),
             "ops": count_quantized_ops(quantized.model), "settings": cfg.to_json()["quant"],
             # activations of rank 0/1 PaddleSlim's samplers are never given: they stay float (quantize/ptq.py)
             "float_activations": list(getattr(quantized, "float_activations", ())),
             # the batches PaddleSlim was fed: the one asked for, the one used, and whether it was lowered for memory
             "calibration_batches": quantized.calibration_batches.to_json() if quantized.calibration_batches else None}
    if rec.search is not None:
        entry["search"] = rec.search.to_json()
        entry["data_checks"] = list(rec.data_warnings)
    return entry


def _with_passes(stage: str, passes) -> str | None:
    """A stage that wrote the program; the optimise stage with the passes that changed it, None when none did."""
    if stage != "optimise":
        return stage
    changed = [r.name for r in passes if r.changed and r.kept]
    return f"{stage} ({', '.join(changed)})" if changed else None


def _json(report: Emulation | Geometry | Golden | NmsDecision | OnnxImport | Paddle3 | None) -> dict | None:
    return report.to_json() if report is not None else None


def _folding(folding: Folding | None) -> dict:
    """What the fold stage did (op counts by type before and after, its check), or why it did not run."""
    if folding is None:
        return {"applied": False, "reason": "[build] fold = false"}
    return folding.to_json()
