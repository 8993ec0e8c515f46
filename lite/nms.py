"""NMS inside the graph (PaddleDetection's `multiclass_nms3` and kin): the op, its rows, cutting the graph before it.
The decision to keep or cut, measured by tiers A and C, is edgekit/verify/nms.py's.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence, Union

import numpy as np

from edgekit.model.artifacts import StaticModel
from edgekit.core.errors import ConversionError
from edgekit.export import program as prog
from edgekit.model.passes import TOLERANCES

log = logging.getLogger(__name__)

NMS_OPS = ("multiclass_nms", "multiclass_nms2", "multiclass_nms3", "matrix_nms", "locality_aware_nms")
CUT_MIN_MATCH = 99.0            # % of the graph's NMS rows the bundle's NMS must find (same class, IoU >= 0.99, score)
CUT_IOU = 0.99
CUT_SCORE = 1e-4
SAME_MAP = 0.5                  # map50 points: with truth, a cut whose rows differ may still detect as well as the op


OpAttr = Union[bool, int, float, str, Sequence[int], Sequence[float]]   # what a Paddle op attribute holds


@dataclass(frozen=True)
class NmsOp:
    """One NMS op of a program: its type, input and output variables and the attributes the bundle's NMS needs."""

    type: str
    boxes: str                   # BBoxes input: [N, M, 4]
    scores: str                  # Scores input: [N, C, M]
    boxes_shape: tuple[int, ...]
    scores_shape: tuple[int, ...]
    attrs: Mapping[str, OpAttr]   # the op's attributes in ATTRS, as the program holds them

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


def per_image(run_one, inputs: Mapping[str, np.ndarray], count: int) -> list[np.ndarray]:
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
    source = per_image(StaticRunner(model).run, inputs, count)
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


def cut_task(op: NmsOp, task):
    """The task of a graph cut before `op`: head `decoded` with the op's thresholds (`NmsOp.task_options`), the
    labels and class count of `task`."""
    from edgekit.tasks import make_task

    base = task.options()
    kept_options = ("labels", "num_classes", "f1_threshold")
    return make_task("detection", {**{k: v for k, v in base.items() if k in kept_options}, **op.task_options()})


def kept_task(op: NmsOp, task):
    """The task of a kept graph: head `nms` (the op's rows as they are) with the op's score threshold and cap."""
    from edgekit.tasks import make_task

    base = task.options()
    options = {k: v for k, v in base.items() if k in ("labels", "num_classes", "f1_threshold")}
    options.update(head="nms", score_threshold=float(op.attrs.get("score_threshold", 0.0)))
    if int(op.attrs.get("keep_top_k", -1)) > 0:
        options["max_detections"] = int(op.attrs["keep_top_k"])
    return make_task("detection", options)


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
