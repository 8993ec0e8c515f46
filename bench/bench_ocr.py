"""PP-OCR task metrics through every engine edgekit uses, as JSON.

    ./run python bench/bench_ocr.py [--roles det rec cls] [--data DIR] [--out DIR]

For each of PP-OCRv4 mobile det, rec and the mobile v2.0 direction classifier
(from the rapidocr_onnxruntime 1.4.4 wheel) on data rendered by
`edgekit.examples.ppocr.make_data` (ground truth known):

- ONNX Runtime on the original .onnx,
- the Paddle model from edgekit's X2Paddle import (static executor),
- the FP32 x86 twin `.nb` of an `edgekit build --target arm64 --quant fp32` bundle (Paddle-Lite),
- the INT8 model as PaddleSlim simulates it (the calibration algorithm and float layers the int8
  build's search chose within the example's budget; rec tries avg then hist),

the task metrics (det hmean, rec exact-match / character accuracy, cls accuracy),
how many samples give the same readable result as ONNX Runtime, the output
agreement, and the arm64 `.nb` sizes of fp32 and int8 builds. Figures only:
nothing is asserted. Takes ~20 minutes on 2 cores for the default sets.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "edgekit" / "examples" / "ppocr"


def _onnxruntime(onnx_path: Path, x: np.ndarray, batch: int) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    outs = [session.run(None, {"x": x[s:s + batch]}) for s in range(0, len(x), batch)]
    return [np.concatenate([o[i] for o in outs]) for i in range(len(outs[0]))]


def _readable(task, outputs) -> list:
    """Post-processed results without scores: what a user of the model would read."""
    def strip(result):
        if isinstance(result, list):
            return [strip(r) for r in result]
        return {k: v for k, v in result.items() if k not in ("score", "confidence")}

    return [strip(r) for r in task.postprocess(outputs)]


def _agreement(task, reference, reference_readable, outputs) -> dict:
    """Output agreement, and how many samples read the same (det: boxes matched against the reference's)."""
    from edgekit.model.parity import cosine, max_abs
    from edgekit.tasks.ocr import detection_scores

    readable = _readable(task, outputs)
    figures = {"max_abs": max_abs(reference[0], outputs[0]), "cosine": round(cosine(reference[0], outputs[0]), 10),
               "same_results": sum(a == b for a, b in zip(reference_readable, readable)), "samples": len(readable)}
    if task.kind.value == "ocr_det":     # boxes move by fractions of a pixel: compare them as detections
        as_boxes = [[r["box"] for r in image] for image in readable]
        reference_boxes = [[r["box"] for r in image] for image in reference_readable]
        figures["hmean_against_reference_boxes"] = detection_scores(as_boxes, reference_boxes, 0.9)["hmean"]
    return figures


def _nb_figures(manifest: dict) -> dict:
    m = manifest["model"]
    return {"bytes": m["bytes"], "graph_bytes": m["program_bytes"], "weight_bytes": m["params_bytes"]}


def bench_role(role: str, data: Path, work: Path, cfg_flags: dict) -> dict:
    from edgekit.export.onnx_import import import_onnx
    from edgekit.export.runner import StaticRunner
    from edgekit.lite.runtime import LiteRunner
    from edgekit.quantize.ptq import quantize_int8

    from edgekit.model.artifacts import sha256_file
    from edgekit.build.config import resolve
    from edgekit.model.data import Samples
    from edgekit.core.errors import EdgekitError
    from edgekit.examples.ppocr import models
    from edgekit.build.pipeline import build
    from edgekit.tasks import find_truth

    info = models.MODELS[role]
    onnx_path = models.model_path(role)
    eval_file, calib_file = data / f"{role}_eval.npz", data / f"{role}_calib.npz"
    with np.load(eval_file) as loaded:
        x = loaded["x"]
    with np.load(calib_file) as loaded:
        calib_x = loaded["x"]
    truth = find_truth(eval_file, len(x))
    task = truth.task
    seconds, metrics, agreement, nb = {}, {}, {}, {}

    start = time.monotonic()
    reference = _onnxruntime(onnx_path, x, 8)
    seconds["onnxruntime"] = round(time.monotonic() - start, 2)
    metrics["onnxruntime"] = task.evaluate(reference, truth.values)
    reference_readable = _readable(task, reference)

    start = time.monotonic()
    static, report = import_onnx(onnx_path, work / f"{role}-import", {"x": info.input_shape})
    feed = static.feed_names[0]
    seconds["x2paddle_import"] = round(time.monotonic() - start, 2)
    start = time.monotonic()
    paddle_out = StaticRunner(static).run({feed: x})
    seconds["paddle_static"] = round(time.monotonic() - start, 2)
    metrics["paddle"] = task.evaluate(paddle_out, truth.values)
    agreement["paddle_vs_onnxruntime"] = _agreement(task, reference, reference_readable, paddle_out)

    builds, chosen_search = {}, {}
    for precision in ("fp32", "int8"):
        flags = dict(cfg_flags, model=str(onnx_path), evaluation=eval_file, calibration=calib_file,
                     precision=precision, target="arm64", out_dir=work / "build")
        start = time.monotonic()
        try:
            result = build(resolve(EXAMPLE / f"{role}.toml", flags))
        except EdgekitError as error:
            builds[precision] = {"error": error.message, "report": getattr(error, "report_lines", [])}
            continue
        manifest = result.bundle.manifest.to_json()
        builds[precision] = {"bundle": str(result.bundle.path), "seconds": round(time.monotonic() - start, 2),
                             "stages_seconds": manifest["stages_seconds"], "parity": manifest["parity"]["checks"]}
        nb[f"arm64_{precision}"] = _nb_figures(manifest)
        if precision == "int8":
            search = manifest.get("quantization", {}).get("search", {})
            chosen_search = {k: search.get(k) for k in ("algo", "float_layers", "holds", "drop", "budget", "calibrations")}
            chosen_search["candidates"] = [{k: c.get(k) for k in ("algo", "purpose", "holds", "task", "cosine")}
                                           for c in search.get("candidates", []) if c.get("purpose") != "sensitivity"]
        if precision == "fp32":
            nb["x86_twin_bytes"] = manifest["host_twin"]["bytes"]
            twin_file = result.bundle.path / manifest["host_twin"]["file"]
            start = time.monotonic()
            twin_out = LiteRunner(twin_file, static.feed_names).run({feed: x})
            seconds["x86_twin"] = round(time.monotonic() - start, 2)
            metrics["x86_twin"] = task.evaluate(twin_out, truth.values)
            agreement["x86_twin_vs_onnxruntime"] = _agreement(task, reference, reference_readable, twin_out)
            agreement["x86_twin_vs_paddle"] = _agreement(task, paddle_out, _readable(task, paddle_out), twin_out)
    if "arm64_fp32" in nb and "arm64_int8" in nb:
        nb["int8_over_fp32"] = round(nb["arm64_int8"]["bytes"] / nb["arm64_fp32"]["bytes"], 4)

    # the INT8 program is not kept in the bundle: quantise the imported model again as the build's search chose
    cfg = resolve(EXAMPLE / f"{role}.toml", dict(cfg_flags, model=str(onnx_path)))
    chosen = chosen_search.get("algo") or cfg.quant.algo
    skip = tuple(chosen_search.get("float_layers") or ())
    (work / f"{role}-int8").mkdir()
    quantized = quantize_int8(static, Samples({feed: calib_x}, None, (), str(calib_file)), replace(cfg.quant, algo=chosen),
                              work / f"{role}-int8", skip)
    seconds["ptq"] = round(quantized.seconds, 2)
    start = time.monotonic()
    int8_out = StaticRunner(quantized.model).run({feed: x})
    seconds["int8_simulated"] = round(time.monotonic() - start, 2)
    metrics["int8_simulated"] = task.evaluate(int8_out, truth.values)
    agreement["int8_simulated_vs_onnxruntime"] = _agreement(task, reference, reference_readable, int8_out)

    return {
        "onnx": {"file": onnx_path.name, "sha256": sha256_file(onnx_path), "bytes": onnx_path.stat().st_size,
                 "build_input": list(info.input_shape)},
        "task": task.kind.value, "primary": task.primary, "samples": len(x), "calibration_samples": len(calib_x),
        "quantize": {"algo": chosen, "float_layers": list(skip), "search": chosen_search,
                     "batch_size": cfg.quant.batch_size, "batch_nums": cfg.quant.batch_nums,
                     "samples_used": quantized.calibration_samples},
        "metrics_percent": metrics, "agreement": agreement, "nb": nb, "builds": builds, "seconds": seconds,
        "import_check": {"max_abs": report["check"]["max_abs"], "min_cosine": report["check"]["min_cosine"]},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--roles", nargs="+", default=["det", "rec", "cls"], choices=["det", "rec", "cls"])
    parser.add_argument("--data", type=Path, help="data from make_data (default: render into a temporary folder)")
    parser.add_argument("--out", type=Path, help="keep imports and bundles here (default: a temporary folder)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.disable(logging.INFO)
    os.environ.setdefault("GLOG_minloglevel", "2")

    from edgekit.core import versions
    from edgekit.examples.ppocr import make_data, models

    with tempfile.TemporaryDirectory(prefix="edgekit-bench-ocr-") as scratch:
        work = (args.out or Path(scratch)).absolute()
        work.mkdir(parents=True, exist_ok=True)
        data = args.data.absolute() if args.data else work / "data"
        if not args.data:
            start = time.monotonic()
            make_data.make_data(data, args.seed)
            render_seconds = round(time.monotonic() - start, 2)
        else:
            render_seconds = None
        results = {role: bench_role(role, data, work, {}) for role in args.roles}
    report = {
        "models": results,
        "data": {"folder": str(data), "seed": args.seed if not args.data else None, "render_seconds": render_seconds,
                 "generator": "edgekit.examples.ppocr.make_data"},
        "versions": dict(versions.collect(), rapidocr_onnxruntime=models.installed_version()),
        "python": sys.version.split()[0], "host": "x86-64 (ARM kernels are not run on the host)",
    }
    print(json.dumps(report, indent=2, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
