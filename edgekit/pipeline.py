"""`edgekit build`: chain the stages. Each stage is one call; this module only orders them.

source -> export (StaticModel, checked) -> quantize (QuantizedModel) -> lite (.nb +
x86 twin) -> parity (ParityReport, gates) -> package (Bundle, atomic).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from . import bundle as bundle_mod
from . import parity
from .artifacts import QuantizedModel, StaticModel
from .config import BuildConfig
from .data import Samples, load_samples, read_labels, write_preprocess
from .errors import BundleError, UnsupportedOpsError
from .host_checks import golden_tolerances, host_parity, int8_budget
from .manifest import build_manifest
from .tables import PRECISIONS, TARGETS, Precision

log = logging.getLogger(__name__)

STAGES = ("export", "prune", "data", "coverage", "quantize", "lite", "twin", "parity", "package")
Progress = Callable[[str, str], None]   # (stage, "start" | "done")


@dataclass
class BuildResult:
    bundle: bundle_mod.Bundle
    report: parity.ParityReport
    timings: dict = field(default_factory=dict)
    quant_search: list = field(default_factory=list)     # the int8 search's summary lines
    prune: object | None = None          # edgekit.prune.PruneReport when --prune was given


@dataclass
class _Run:
    cfg: BuildConfig
    work: Path
    progress: Progress
    timings: dict = field(default_factory=dict)
    commands: list = field(default_factory=list)
    onnx_import: dict | None = None     # the ONNX import report (names, feeds, ONNX Runtime check)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        assert name in STAGES, name   # internal invariant, not user input
        self.progress(name, "start")
        start = time.monotonic()
        yield
        self.timings[name] = round(time.monotonic() - start, 3)
        self.progress(name, "done")


def _synthetic(model: StaticModel, count: int) -> Samples:
    rng = np.random.default_rng(0)
    inputs = {}
    for spec in model.feeds:
        shape = spec.concrete(count)
        inputs[spec.name] = rng.standard_normal(shape).astype(spec.dtype) if spec.dtype.startswith("float") \
            else rng.integers(0, 2, shape).astype(spec.dtype)
    return Samples(inputs, None, (), "synthetic N(0,1), seed 0")


def _check_shapes(model: StaticModel, samples: Samples, what: str) -> None:
    from .errors import DataError

    for spec in model.feeds:
        arr = samples.inputs[spec.name]
        want = spec.shape
        if arr.ndim != len(want) or any(w != -1 and w != g for w, g in zip(want[1:], arr.shape[1:])):
            raise DataError(f"{what} input {spec.name!r} has per-sample shape {list(arr.shape[1:])}, the model wants {list(want[1:])}",
                            "fix the preprocessing resize/crop/layout or the tensor file")


STAGING_PREFIX = ".edgekit-staging-"


def _remove_stale_staging(out_dir: Path) -> None:
    """Staging folders of builds whose process is gone (killed by a signal, power loss)."""
    for folder in out_dir.glob(STAGING_PREFIX + "*"):
        pid = folder.name[len(STAGING_PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:   # alive, owned by someone else
            continue


def build(cfg: BuildConfig, progress: Progress = lambda stage, state: None) -> BuildResult:
    from . import export as export_stage

    try:
        cfg.out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundleError(f"cannot create the output folder {cfg.out_dir}: {exc.strerror}", "pass a writable --out") from exc
    _remove_stale_staging(cfg.out_dir)
    # staging beside the destination so the final rename is atomic (same filesystem); absolute because
    # PaddleSlim runs inside its own working directory; the pid lets a later run recognise staging
    # left by a killed process
    work = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=cfg.out_dir)).absolute()
    try:
        return _build(cfg, _Run(cfg, work, progress), export_stage)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _build(cfg: BuildConfig, run: _Run, export_stage) -> BuildResult:
    from . import lite as lite_stage
    from .lite.rewrite import flatten_to_reshape
    from .lite.runtime import LiteRunner

    labels = read_labels(cfg.data.labels) if cfg.data.labels else None
    staging = run.work / "bundle"
    staging.mkdir()
    loaded: list[Samples] = []

    def evaluation_for(model: StaticModel) -> Samples | None:
        """The evaluation data, read and preprocessed once, by the first stage that needs it."""
        if cfg.data.evaluation is None:
            return None
        if not loaded:
            aliases = run.onnx_import["feeds"] if run.onnx_import else None
            loaded.append(_load(cfg, model, cfg.data.evaluation, labels, aliases))
        return loaded[0]

    with run.stage("export"):
        (run.work / "export").mkdir()
        if cfg.model.factory:
            # the export check needs inputs: evaluation data when given, else seeded random tensors
            probe = StaticModel(Path(), None, cfg.model.inputs, (), "dygraph")
            probe_samples = evaluation_for(probe) or _synthetic(probe, 4)
            if cfg.prune is None:   # a pruned factory model is exported by the prune stage, after pruning
                static = export_stage.export_dygraph(cfg.model, run.work / "export", dict(probe_samples.head(8).inputs))
        elif cfg.model.model_file is not None and cfg.model.model_file.suffix.lower() == ".onnx":
            from .export.onnx_import import import_onnx

            # checked against ONNX Runtime inside: no Executor-vs-Paddle-Inference cross check later
            static, run.onnx_import = import_onnx(cfg.model.model_file, run.work / "export",
                                                  {spec.name: spec.shape for spec in cfg.model.inputs},
                                                  timeout=cfg.tool_timeout)
        else:
            static = export_stage.load_inference(cfg.model, run.work / "export")

    pruned = None
    if cfg.prune is not None:
        from .prune import measure_nb, prune_factory_model, prune_inference_model

        with run.stage("prune"):
            (run.work / "prune").mkdir()
            evaluation = evaluation_for(static if not cfg.model.factory else probe)
            evaluation = evaluation.head(cfg.gates.max_samples) if evaluation is not None else None
            if cfg.model.factory:
                pruned = prune_factory_model(cfg.model, cfg.prune, run.work / "prune", evaluation)
            else:
                pruned = prune_inference_model(static, cfg.prune, run.work / "prune", evaluation)
            (run.work / "prune" / "nb").mkdir()
            measure_nb(pruned, run.work / "prune" / "nb", cfg.tool_timeout)
            static = pruned.model

    with run.stage("data"):
        aliases = run.onnx_import["feeds"] if run.onnx_import else None
        evaluation = evaluation_for(static)
        calibration = _load(cfg, static, cfg.data.calibration, labels, aliases) if cfg.data.calibration else None
        evaluation = evaluation or calibration or _synthetic(static, 16)
        task, truth = _task_and_truth(cfg, evaluation)           # full-length truth, cut with the samples
        evaluation = evaluation.head(cfg.gates.max_samples)
        truth = truth[:len(evaluation)] if truth is not None else None
        if static.origin == "inference":
            static = export_stage.cross_check(static, dict(evaluation.head(8).inputs))

    target_info = TARGETS[cfg.target]
    with run.stage("coverage"):
        _coverage(static, target_info.opt_places, cfg, "target " + cfg.target.value)
        if target_info.opt_places != "x86":
            _coverage(static, "x86", cfg, "the x86 twin (host parity)")

    quantized: QuantizedModel | None = None
    search = None
    reference = None           # FP32 outputs on the evaluation samples, when the int8 search already ran them
    data_warnings: list[str] = []
    if cfg.precision is Precision.int8:
        from .quantize.search import SearchPlan, quantize_to_budget
        from .quantize.sensitivity import Budget, Evaluator

        with run.stage("quantize"):
            (run.work / "quant").mkdir()
            q = cfg.quant
            budget = int8_budget(cfg, "points" if truth is not None else "cosine")
            plan = SearchPlan(Budget.for_data(budget, task.primary if truth is not None else None),
                              q.search_algos or (q.algo,), q.fallback, q.max_float_fraction, q.sensitivity_method,
                              q.sensitivity_samples, q.analyse_layers)
            # a miss still hands on the best found: tier B (the same budget) then fails with exit 9 and the table
            judge = Evaluator.for_model(static, evaluation, task=task if truth is not None else None, truth=truth)
            search = quantize_to_budget(static, calibration, evaluation, q, plan, run.work / "quant", q.cache_dir,
                                        evaluator=judge)
            quantized, reference = search.quantized, judge.reference
            from .quantize.datacheck import check_calibration

            data_warnings = check_calibration(calibration.inputs, evaluation.inputs if cfg.data.evaluation else None,
                                              quantized.calibration_samples)
            for warning in data_warnings:
                log.warning("%s", warning)
            _coverage(quantized.model, target_info.opt_places, cfg, f"the quantised model on {cfg.target.value}")

    precision_info = PRECISIONS[cfg.precision]
    if precision_info.opt_fp16 or precision_info.opt_weight_quant:
        from .quantize.weight_only import simulate

        with run.stage("quantize"):   # opt does the real work; this is the host's simulation for tier B
            quantized = simulate(static, cfg.precision.value, run.work / "simulated")

    with run.stage("lite"):
        device_input = quantized.model if quantized and cfg.precision is Precision.int8 else static
        rewrites: tuple[dict, ...] = ()
        if target_info.opt_places == "x86":
            device_input, info = flatten_to_reshape(device_input, run.work / "rewrite-target", dict(evaluation.head(4).inputs))
            rewrites = (info,) if info else ()
        device = lite_stage.convert(device_input, target_info.opt_places, staging / "model.nb", timeout=cfg.tool_timeout,
                                    target=cfg.target.value, precision=cfg.precision.value, rewrites=rewrites,
                                    fp16=precision_info.opt_fp16, weight_quant=precision_info.opt_weight_quant)
        if precision_info.opt_fp16:
            _require_fp16_kernels(device.nb_file)

    with run.stage("twin"):
        if target_info.opt_places == "x86" and not quantized:
            twin = device
            twin_file = staging / "model.nb"
        else:
            (staging / "host").mkdir()
            twin_input, info = flatten_to_reshape(static, run.work / "rewrite-twin", dict(evaluation.head(4).inputs))
            twin = lite_stage.convert(twin_input, "x86", staging / "host" / "model_x86.nb", timeout=cfg.tool_timeout,
                                      target="x86", precision="fp32", rewrites=(info,) if info else ())
            twin_file = twin.nb_file

    with run.stage("parity"):
        report = host_parity(cfg, static, quantized, twin_file, evaluation, LiteRunner, task, truth, reference)
        if search is not None and not search.holds:
            report.notes.extend(line.strip() for line in search.lines(with_notes=False))
        report.notes.extend(f"calibration data: {w}" for w in data_warnings)
        if pruned is not None and pruned.report.metric_name == "top-1 %" and "int8 simulated" in report.accuracy:
            pruned.report.metric["int8 simulated"] = report.accuracy["int8 simulated"]
        report.raise_if_failed()      # no bundle for a model that failed its gates

    with run.stage("package"):
        golden_n = min(cfg.gates.golden_count, len(evaluation))
        golden_in = evaluation.spread(golden_n)
        ref_golden = export_stage.StaticRunner(static).run(golden_in.inputs)
        golden = bundle_mod.write_golden(staging / "golden", golden_in.inputs, ref_golden, static.fetches,
                                         golden_tolerances(cfg, report, ref_golden), golden_in.labels)
        write_preprocess(staging / "preprocess.json", cfg.data.preprocess, static.feed_names)
        if cfg.data.labels:
            shutil.copyfile(cfg.data.labels, staging / "labels.txt")
        (staging / "parity.txt").write_text("\n".join(report.lines()) + "\n", encoding="utf-8")
        if task is not None:   # what `edgekit run` and the apps need to post-process outputs
            (staging / "task.json").write_text(json.dumps({"kind": task.kind.value, "primary": task.primary,
                                                           "options": task.options()}, ensure_ascii=False, indent=1,
                                                          sort_keys=True) + "\n", encoding="utf-8")
        if search is not None:
            from .quantize.report import write_report

            write_report(search, staging / "quant", nb_bytes=device.nb_file.stat().st_size)
        manifest = build_manifest(cfg, run.timings, run.onnx_import, static, quantized, device, twin, report, evaluation, calibration, golden,
                             pruned.unpruned if pruned is not None and not cfg.model.factory else None)
        manifest["task"] = {"kind": task.kind.value, "primary": task.primary, "metrics": report.metrics} if task else None
        if search is not None:
            manifest["quantization"]["search"] = search.to_json()
            manifest["quantization"]["data_checks"] = data_warnings
        if pruned is not None:
            pruned.report.record_nb(f"bundle {cfg.target.value} {cfg.precision.value}", lite_stage.read_header(device.nb_file))
            if quantized is not None and cfg.precision is Precision.int8 and pruned.unpruned is not None:
                _unpruned_int8_size(cfg, run, pruned, calibration, quantized.algo)
            (staging / "prune.txt").write_text("\n".join(pruned.report.lines()) + "\n", encoding="utf-8")
            manifest["pruning"] = dict(pruned.report.to_json(), seconds=pruned.seconds)
        result_bundle = bundle_mod.finalize(staging, cfg.bundle_dir, manifest)
    return BuildResult(result_bundle, report, dict(run.timings), search.lines() if search is not None else [],
                       pruned.report if pruned is not None else None)


def _require_fp16_kernels(nb_file: Path) -> None:
    """opt silently ignores --enable_fp16 when it was built without ARMv8.2 FP16 support."""
    from .errors import ConversionError
    from .lite.nbfile import kernels

    if not any(k.precision == "FP16" for k in kernels(nb_file)):
        raise ConversionError(
            "paddle_lite_opt wrote an FP32 model for --quant fp16: the paddlelite wheel's opt was built without "
            "ARMv8.2 FP16 support (LITE_WITH_ARM82_FP16), so --enable_fp16 has no effect",
            "use --quant int16-weight (half-size weights, near-lossless) or int8, or an opt built with FP16 support")


def _unpruned_int8_size(cfg: BuildConfig, run: _Run, pruned, calibration: Samples, algo: str) -> None:
    """The comparison a pruning report needs: the unpruned model through the same int8 path and opt."""
    from dataclasses import replace

    from . import lite as lite_stage
    from .quantize import quantize_int8

    folder = run.work / "unpruned-int8"
    folder.mkdir()
    base = quantize_int8(pruned.unpruned, calibration, replace(cfg.quant, algo=algo), folder)
    nb = lite_stage.convert(base.model, TARGETS[cfg.target].opt_places, folder / "model.nb", timeout=cfg.tool_timeout,
                            target=cfg.target.value, precision="int8")
    pruned.report.record_nb(f"unpruned {cfg.target.value} int8", lite_stage.read_header(nb.nb_file))


def _task_and_truth(cfg: BuildConfig, evaluation: Samples):
    """The task and the ground truth of the evaluation samples; (None, None): output agreement only."""
    from .errors import ConfigError
    from .tasks import find_truth, make_task

    stored = find_truth(cfg.data.evaluation, len(evaluation)) if cfg.data.evaluation else None
    if stored is not None:
        if cfg.task.kind is not None and cfg.task.kind != stored.task.kind.value:
            raise ConfigError(f"[task] kind is {cfg.task.kind} but {stored.path} holds {stored.task.kind.value} truth",
                              "drop [task] kind or use evaluation data of that task")
        task = make_task(stored.task.kind, {**stored.task.options(), **cfg.task.options}) if cfg.task.options else stored.task
        return task, stored.values
    if evaluation.labels is not None:
        return make_task(cfg.task.kind or "classification", cfg.task.options), [int(v) for v in evaluation.labels]
    return None, None


def _load(cfg: BuildConfig, model: StaticModel, path: Path, labels, aliases: dict | None = None) -> Samples:
    """Load data for `model`; `aliases` maps ONNX input names (as users name .npz arrays) to program feeds."""
    to_feed = dict(aliases or {})
    to_source = {feed: name for name, feed in to_feed.items()}
    samples = load_samples(path, [to_source.get(n, n) for n in model.feed_names], cfg.data.preprocess, labels)
    samples = Samples({to_feed.get(k, k): v for k, v in samples.inputs.items()}, samples.labels, samples.files, samples.source)
    _check_shapes(model, samples, str(path))
    dtypes = {f.name: f.dtype for f in model.feeds}
    # tensors saved as float64 (numpy's default) feed a float32 model as float32
    return Samples({k: v.astype(dtypes[k], copy=False) for k, v in samples.inputs.items()}, samples.labels,
                   samples.files, samples.source)


def _coverage(model: StaticModel, places: str, cfg: BuildConfig, what: str) -> None:
    from .lite import supported_ops, unsupported_ops

    missing = unsupported_ops(model, supported_ops(places, timeout=cfg.tool_timeout))
    if missing:
        listing = "; ".join(m.describe() for m in missing[:6]) + (f"; ... {len(missing) - 6} more" if len(missing) > 6 else "")
        kinds = sorted({m.op_type for m in missing})
        raise UnsupportedOpsError(f"Paddle-Lite 2.13rc0 has no kernel for {', '.join(kinds)} on {what}: {listing}",
                                  "replace those layers with supported ops (see `paddle_lite_opt --print_supported_ops`), "
                                  "or pick another --target")
