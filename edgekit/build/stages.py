"""The stages of `edgekit build`, each `BuildRecord -> BuildRecord`.

Each function calls into its stage folder (`export/`, `prune/`, `quantize/`, `lite/`)
or the validation modules and returns a new record with what it provides. What each
needs and provides, and when it runs at all, is declared in `edgekit.build.pipeline.STAGES`;
nothing here decides whether a stage runs.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from edgekit.build import bundle as bundle_mod
from edgekit.contracts.files import LABELS
from edgekit.contracts.preprocess import PreprocessFile
from edgekit.contracts.task import TaskFile
from edgekit.model import parity
from edgekit.verify import tiers
from edgekit.model.artifacts import StaticModel
from edgekit.contracts.settings import BuildConfig
from edgekit.core.errors import ConversionError, UnsupportedOpsError
from edgekit.model.data import one_width, run_lines
from edgekit.model.evalset import evaluation_set, load_for, synthetic
from edgekit.build.manifest import build_manifest
from edgekit.model.parity import metric_label
from edgekit.build.record import StageView, declares
from edgekit.model.reports import Folding, Geometry, Golden, NmsDecision, OnnxImport, Paddle3
from edgekit.core.tables import TARGETS, Precision

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- the model in

@declares(reads=(), writes=("feeds",))
def factory_inputs(rec: StageView) -> StageView:
    """A factory model's inputs are its `--input` specs: the data can be read before the export."""
    return rec.with_(feeds=rec.cfg.model.inputs)


@declares(reads=(), writes=("static", "feeds"))
def load_exported(rec: StageView) -> StageView:
    from edgekit.export import load_inference

    folder = _folder(rec, "export")
    static, _ = _default_size(rec.cfg, load_inference(rec.cfg.model, folder))
    return rec.with_(static=static, feeds=static.feeds)


@declares(reads=(), writes=("static", "feeds", "onnx_import"))
def import_onnx(rec: StageView) -> StageView:
    """X2Paddle in a child process; checked against ONNX Runtime inside (no second reference check later)."""
    from edgekit.export.onnx_import import import_onnx as convert

    cfg = rec.cfg
    limits = parity.Tolerance(cfg.gates.import_max_abs, cfg.gates.import_min_cosine)
    # with data, a miss on seeded noise is not a refusal: import-metric judges the model on the data
    with_data = cfg.data.evaluation is not None or cfg.data.calibration is not None
    spec = cfg.data.preprocess
    free = None                   # a variable-width line model: its reshape targets made width-free first
    if spec is not None and spec.dynamic_width:
        if spec.layout == "NCHW" and len(cfg.model.inputs) == 1:
            (image,) = cfg.model.inputs
            free = (image.name, image.shape[1], spec.resize[0], (spec.resize[1], spec.width_step, spec.max_width))
        else:
            log.warning("width_mode dynamic: reshape targets left as they are (width-free reshapes need one NCHW "
                        "input declared in [model] inputs)")
    static, report = convert(cfg.model.model_file, _folder(rec, "export"), {s.name: s.shape for s in cfg.model.inputs},
                             timeout=cfg.tool_timeout, limits=limits, refuse=not with_data, width_free=free,
                             layout=_layout(cfg))
    imported = OnnxImport.of(report)
    if cfg.model.description is not None:   # an inference.yml beside the .onnx that contradicts it is refused here
        imported = imported.with_description(_described(cfg, static))
    return rec.with_(static=static, feeds=static.feeds, onnx_import=imported)


def _described(cfg: BuildConfig, static: StaticModel) -> dict:
    from edgekit.export.paddlex import check_against_program, read_model_yml

    return check_against_program(read_model_yml(cfg.model.description), static.feeds).to_json()


@declares(reads=(), writes=("static", "feeds", "paddle3"))
def load_pir(rec: StageView) -> StageView:
    """A Paddle 3 PIR program: described by Paddle 3, translated into a legacy program (checked in `paddle3_reference`)."""
    from edgekit.export.pir import load_pir as translate

    cfg = rec.cfg
    static, report = translate(cfg.model, _folder(rec, "export"), cfg.tool_timeout)
    static, chosen = _default_size(cfg, static)
    translated = Paddle3.of(dict(report, input_chosen=chosen) if chosen else report)
    if cfg.model.description is not None:   # an inference.yml that contradicts the program is refused here
        translated = translated.with_description(_described(cfg, static))
    return rec.with_(static=static, feeds=static.feeds, paddle3=translated)


def _default_size(cfg: BuildConfig, static: StaticModel) -> tuple[StaticModel, dict | None]:
    """A program whose image input leaves H and W open, with no --input for it: the size inference.yml's
    DetResizeForTest gives (export/paddlex.py default_input), logged and returned for the manifest."""
    if cfg.model.description is None:
        return static, None
    from edgekit.export.paddlex import default_input, read_model_yml

    found = default_input(read_model_yml(cfg.model.description), static.feeds, {s.name for s in cfg.model.inputs})
    if found is None:
        return static, None
    spec, said = found
    log.warning("%s", said)
    feeds = tuple(spec if f.name == spec.name else f for f in static.feeds)
    return replace(static, feeds=feeds), {"name": spec.name, "shape": list(spec.shape), "why": said}


@declares(reads=("feeds", "?onnx_import"), writes=("evaluation", "?calibration"))
def read_data(rec: StageView) -> StageView:
    """Evaluation and calibration data, read and preprocessed once for every later stage."""
    cfg = rec.cfg
    evaluation = evaluation_set(cfg, rec.feeds, rec.aliases)
    calibration = load_for(cfg, rec.feeds, cfg.data.calibration, rec.aliases) if cfg.data.calibration else None
    if evaluation is None:    # parity then uses the calibration data (optimistic for int8), else seeded noise
        fallback = calibration if calibration is not None else synthetic(rec.feeds, 16, _layout(cfg))
        evaluation = evaluation_set(cfg, rec.feeds, fallback=fallback)
    return rec.with_(evaluation=evaluation, calibration=calibration)


@declares(reads=("feeds", "evaluation"), writes=("static",))
def export_factory(rec: StageView) -> StageView:
    """to_static + jit.save, checked against the dynamic model on evaluation samples (else seeded noise)."""
    from edgekit.export import export_dygraph

    cfg = rec.cfg
    probe = rec.evaluation.samples if cfg.data.evaluation else synthetic(rec.feeds, 4, _layout(cfg))
    static = export_dygraph(cfg.model, _folder(rec, "export"), dict(probe.head(8).inputs))
    return rec.with_(static=static)


@declares(reads=("feeds", "evaluation"), writes=("static", "paddle3"))
def export_paddle3(rec: StageView) -> StageView:
    """A factory written for Paddle 3: exported by Paddle 3 as PIR (checked against the dynamic model there), translated."""
    from edgekit.export.pir import export_paddle3_factory

    cfg = rec.cfg
    probe = rec.evaluation.samples if cfg.data.evaluation else synthetic(rec.feeds, 4, _layout(cfg))
    static, report = export_paddle3_factory(cfg.model, _folder(rec, "export"), dict(probe.head(8).inputs), cfg.tool_timeout)
    return rec.with_(static=static, paddle3=Paddle3.of(report))


@declares(reads=("static", "evaluation", "paddle3"), writes=("reference", "paddle3"))
def paddle3_reference(rec: StageView) -> StageView:
    """Paddle 3's own inference of the source program on the evaluation set: every tier's reference. The translated
    program must compute the same (and, with truth, read the same in the task's metric)."""
    from edgekit.export.pir import reference
    from edgekit.verify.nms import scored_as_rows

    evaluation = scored_as_rows(rec.static, rec.evaluation)     # an NMS op's rows, before optimise keeps or cuts it
    outputs, ours, check = reference(rec.static, rec.paddle3.to_json(), evaluation.samples, rec.work / "paddle3-reference",
                                     rec.cfg.tool_timeout)
    figures = None
    if evaluation.has_truth:
        primary = evaluation.primary
        figures = {"metric": primary, "samples": len(evaluation), "paddle3": evaluation.evaluate(outputs)[primary],
                   "translated": evaluation.evaluate(ours)[primary], "agreement": evaluation.task.agreement(ours, outputs)}
    return rec.with_(reference=tuple(outputs), paddle3=rec.paddle3.with_check(check, figures))


@declares(reads=("static", "evaluation"), writes=("static", "pruned"))
def prune(rec: StageView) -> StageView:
    from edgekit.prune.run import measure_nb
    from edgekit.prune.stage import prune_factory_model
    from edgekit.prune.static import prune_inference_model

    cfg = rec.cfg
    folder = _folder(rec, "prune")
    evaluation = rec.evaluation if cfg.data.evaluation else None     # never prune against calibration data or noise
    if cfg.model.factory:
        pruned = prune_factory_model(cfg.model, cfg.prune, folder, evaluation, unpruned=rec.static)
    else:
        pruned = prune_inference_model(rec.static, cfg.prune, folder, evaluation)
    pruned = measure_nb(pruned, _folder(rec, "prune/nb"), cfg.tool_timeout, dict(rec.evaluation.samples.head(4).inputs))
    return rec.with_(static=pruned.model, pruned=pruned)


@declares(reads=("static", "evaluation", "?calibration", "?paddle3", "?onnx_import"),
          writes=("passes", "?static", "?feeds", "?evaluation", "?calibration", "?geometry", "?nms", "?folding",
                  "?reference"))
def optimise(rec: StageView) -> StageView:
    """The FP32 program's transforms as passes of the pass manager (edgekit/build/optimise.py), each checked against
    its input: the reference engine cross-checked (an exported model), PaddleDetection's geometry inputs bound, an
    NMS op kept or cut, the graph folded (`[build] fold`). A Paddle 3 source whose NMS op is cut gets its reference
    again: Paddle 3's values at the op's inputs."""
    from edgekit.build import optimise as opt
    from edgekit.model.passes import run_passes

    cfg = rec.cfg
    source = ("a Paddle 3 program" if rec.paddle3 is not None else "an ONNX import" if rec.onnx_import is not None
              else None)
    passes = ([opt.engine_pass()] if cfg.model.factory is None and source is None else []) + [
        opt.geometry_pass(rec.work, cfg),
        opt.nms_pass(rec.work, cfg, rec.paddle3.to_json() if rec.paddle3 is not None else None)]
    if cfg.fold:
        passes.append(opt.fold_pass(rec.work))
    state, records = run_passes(opt.Prepared(rec.static, rec.evaluation, rec.calibration), passes)
    done = {r.name: r for r in records}
    geometry, nms, folding = done["geometry"].facts, done["nms"].facts, opt.folding_entry(done.get("fold"))
    return rec.with_(static=state.static, feeds=state.static.feeds, evaluation=state.evaluation,
                     calibration=state.calibration, geometry=Geometry.of(geometry) if geometry is not None else None,
                     nms=NmsDecision.of(nms) if nms is not None else None,
                     folding=Folding.of(folding) if folding is not None else None, passes=records,
                     **({"reference": state.reference} if state.reference is not None else {}))


@declares(reads=("static", "evaluation", "onnx_import", "?geometry"), writes=("onnx_import", "reference"))
def import_metric(rec: StageView) -> StageView:
    """An ONNX model, judged on the data: ONNX Runtime on the source .onnx vs the model every later stage starts from
    (imported, legalised, geometry bound, folded), on the evaluation samples (else the calibration samples, else
    seeded noise, and the report says which), ONNX Runtime fed the geometry values the build wrote into the graph.
    With truth the task metric decides (export/import_gate.py). An NMS op written for paddle2onnx's pattern
    (export/onnx_nms.py, checked on its rows at import) is judged at its inputs, where X2Paddle's conversion ends,
    whether the build kept it or cut it."""
    from edgekit.export import onnx_nms
    from edgekit.export.import_gate import judge_on_data
    from edgekit.export.onnx_import import load_onnx, onnxruntime_run
    from edgekit.export.runner import batch_limit
    from edgekit.lite.nms import cut_task, find_nms
    from edgekit.model.data import geometry_rows
    from edgekit.model.evalset import EvalSet

    cfg, evaluation = rec.cfg, rec.evaluation
    reference = tiers.reference_outputs(rec.static, evaluation)     # tier A's reference too: computed once
    by_feed = {feed: onnx for onnx, feed in rec.aliases.items()}

    def as_fed(feeds: dict) -> dict:
        """The program's feeds under their ONNX names, with the geometry values the build wrote into the graph."""
        found = {by_feed[k]: v for k, v in feeds.items()}
        if rec.geometry is not None and rec.geometry.bound is not None:
            count = len(next(iter(feeds.values())))
            found.update({by_feed[name]: rows for name, rows in geometry_rows(rec.geometry.bound, count).items()})
        return found

    batch = batch_limit(rec.static, evaluation.inputs)   # the fixed batch, else as memory allows
    lifted = rec.onnx_import.details.get("nms")
    if lifted is None:      # text lines in width groups, as the reference ran them
        source = run_lines(lambda feeds: onnxruntime_run(cfg.model.model_file, as_fed(feeds), batch), evaluation.samples)
        imported, names, judged = reference, list(rec.onnx_import.fetches), evaluation
    else:
        kept = find_nms(rec.static)
        source, imported, names = onnx_nms.at_op_inputs(load_onnx(cfg.model.model_file), lifted, rec.static,
                                                        evaluation.inputs, as_fed(dict(evaluation.inputs)), batch,
                                                        rec.work / "import-metric")
        task = cut_task(kept[0], evaluation.task) if kept and evaluation.task is not None else evaluation.task
        judged = EvalSet(evaluation.samples, task, evaluation.truth)
    probe = "evaluation" if cfg.data.evaluation else "calibration" if cfg.data.calibration else "random"
    found = judge_on_data(source, imported, names, judged,
                          parity.Tolerance(cfg.gates.import_max_abs, cfg.gates.import_min_cosine),
                          cfg.gates.import_max_metric_drop, probe, cfg.model.model_file.name)
    log.info("import judged on %s by the %s: %s", found["data_check"]["probe_text"], found["verdict"]["decided_by"],
             "passed" if found["verdict"]["tensor_check_passed"] else "tensor figures missed, task metric unchanged")
    return rec.with_(onnx_import=rec.onnx_import.with_judgement(found), reference=reference)


@declares(reads=("static",), writes=())
def coverage(rec: StageView) -> StageView:
    """Every op has a Paddle-Lite kernel on the target (and on x86, for the twin), before anything slow runs."""
    places = TARGETS[rec.cfg.target].opt_places
    require_kernels(rec.static, places, rec.cfg, "target " + rec.cfg.target.value)
    if places != "x86":
        require_kernels(rec.static, "x86", rec.cfg, "the x86 twin (host parity)")
    return rec


# ---------------------------------------------------------------- precision

@declares(reads=("static", "evaluation", "calibration", "reference"), writes=("quantized", "search", "data_warnings"))
def quantize_int8(rec: StageView) -> StageView:
    """PaddleSlim PTQ to the accuracy budget, scored in the task's metric; hands on the best found even on a miss
    (the tier-B gate, with the same budget, then fails the build with the whole table)."""
    from edgekit.quantize.datacheck import check_calibration
    from edgekit.quantize.search import SearchPlan, quantize_to_budget
    from edgekit.quantize.sensitivity import Evaluator

    cfg, q, evaluation = rec.cfg, rec.cfg.quant, rec.evaluation
    plan = SearchPlan(tiers.search_budget(cfg, evaluation), q.search_algos or (q.algo,), q.fallback,
                      q.max_float_fraction, q.sensitivity_method, q.sensitivity_samples, q.analyse_layers,
                      q.cost_candidates, q.rank_by)
    judge = Evaluator.for_model(rec.static, evaluation, reference=rec.reference)
    coster, no_cost = _search_coster(rec) if q.cost_candidates else (None, "[quantize] cost_candidates = 0")
    search = quantize_to_budget(rec.static, rec.calibration, evaluation.samples, q, plan, _folder(rec, "quant"),
                                q.cache_dir, evaluator=judge, coster=coster, no_cost=no_cost)
    warnings = check_calibration(rec.calibration.inputs, evaluation.inputs if cfg.data.evaluation else None,
                                 search.quantized.calibration_samples)
    for warning in warnings:
        log.warning("%s", warning)
    require_kernels(search.quantized.model, TARGETS[cfg.target].opt_places, cfg, f"the quantised model on {cfg.target.value}")
    return rec.with_(quantized=search.quantized, search=search, data_warnings=tuple(warnings))


def _search_coster(rec: StageView):
    """(the INT8 search's cost counter, "") when tier C can run here, else (None, why not): cost is counted only with
    the ARM runtime, qemu and the cross compiler (edgekit/verify/search_cost.py)."""
    from edgekit.core.errors import EmulationUnavailable
    from edgekit.verify.emulator import Emulator
    from edgekit.verify.search_cost import EmulatedCost, count_cache
    from edgekit.verify.tier_c import count_sample

    cfg = rec.cfg
    if not cfg.emulation.enabled:
        return None, "tier C is off (--no-emulation / [emulation] enabled = false)"
    try:
        emulator = Emulator.prepare(TARGETS[cfg.target].emulation, cfg.emulation, cfg.tool_timeout)
    except EmulationUnavailable as exc:
        return None, f"tier C cannot run here: {exc.message}"
    coster = EmulatedCost(emulator, cfg.emulation, cfg.target.value, rec.work / "cost",
                          dict(rec.evaluation.samples.head(4).inputs), count_sample(cfg, rec.evaluation),
                          count_cache(cfg, rec.work), cfg.tool_timeout)
    return coster, ""


@declares(reads=("static",), writes=("quantized",))
def simulate_weights(rec: StageView) -> StageView:
    """opt does the real weight-only conversion (ARM only); this is the host's simulation of it for tier B."""
    from edgekit.quantize.weight_only import simulate

    return rec.with_(quantized=simulate(rec.static, rec.cfg.precision.value, rec.work / "simulated"))


# ---------------------------------------------------------------- Paddle-Lite

@declares(reads=("static", "evaluation", "?quantized"), writes=("device",))
def convert_target(rec: StageView) -> StageView:
    from edgekit import lite
    from edgekit.core.tables import PRECISIONS

    cfg, places = rec.cfg, TARGETS[rec.cfg.target].opt_places
    info = PRECISIONS[cfg.precision]
    model = rec.quantized.model if cfg.precision is Precision.int8 else rec.static
    # opt folds a scale after a conv-fused activation wrongly, and crashes on flatten_contiguous_range (lite/safe.py)
    device = lite.convert_safe(model, places, rec.staging / "model.nb", rec.work / "rewrite-target",
                               dict(rec.evaluation.samples.head(4).inputs), timeout=cfg.tool_timeout,
                               target=cfg.target.value, precision=cfg.precision.value, fp16=info.opt_fp16,
                               weight_quant=info.opt_weight_quant)
    if info.opt_fp16:
        _require_fp16_kernels(device.nb_file)
    return rec.with_(device=device)


@declares(reads=("static", "evaluation", "device", "?quantized"), writes=("twin",))
def convert_twin(rec: StageView) -> StageView:
    """The FP32 x86 twin of model.nb (tier A); an FP32 x86 build is its own twin."""
    from edgekit import lite

    if TARGETS[rec.cfg.target].opt_places == "x86" and rec.quantized is None:
        return rec.with_(twin=rec.device)
    (rec.staging / "host").mkdir()
    twin = lite.convert_safe(rec.static, "x86", rec.staging / "host" / "model_x86.nb", rec.work / "rewrite-twin",
                             dict(rec.evaluation.samples.head(4).inputs), timeout=rec.cfg.tool_timeout, target="x86",
                             precision="fp32")
    return rec.with_(twin=twin)


# ---------------------------------------------------------------- validation (tiers A, B and C)

@declares(reads=("static", "evaluation"), writes=("reference",))
def fp32_reference(rec: StageView) -> StageView:
    """The FP32 program's outputs on the evaluation set (paddle.static.Executor, checked against the dynamic model or
    Paddle Inference): every tier's reference, for a model that is not judged against its source framework."""
    return rec.with_(reference=tuple(tiers.reference_outputs(rec.static, rec.evaluation)))


@declares(reads=("static", "evaluation", "twin", "reference"), writes=("report",))
def tier_a(rec: StageView) -> StageView:
    evaluation, reference = rec.evaluation, rec.reference
    tiers.require_finite(rec.static, reference)
    lines = evaluation.samples.lines is not None       # run in width groups: a predictor per width
    with tiers.twin_process(rec.twin.nb_file, rec.static.feed_names, "tier-a", per_shape=lines) as runner:
        twin = run_lines(runner.run, evaluation.samples)     # a crash of Lite: one line
    report = tiers.start_report(rec.static, evaluation, reference)
    report = tiers.tier_a(report, rec.static, evaluation, reference, twin, rec.cfg.gates)
    spec = rec.cfg.data.preprocess
    if spec is not None and spec.dynamic_width:
        report = tiers.tier_a_wide(report, rec.static, rec.twin.nb_file, evaluation, spec, rec.cfg.gates)
    return rec.with_(report=report)


@declares(reads=("report", "static", "quantized", "evaluation", "reference"), writes=("report", "simulated"))
def tier_b(rec: StageView) -> StageView:
    report, simulated = tiers.tier_b(rec.report, rec.cfg, rec.static, rec.quantized, rec.evaluation, rec.reference)
    return rec.with_(report=report, simulated=tuple(simulated))


@declares(reads=("report", "device", "evaluation", "reference", "static", "?simulated", "?search"),
          writes=("report", "emulation"))
def tier_c(rec: StageView) -> StageView:
    """model.nb itself on Paddle-Lite's ARM kernels under qemu (or a note saying why not, never a silent pass)."""
    from edgekit.verify.tier_c import emulate

    report, emulation = emulate(rec)
    return rec.with_(report=report, emulation=emulation)


@declares(reads=("report", "evaluation", "?data_warnings", "?quantized", "?emulation", "?search"), writes=("report",))
def gates(rec: StageView) -> StageView:
    """The verdict: every tier's checks must pass, or the build fails here (exit 9) and writes no bundle."""
    notes = tiers.tier_notes(rec.cfg, rec.evaluation, rec.quantized is not None, rec.emulation)
    if rec.search is not None and not rec.search.holds:
        notes += [line.strip() for line in rec.search.lines(with_notes=False)]
    notes += [f"calibration data: {w}" for w in rec.data_warnings]
    changed = rec.search.budget.changed_check(rec.search.chosen.score) if rec.search is not None else None
    report = rec.report.extended(checks=[changed] if changed is not None else [], notes=notes)
    report.raise_if_failed()
    return rec.with_(report=report)


# ---------------------------------------------------------------- outputs

@declares(reads=("pruned", "calibration", "quantized"), writes=("?unpruned_int8",))
def unpruned_int8(rec: StageView) -> StageView:
    """What a pruning report of an int8 build compares against: the unpruned model through the same int8 path and
    opt (a factory model; a given exported model has no unpruned export to compare)."""
    from dataclasses import replace

    from edgekit import lite
    from edgekit.quantize import quantize_int8 as quantize

    cfg, pruned = rec.cfg, rec.pruned
    if pruned.unpruned is None:
        return rec
    folder = _folder(rec, "unpruned-int8")
    base = quantize(pruned.unpruned, rec.calibration, replace(cfg.quant, algo=rec.quantized.algo), folder)
    nb = lite.convert_safe(base.model, TARGETS[cfg.target].opt_places, folder / "model.nb", folder / "rewrite",
                           dict(rec.calibration.head(4).inputs), timeout=cfg.tool_timeout, target=cfg.target.value,
                           precision="int8")
    return rec.with_(unpruned_int8=nb)


@declares(reads=("pruned", "report", "device", "?unpruned_int8"), writes=("pruned",))
def prune_report(rec: StageView) -> StageView:
    """The pruning report's size and metric comparison: the bundle's .nb, and the unpruned model through the same
    int8 path (int8 builds)."""
    from edgekit import lite

    cfg, report, pruned = rec.cfg, rec.report, rec.pruned.report
    simulated = f"{cfg.precision.value} simulated"
    if pruned.metric_name == f"{metric_label(report.metric)} %" and simulated in report.accuracy:
        pruned = pruned.with_metric(simulated, report.accuracy[simulated])
    pruned = pruned.with_nb(f"bundle {cfg.target.value} {cfg.precision.value}", lite.read_header(rec.device.nb_file))
    if rec.unpruned_int8 is not None:
        pruned = pruned.with_nb(f"unpruned {cfg.target.value} int8", lite.read_header(rec.unpruned_int8.nb_file))
    (rec.staging / "prune.txt").write_text("\n".join(pruned.lines()) + "\n", encoding="utf-8")
    return rec.with_(pruned=replace(rec.pruned, report=pruned))


@declares(reads=("static", "evaluation", "report", "device", "twin", "?data_warnings", "?onnx_import",
                 "?paddle3", "passes", "?folding", "?nms", "?geometry", "?emulation", "?quantized", "?pruned", "?search", "?calibration",
                 "?reference", "?simulated"),
          writes=("golden", "bundle"))
def write_bundle(rec: StageView) -> StageView:
    """Golden vectors, preprocessing and task specs, reports and the manifest; then one rename into place."""
    from edgekit.export import StaticRunner

    cfg, staging, evaluation, report = rec.cfg, rec.staging, rec.evaluation, rec.report
    golden_in = one_width(evaluation.samples, cfg.gates.golden_count)    # text lines: one width group, at its width
    reference = StaticRunner(rec.static)
    ref_golden = reference.run(golden_in.inputs)
    tolerances = tiers.golden_tolerances(cfg, report, ref_golden)
    if (floors := _golden_floors(rec)) is not None:
        tolerances[floors[0]] = floors[1]          # "detections" (matched boxes) or "masks" (pixel agreement)
    golden = bundle_mod.write_golden(staging / "golden", golden_in.inputs, ref_golden, rec.static.fetches,
                                     tolerances, golden_in.labels)
    spec = cfg.data.preprocess
    wide = tiers.wide_feeds(golden_in.inputs, spec, tiers.GOLDEN_WIDE_SAMPLES) \
        if spec is not None and spec.dynamic_width else None
    if wide is not None and all(wide[n].shape[1:] == golden_in.inputs[n].shape[1:] for n in wide):
        wide = None             # already max_width wide: no other width to add
    if wide is not None:        # the golden inputs are resize[1] wide: a group at max_width replays another width
        golden["widths"] = [bundle_mod.write_golden_width(staging / "golden", spec.max_width, wide, reference.run(wide),
                                                          rec.static.fetches)]
    images = _golden_images(cfg, evaluation, golden_in, rec.static.feed_names)
    if images:
        golden["images"] = bundle_mod.write_golden_images(
            staging / "golden" / "images", images, cfg.data.preprocess, rec.static.feed_names[0], reference.run,
            evaluation.task.postprocess if evaluation.task else None)
    if wide is not None or images:
        bundle_mod.write_golden_index(staging / "golden", golden)
    golden = Golden.of(golden)
    PreprocessFile(tuple(rec.static.feed_names), cfg.data.preprocess).write(staging)
    if cfg.data.labels:
        shutil.copyfile(cfg.data.labels, staging / LABELS)
    (staging / "parity.txt").write_text("\n".join(report.lines()) + "\n", encoding="utf-8")
    task = evaluation.task
    if task is not None:   # what `edgekit run` and the apps need to post-process outputs
        TaskFile.of(task).write(staging)
    if rec.search is not None:
        from edgekit.quantize.report import write_report

        write_report(rec.search, staging / "quant", nb_bytes=rec.device.nb_file.stat().st_size)
    rec = rec.with_(golden=golden)
    return rec.with_(bundle=bundle_mod.finalize(staging, cfg.bundle_dir, build_manifest(rec)))


# ---------------------------------------------------------------- helpers

def _golden_floors(rec: StageView) -> tuple[str, dict] | None:
    """Reduced-precision detection and segmentation bundles: the floors the golden detections (matched by class and
    IoU) or class maps (pixel agreement) must meet against the FP32 reference's on a device, keyed by the task's
    `golden_key`; from tier C (tier B's simulation when tier C did not run). None otherwise (FP32 results must be
    the reference's: boxes in order within 1 px, every mask pixel)."""
    task = rec.evaluation.task
    key = getattr(task, "golden_key", None)
    if rec.cfg.precision is Precision.fp32 or key is None:
        return None
    measured = rec.emulation.measured(key) if rec.emulation is not None else None
    if measured is not None:
        return key, task.golden_tolerance(measured, "C")
    if rec.simulated is None or rec.reference is None:
        return None
    return key, task.golden_tolerance(task.match_outputs(rec.reference, rec.simulated), "B")


def _golden_images(cfg: BuildConfig, evaluation, golden_in, feeds: Sequence[str]) -> list[Path]:
    """Source images for the apps' equality tests: the golden samples' own files when the evaluation data is an
    image folder, else the first `golden_count` of [data] images; none without a preprocessing spec."""
    from edgekit.core.images import image_files

    if cfg.data.preprocess is None or len(feeds) != 1:          # the program's own inputs (geometry bound)
        return []
    if golden_in.files and cfg.data.evaluation is not None and cfg.data.evaluation.is_dir():
        return [cfg.data.evaluation / f for f in golden_in.files]
    if cfg.data.images is not None:
        return image_files(cfg.data.images)[:cfg.gates.golden_count]
    return []


def _layout(cfg: BuildConfig) -> str:
    """The image tensor's layout: the preprocessing's, NCHW without one."""
    return cfg.data.preprocess.layout if cfg.data.preprocess is not None else "NCHW"


def _folder(rec, name: str) -> Path:
    folder = rec.work / name
    folder.mkdir(parents=True)
    return folder


def require_kernels(model: StaticModel, places: str, cfg: BuildConfig, what: str) -> None:
    from edgekit.lite import supported_ops, unsupported_ops

    missing = unsupported_ops(model, supported_ops(places, timeout=cfg.tool_timeout))
    if missing:
        listing = "; ".join(m.describe() for m in missing[:6]) + (f"; ... {len(missing) - 6} more" if len(missing) > 6 else "")
        kinds = sorted({m.op_type for m in missing})
        raise UnsupportedOpsError(f"Paddle-Lite 2.13rc0 has no kernel for {', '.join(kinds)} on {what}: {listing}",
                                  "replace those layers with supported ops (see `paddle_lite_opt --print_supported_ops`), "
                                  "or pick another --target")


def _require_fp16_kernels(nb_file: Path) -> None:
    """opt silently ignores --enable_fp16 when it was built without ARMv8.2 FP16 support."""
    from edgekit.lite.nbfile import kernels

    if not any(k.precision == "FP16" for k in kernels(nb_file)):
        raise ConversionError(
            "paddle_lite_opt wrote an FP32 model for --quant fp16: the paddlelite wheel's opt was built without "
            "ARMv8.2 FP16 support (LITE_WITH_ARM82_FP16), so --enable_fp16 has no effect",
            "use --quant int16-weight (half-size weights, near-lossless) or int8, or an opt built with FP16 support")
