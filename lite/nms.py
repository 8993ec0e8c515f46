"""NMS inside the graph (PaddleDetection's `multiclass_nms3` and kin): keep it, or cut it off for the bundle's NMS.

A program holding an NMS op outputs rows (class, score, x0, y0, x1, y1) over the batch and a count per image,
not tensors with one slice per sample. The build keeps such a graph only when every engine that must run it does,
and agrees with Paddle on the evaluation samples (measured here, in this order):

1. paddle_lite_opt converts the program for the target and for x86 (the tier-A twin);
2. tier A: the x86 twin's rows equal Paddle's on the probe samples (same count and classes per image, boxes and
   scores within the twin tolerance);
3. tier C: the ARM `.nb` under qemu, through edgekit's runner in its `--rows` mode, gives the same rows.

Then the graph is kept: the task becomes head `nms` (the rows as they are, with the op's score threshold and
keep_top_k), and the tiers carry the rows + counts outputs (`take` picks samples, `comparable` lines rows up image
by image; `emulate` is tier C through `--rows`). `[model] nms` overrides: "cut" skips the probe, "keep" keeps the
op also when only tier C could not run (never when opt or tier A fail).

Otherwise the graph is cut before the NMS op: its inputs (decoded boxes [N, M, 4], class scores [N, C, M]
transposed to [N, M, C]) become the fetch targets, the task becomes head `decoded` with the op's thresholds
(`nms = "matrix"` for matrix_nms), and task.json's NMS (edgekit/tasks/detection.py, native/core/src/detection.cc)
does the rest. The cut is checked on 16 evaluation samples: the bundle's NMS on the cut outputs must find the rows
the graph's NMS found, or (with truth) score mAP@0.5 within 0.5 points of them. The decision, its measurements and
the check go into the manifest (`model.nms`).

Measured (docs/detection.md): opt 2.13rc0 converts `multiclass_nms3` for arm and x86; on the detector example the
x86 twin gives Paddle's rows within 3.2e-5 and the ARM `.nb` under qemu within 6.9e-5, so the op is kept when an
ARM runtime is configured (and cut without one, tier C being unable to check it).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.model.artifacts import StaticModel
from edgekit.core.errors import ConversionError, EdgekitError, EmulationUnavailable
from edgekit.export import program as prog
from edgekit.model.parity import OutputCheck, SameCheck
from edgekit.model.passes import TOLERANCES

log = logging.getLogger(__name__)

NMS_OPS = ("multiclass_nms", "multiclass_nms2", "multiclass_nms3", "matrix_nms", "locality_aware_nms")
PROBE_SAMPLES = 4               # the keep probe (opt, x86 twin, ARM under qemu)
CUT_SAMPLES = 16                # the cut check (Paddle only: graph NMS vs the bundle's NMS)
CUT_MIN_MATCH = 99.0            # % of the graph's NMS rows the bundle's NMS must find (same class, IoU >= 0.99, score)
CUT_IOU = 0.99
CUT_SCORE = 1e-4
SAME_MAP = 0.5                  # map50 points: with truth, a cut whose rows differ may still detect as well as the op


@dataclass(frozen=True)
class NmsOp:
    """One NMS op of a program: its type, input and output variables and the attributes the bundle's NMS needs."""

    type: str
    boxes: str                   # BBoxes input: [N, M, 4]
    scores: str                  # Scores input: [N, C, M]
    boxes_shape: tuple[int, ...]
    scores_shape: tuple[int, ...]
    attrs: Mapping[str, object]

    def task_options(self) -> dict:
        """The detection task options that do what this op does (head `decoded`, scores already probabilities)."""
        a = self.attrs
        options = {"head": "decoded", "activation": "none", "score_threshold": float(a.get("score_threshold", 0.05))}
        if "nms_threshold" in a:
            options["nms_iou"] = float(a["nms_threshold"])
        if int(a.get("nms_top_k", -1)) > 0:
            options["nms_top_k"] = int(a["nms_top_k"])
        if int(a.get("keep_top_k", -1)) > 0:
            options["max_detections"] = int(a["keep_top_k"])
        if self.type == "matrix_nms":
            options.update(nms="matrix", post_threshold=float(a.get("post_threshold", 0.0)),
                           use_gaussian=bool(a.get("use_gaussian", False)),
                           gaussian_sigma=float(a.get("gaussian_sigma", 2.0)))
        return options

    def to_json(self) -> dict:
        return {"op": self.type, "inputs": {"boxes": self.boxes, "scores": self.scores},
                "attrs": {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.attrs.items()}}


ATTRS = ("score_threshold", "nms_threshold", "nms_top_k", "keep_top_k", "background_label", "normalized", "nms_eta",
         "post_threshold", "use_gaussian", "gaussian_sigma")


def find_nms(model: StaticModel) -> list[NmsOp]:
    """The NMS ops of `model`'s program (every block), in program order."""
    if not any(t in NMS_OPS for t in model.op_types):
        return []
    program = prog.parse_program(model.model_file)
    found = []
    for block in program.blocks:
        for op in block.ops:
            if op.type not in NMS_OPS:
                continue
            boxes, scores = (op.input(k)[0] if op.input(k) else "" for k in ("BBoxes", "Scores"))
            shape = (lambda name: tuple(int(d) for d in block._var_recursive(name).shape) if name else ())
            attrs = {k: _plain(op.attr(k)) for k in ATTRS if op.has_attr(k)}
            found.append(NmsOp(op.type, boxes, scores, shape(boxes), shape(scores), attrs))
    return found


def _plain(value):
    """Float attributes are float32 in the program: their shortest float32 text (0.05, not 0.05000000074505806)."""
    return float(repr(np.float32(value))) if isinstance(value, float) else value


# ---------------------------------------------------------------- comparing NMS'd rows


def split_rows(rows: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """Rows [K, 6] over the batch and counts [N] -> one [k_i, 6] array per image (a count past the rows is refused)."""
    rows = np.asarray(rows, np.float32).reshape(-1, 6) if np.size(rows) else np.zeros((0, 6), np.float32)
    counts = np.asarray(counts).reshape(-1).astype(np.int64)
    if counts.sum() > len(rows) or (counts < 0).any():
        raise ConversionError(f"the NMS op's counts {counts.tolist()} do not fit its {len(rows)} rows",
                              "report the model: its NMS output is malformed")
    edges = np.concatenate([[0], np.cumsum(counts)])
    return [rows[a:b] for a, b in zip(edges[:-1], edges[1:])]


def rows_agree(reference: Sequence[np.ndarray], test: Sequence[np.ndarray], max_abs: float = TOLERANCES["nms"].max_abs) -> dict:
    """Per-image rows of two engines, row by row: the same count and classes, values within `max_abs`."""
    worst, reason = 0.0, None
    for i, (ref, got) in enumerate(zip(reference, test)):
        if ref.shape != got.shape:
            reason = reason or f"image {i}: {len(got)} rows, Paddle {len(ref)}"
            continue
        if len(ref) and not np.array_equal(ref[:, 0], got[:, 0]):
            reason = reason or f"image {i}: classes differ"
            continue
        if len(ref):
            worst = max(worst, float(np.abs(ref[:, 1:].astype(np.float64) - got[:, 1:]).max()))
    if len(reference) != len(test):
        reason = f"{len(test)} images, Paddle {len(reference)}"
    if reason is None and worst > max_abs:
        reason = f"values differ by {worst:.3g} (limit {max_abs:g})"
    return {"agree": reason is None, "images": len(reference), "rows": int(sum(len(r) for r in reference)),
            "max_abs": worst, **({"reason": reason} if reason else {})}


def match_rows(source: Sequence[np.ndarray], found: Sequence) -> dict:
    """How many of the graph's NMS rows (per image) the bundle's detections reproduce (same class, IoU >= CUT_IOU,
    score within CUT_SCORE), and the reverse: order-free, since the op lists rows by class below its keep_top_k."""
    from edgekit.tasks import coco

    matched = total = extra = 0
    worst_score = 0.0
    for rows, det in zip(source, found):
        total += len(rows)
        used = np.zeros(len(det), bool)
        for row in rows:
            same = np.nonzero((det.classes == int(row[0])) & ~used)[0]
            if not len(same):
                continue
            iou = coco.iou_matrix(row[None, 2:6].astype(np.float64), det.boxes[same].astype(np.float64))[0]
            close = np.abs(det.scores[same].astype(np.float64) - float(row[1]))
            ok = np.nonzero((iou >= CUT_IOU) & (close <= CUT_SCORE))[0]
            if len(ok):
                best = same[ok[np.argmin(close[ok])]]
                used[best] = True
                matched += 1
                worst_score = max(worst_score, float(abs(det.scores[best] - row[1])))
        extra += int((~used).sum())
    share = 100.0 if total == 0 and extra == 0 else 100.0 * matched / max(1, total + extra)
    return {"graph_rows": total, "matched": matched, "bundle_only": extra, "match_percent": round(share, 4),
            "max_score_diff": worst_score, "passed": share >= CUT_MIN_MATCH}


# ---------------------------------------------------------------- the decision


def _per_image(run_one, inputs: Mapping[str, np.ndarray], count: int) -> list[np.ndarray]:
    """One image at a time (the rows of a batch are not sliceable by sample): each image's rows."""
    per = []
    for i in range(count):
        outputs = [np.asarray(o) for o in run_one({k: v[i:i + 1] for k, v in inputs.items()})]
        rows = next((o for o in outputs if o.ndim == 2 and o.shape[1] == 6), None)
        counts = next((o for o in outputs if o.ndim == 1 and o.dtype.kind in "iu"), None)
        if rows is None or counts is None:
            raise ConversionError(f"the NMS program's outputs {[list(o.shape) for o in outputs]} hold no rows [K, 6] "
                                  "and counts [N]", "export the NMS op's Out and NmsRoisNum (bbox_num) as the outputs")
        per.append(split_rows(rows, counts)[0])
    return per


def rows_and_counts(outputs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The rows [K, 6] and the per-image counts [N] among an NMS program's outputs (in either order)."""
    outputs = [np.asarray(o) for o in outputs]
    at_rows, at_counts = _layout(outputs)
    return outputs[at_rows], outputs[at_counts]


def _layout(outputs: Sequence[np.ndarray]) -> tuple[int, int]:
    """(index of the rows, index of the counts)."""
    shapes = [np.shape(o) for o in outputs]
    at_counts = next((i for i, o in enumerate(outputs) if np.ndim(o) == 1 and np.asarray(o).dtype.kind in "iu"), None)
    at_rows = next((i for i, o in enumerate(outputs) if i != at_counts and (
        np.ndim(o) == 2 and np.shape(o)[1] == 6 or np.size(o) == 0)), None)
    if at_rows is None or at_counts is None or len(outputs) != 2:
        raise ConversionError(f"the NMS program's outputs {[list(s) for s in shapes]} are not rows [K, 6] and "
                              "counts [N]", "export the NMS op's Out and NmsRoisNum (bbox_num) as the outputs")
    return at_rows, at_counts


def probe_keep(model: StaticModel, op: NmsOp, inputs: Mapping[str, np.ndarray], places: str, work: Path,
               timeout: float, emulator_of) -> dict:
    """Steps 1-3 of the module docstring on the probe samples: {"kept": bool, "reason": ..., "measured": {...}}.

    `emulator_of()` returns a tier-C Emulator or raises EdgekitError saying why there is none."""
    from edgekit import lite
    from edgekit.export import StaticRunner
    from edgekit.lite.rewrite import lite_safe
    from edgekit.lite.runtime import LiteRunner

    count = min(PROBE_SAMPLES, len(next(iter(inputs.values()))))
    measured: dict = {"samples": count}
    if len(model.fetches) != 2:
        return {"kept": False, "reason": f"the program fetches {len(model.fetches)} outputs, not the NMS rows and "
                                         "counts", "measured": measured}
    reference = StaticRunner(model)
    ref_rows = _per_image(reference.run, inputs, count)
    work.mkdir(parents=True, exist_ok=True)
    nbs = {}
    for where in dict.fromkeys((places, "x86")):
        try:   # with the rewrites every conversion gets (edgekit.build.stages.convert_target)
            safe, _ = lite_safe(model, work / f"rewrite-{where}", dict(inputs), x86=where == "x86")
            nbs[where] = lite.convert(safe, where, work / f"nms-{where}.nb", timeout=timeout, target=where,
                                      precision="fp32").nb_file
            measured[f"opt_{where}"] = "converted"
        except ConversionError as exc:
            measured[f"opt_{where}"] = exc.message
            return {"kept": False, "reason": f"paddle_lite_opt cannot convert {op.type} for {where}: {exc.message}",
                    "measured": measured}
    try:
        twin = LiteRunner(nbs["x86"], model.feed_names)
        measured["tier_a"] = rows_agree(ref_rows, _per_image(twin.run_one, inputs, count))
    except EdgekitError as exc:
        measured["tier_a"] = {"agree": False, "reason": exc.message}
    if not measured["tier_a"]["agree"]:
        return {"kept": False, "reason": f"tier A (x86 twin) disagrees with Paddle: {measured['tier_a']['reason']}",
                "measured": measured}
    if places != "arm":
        return {"kept": True, "reason": "opt converts it and the x86 .nb gives Paddle's rows", "measured": measured}
    try:
        emulator = emulator_of()
        from edgekit.lite import native

        feeds = {k: v[:count] for k, v in inputs.items()}
        done = native.run_runner(emulator.build, emulator.runtime, nbs[places], feeds, expect=model.feeds,
                                 timeout=timeout + 60 * count, rows=True)   # rows of every image + counts (--rows)
        rows, counts = rows_and_counts(done.outputs)
        measured["tier_c"] = rows_agree(ref_rows, split_rows(rows, counts))
    except EmulationUnavailable as exc:
        measured["tier_c"] = {"agree": False, "unavailable": True, "reason": exc.message}
        return {"kept": False, "reason": f"tier C cannot check {op.type} on ARM: {exc.message}", "measured": measured}
    except EdgekitError as exc:
        measured["tier_c"] = {"agree": False, "reason": exc.message}
        return {"kept": False, "reason": f"tier C cannot check {op.type} on ARM: {exc.message}", "measured": measured}
    if not measured["tier_c"]["agree"]:
        return {"kept": False, "reason": f"tier C (ARM .nb) disagrees with Paddle: {measured['tier_c']['reason']}",
                "measured": measured}
    return {"kept": True, "reason": "opt converts it, tiers A and C give Paddle's rows", "measured": measured}


def cut(model: StaticModel, op: NmsOp, out_dir: Path) -> StaticModel:
    """The program up to `op`'s inputs: fetches boxes [N, M, 4] and scores [N, M, C] (the op's [N, C, M] transposed)."""
    import paddle

    if len(op.boxes_shape) != 3 or op.boxes_shape[2] != 4 or len(op.scores_shape) != 3:
        raise ConversionError(f"{op.type} reads boxes {list(op.boxes_shape)} and scores {list(op.scores_shape)}; "
                              "only per-image boxes [N, M, 4] and scores [N, C, M] can be cut off for the bundle's NMS",
                              "export the model without NMS (boxes and scores as outputs) and set task head = \"decoded\"")
    paddle.enable_static()
    scope, exe = paddle.static.Scope(), paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(scope):
        program, feed_names, _ = paddle.static.load_inference_model(str(model.model_file.with_suffix("")), exe)
        block = program.global_block()
        for index in reversed(range(len(block.ops))):   # the old fetch scales: saving names its new ones the same
            old = block.ops[index]
            if old.type == "scale" and any(n.startswith("save_infer_model/") for n in old.output_arg_names):
                names = list(old.output_arg_names)
                block._remove_op(index)
                for name in names:
                    block._remove_var(name)
        boxes = block.var(op.boxes)
        with paddle.static.program_guard(program), paddle.utils.unique_name.guard("edgekit_nms_cut_"):
            scores = paddle.transpose(block.var(op.scores), [0, 2, 1])
        out_dir.mkdir(parents=True, exist_ok=True)
        with paddle.utils.unique_name.guard():
            paddle.static.save_inference_model(str(out_dir / "model"), [block.var(n) for n in feed_names],
                                               [boxes, scores], exe, program=program)
    program = prog.parse_program(out_dir / "model.pdmodel")
    _, fetches = prog.feeds_and_fetches(program)
    ops = prog.op_types(program)
    if any(t in NMS_OPS for t in ops):
        raise ConversionError(f"cutting {op.type} off left NMS ops in the program ({', '.join(t for t in ops if t in NMS_OPS)})",
                              "export the model without NMS and set task head = \"decoded\"")
    return StaticModel(out_dir / "model.pdmodel", out_dir / "model.pdiparams", model.feeds, tuple(fetches), model.origin,
                       ops, model.sources, model.check)


def check_cut(model: StaticModel, cut_model: StaticModel, task, inputs: Mapping[str, np.ndarray],
              truth: Sequence | None = None) -> dict:
    """On the check samples: the graph's own NMS rows against the bundle's NMS (task.detect) on the cut outputs.

    It passes when the rows match (`match_rows`). When they do not and there is truth (an op the greedy NMS does not
    reproduce, e.g. matrix_nms's decayed scores), it passes when both find as well: mAP@0.5 within SAME_MAP points."""
    from edgekit.export import StaticRunner
    from edgekit.tasks.detection import Detections

    count = len(next(iter(inputs.values())))
    source = _per_image(StaticRunner(model).run, inputs, count)
    found = task.detect(StaticRunner(cut_model).run(inputs))
    check = dict(match_rows(source, found), samples=count, judged_by="rows")
    if truth is not None:
        own = [Detections(r[:, 2:6].copy(), r[:, 1].copy(), r[:, 0].astype(np.int64)) for r in source]
        graph, bundle = (task.evaluate_detections(d, list(truth))["map50"] for d in (own, found))
        check["map50"] = {"graph_nms": round(graph, 4), "bundle_nms": round(bundle, 4),
                          "difference": round(bundle - graph, 4), "limit": SAME_MAP}
        if not check["passed"]:
            check.update(judged_by="map50", passed=abs(bundle - graph) <= SAME_MAP)
    return check


def kept_task(op: NmsOp, task):
    """The task of a kept graph: head `nms` (the op's rows as they are) with the op's score threshold and cap."""
    from edgekit.tasks import make_task

    base = task.options()
    options = {k: v for k, v in base.items() if k in ("labels", "num_classes", "f1_threshold")}
    options.update(head="nms", score_threshold=float(op.attrs.get("score_threshold", 0.0)))
    if int(op.attrs.get("keep_top_k", -1)) > 0:
        options["max_detections"] = int(op.attrs["keep_top_k"])
    return make_task("detection", options)


def decide(model: StaticModel, evaluation, places: str, work: Path, timeout: float,
           emulator_of, choice: str = "auto") -> tuple[StaticModel, object, dict | None]:
    """(program to build, task, the manifest's `model.nms` entry or None without an NMS op), decided by measurement.

    `choice` ([model] nms): "auto" keeps the op when `probe_keep` says so; "keep" keeps it also when tier C cannot
    run (no ARM runtime), never when opt or tier A fail; "cut" cuts without probing."""
    from edgekit.tasks import make_task

    ops = find_nms(model)
    if not ops:
        return model, evaluation.task, None
    if len(ops) > 1:
        raise ConversionError(f"the program holds {len(ops)} NMS ops ({', '.join(o.type for o in ops)})",
                              "export a model with one NMS op, or without NMS")
    op = ops[0]
    if choice not in ("auto", "keep", "cut"):
        raise ConversionError(f"[model] nms = {choice!r} is unknown", "use \"auto\", \"keep\" or \"cut\"")
    task = evaluation.task
    if task is not None and task.kind.value != "detection":
        raise ConversionError(f"the program holds {op.type}, but the task is {task.kind.value}",
                              "use [task] kind = \"detection\" (or detection truth) for a detector")
    if task is None:
        raise ConversionError(f"the program holds {op.type}, and the evaluation data has no detection truth",
                              "give a truth file beside the evaluation images: the cut graph is judged and task.json "
                              "written from it")
    inputs = dict(evaluation.samples.head(PROBE_SAMPLES).inputs)
    entry = op.to_json()
    if choice == "cut":
        verdict = {"kept": False, "reason": "cut on request ([model] nms = \"cut\")", "measured": {}}
    else:
        verdict = probe_keep(model, op, inputs, places, work / "probe", timeout, emulator_of)
    if choice == "keep" and not verdict["kept"]:
        m = verdict["measured"]
        if m.get("tier_a", {}).get("agree") and m.get("tier_c", {}).get("unavailable"):   # only tier C did not run
            verdict = dict(verdict, kept=True, reason=f"kept on request ([model] nms = \"keep\"): {verdict['reason']}")
        else:
            raise ConversionError(f"[model] nms = \"keep\", but {verdict['reason']}",
                                  "use nms = \"auto\" or \"cut\": the bundle's NMS then replaces the op")
    entry.update(kept=verdict["kept"], reason=verdict["reason"], measured=verdict["measured"], choice=choice)
    if verdict["kept"]:
        log.info("%s kept in the graph: %s", op.type, verdict["reason"])
        task = kept_task(op, task)
        entry["outputs"] = list(model.fetches)
        entry["task"] = task.options()
        return model, task, entry
    log.info("%s cut off for the bundle's NMS: %s", op.type, verdict["reason"])
    base = task.options()
    kept_options = ("labels", "num_classes", "f1_threshold")
    cut_task = make_task("detection", {**{k: v for k, v in base.items() if k in kept_options}, **op.task_options()})
    cut_model = cut(model, op, work / "cut")
    check_on = evaluation.head(CUT_SAMPLES)
    entry["cut"] = check_cut(model, cut_model, cut_task, dict(check_on.samples.inputs), check_on.truth)
    entry["outputs"] = list(cut_model.fetches)
    entry["task"] = cut_task.options()
    if not entry["cut"]["passed"]:
        c = entry["cut"]
        scored = (f"; mAP@0.5 {c['map50']['bundle_nms']:.2f} vs the op's {c['map50']['graph_nms']:.2f}, limit "
                  f"{SAME_MAP:g} points" if "map50" in c else "; no truth to compare mAP")
        raise ConversionError(f"the bundle's NMS finds {c['match_percent']:.2f} % of the boxes {op.type} finds "
                              f"(limit {CUT_MIN_MATCH:g} %: {c['matched']} of {c['graph_rows']} rows, {c['bundle_only']} "
                              f"extra{scored})", f"{op.type} does what task.json's NMS (greedy or matrix) cannot "
                              f"(attributes {entry['attrs']}): export the model without NMS")
    if math.isfinite(entry["cut"]["max_score_diff"]):
        entry["cut"]["max_score_diff"] = float(f"{entry['cut']['max_score_diff']:.3g}")
    return cut_model, cut_task, entry


def as_check(entry: dict | None) -> SameCheck | None:
    """`decide`'s verdict in the shape every transform's check has (the pass manager's): kept, the x86 twin's rows
    against Paddle's (tier A of the probe); cut, the bundle's NMS on the cut graph against the op's rows (the share
    of rows found as the cosine figure, the worst score difference as max abs). None without an NMS op."""
    if entry is None:
        return None
    if entry["kept"]:
        rows = entry["measured"].get("tier_a", {})
        worst = float(rows.get("max_abs", math.nan))
        return SameCheck("the NMS op kept: the x86 twin's rows vs Paddle's", int(entry["measured"].get("samples", 0)),
                         (OutputCheck("rows", worst, 1.0 if rows.get("agree") else 0.0, TOLERANCES["nms"].max_abs,
                                      bool(rows.get("agree", entry["choice"] == "keep"))),))
    cut = entry.get("cut")
    if cut is None:
        return None
    return SameCheck("the NMS op cut: the bundle's NMS vs the op's rows", int(cut["samples"]),
                     (OutputCheck("rows", float(cut["max_score_diff"]), float(cut["match_percent"]) / 100.0, CUT_SCORE,
                                  bool(cut["passed"])),))


# ---------------------------------------------------------------- a kept graph's outputs in the tiers


def holds_nms(model: StaticModel) -> bool:
    """The program still holds its NMS op (kept): its outputs are rows [K, 6] + counts [N], not per-sample slices."""
    return any(t in NMS_OPS for t in model.op_types)


def take(outputs: Sequence[np.ndarray], picks: Sequence[int]) -> list[np.ndarray]:
    """The outputs of the samples `picks` (rows and counts of those images, in that order)."""
    at_rows, at_counts = _layout(outputs)
    rows, counts = np.asarray(outputs[at_rows]), np.asarray(outputs[at_counts]).reshape(-1)
    per = split_rows(rows, counts)
    picked = [per[i] for i in picks]
    found = [np.zeros(0), np.zeros(0)]
    found[at_rows] = (np.concatenate(picked) if picked else np.zeros((0, 6))).astype(rows.dtype)
    found[at_counts] = counts[np.asarray(list(picks), np.int64)]
    return found


def comparable(reference: Sequence[np.ndarray], test: Sequence[np.ndarray]) -> tuple[list, list]:
    """Both engines' rows as one per-image array [N, K, 6] each, padded with zeros to the same K, so the tiers'
    statistics compare image by image; rows an engine found and the other did not count as differences. The counts
    are in the padding, not a second output: integer counts agree exactly, and an exact match has an infinite SNR,
    which JSON (the manifest the apps read) cannot hold."""
    ref_per, got_per = split_rows(*rows_and_counts(reference)), split_rows(*rows_and_counts(test))
    width = max([len(r) for r in ref_per + got_per] + [1])

    def padded(per, outputs):
        grid = np.zeros((len(per), width, 6), np.float32)
        for i, rows in enumerate(per):
            grid[i, :len(rows)] = rows
        return [grid]

    return padded(ref_per, reference), padded(got_per, test)


def emulate(emulator, nb_file: Path, inputs: Mapping[str, np.ndarray], expect, jobs: int) -> tuple[list, list]:
    """Tier C of a kept graph: the ARM `.nb` under qemu through the runner's --rows mode, the samples split over
    `jobs` emulator processes; each output concatenated over them (rows, then counts: the format stays
    self-describing)."""
    return emulator.run(nb_file, inputs, expect, jobs, rows=True)
