"""Object detection: boxes, classes and scores from raw anchor-free heads or boxes the graph already decoded.

task.json options (all validated here; the C++ core, native/core/src/detection.cc, reads the same ones):

    head = "anchor_free"      # or "decoded", or "nms" (the graph ran NMS itself: rows + counts)
    strides = [8, 16, 32]     # anchor_free: one (class map, box map) pair per stride
    reg_max = 7               # anchor_free: box sides as distributions over reg_max + 1 bins (DFL); 0: plain distances
    cell_offset = 0.5         # anchor_free: a cell's centre is ((col, row) + offset) * stride
    activation = "sigmoid"    # class scores: "sigmoid" of logits, or "none" (already probabilities)
    score_threshold = 0.05    # candidates score more than this
    nms_iou = 0.5             # class-aware NMS: a box overlapping a better one of its class by more is dropped
    nms = "greedy"            # or "matrix": Paddle's matrix_nms (scores decayed by overlap; no nms_iou)
    post_threshold = 0.0      # matrix: decayed scores must exceed this
    use_gaussian = false      # matrix: gaussian decay exp((max_iou^2 - iou^2) * gaussian_sigma), else linear
    gaussian_sigma = 2.0
    nms_top_k = 1000          # candidates kept (best first) before NMS
    max_detections = 100      # per image, after NMS
    f1_threshold = 0.5        # the score threshold of the F1 metric
    labels = ["circle", ...]  # class names (their count is the model's class count)
    input_size = [800, 608]   # anchor_free: the input tensor's height and width; the build writes it from the data

Model outputs. anchor_free, in one of two layouts, told apart by the outputs' ranks:
- maps: the class maps of every stride, then the box maps of every stride: `cls_i` [N, classes, H/s_i, W/s_i]
  and `reg_i` [N, 4 * (reg_max + 1), H/s_i, W/s_i] (sides left, top, right, bottom, in stride units);
- flattened (PaddleDetection's PicoDet exports without NMS): `cls_i` [N, h_i * w_i, classes], then `reg_i`
  [N, h_i * w_i, 4 * (reg_max + 1)], the cells row-major over h_i x w_i = ceil(H / s_i) x ceil(W / s_i) of the
  input H x W (`input_size`). decoded: boxes [N, M, 4] (x0, y0, x1, y1
in input pixels) and scores [N, M, classes]. nms: PaddleDetection's `multiclass_nms3` outputs, rows
[K, 6] of (class, score, x0, y0, x1, y1) in input pixels, the rows of all images one after the other,
and the count per image [N] (integers), which splits them; each image's rows are taken as they are,
with score > score_threshold, best first (stable), at most max_detections (no NMS, no activation).

Decoding, in float32 as the C++ core computes it: score = sigmoid(logit); a side is the
softmax-weighted mean bin index (DFL) times the stride; box = centre -/+ sides. Candidates
are (anchor, class) pairs above the threshold, in anchor-major order, sorted by score
(stable); NMS keeps a candidate unless a kept box of its class overlaps it by IoU > nms_iou.
Results are in model-input pixels; `PreprocessSpec.to_image` undoes the resize/letterbox.

Ground truth (one entry per image, the documented JSON):
    {"boxes": [[x0, y0, x1, y1], ...], "classes": [0, 2, ...], "size": [height, width]}
in the pixels of the evaluated tensor; `size` (optional) lets boxes outside the image be refused.
`coco_truth` turns COCO annotation JSON into these entries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from edgekit.core.errors import ConfigError, DataError

from . import coco
from .base import Task, TaskKind, check_count, check_options, number_option, percent

HEADS = ("anchor_free", "decoded", "nms")
ACTIVATIONS = ("sigmoid", "none")
NMS_KINDS = ("greedy", "matrix")
OPTIONS = ("head", "strides", "reg_max", "cell_offset", "activation", "score_threshold", "nms_iou", "nms_top_k",
           "max_detections", "f1_threshold", "labels", "num_classes", "nms", "post_threshold", "use_gaussian",
           "gaussian_sigma", "input_size")
BOX_SLACK = 0.5            # truth may reach half a pixel past the image edge (rounding of annotation tools)


@dataclass(frozen=True)
class Detections:
    """One image's detections, best first: boxes [K, 4] float32, scores [K] float32, classes [K] int64."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)


def sigmoid(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    return (np.float32(1.0) / (np.float32(1.0) + np.exp(-x))).astype(np.float32)


def dfl_sides(reg: np.ndarray, reg_max: int) -> np.ndarray:
    """[A, 4 * (reg_max + 1)] bin logits -> [A, 4] distances in bins (softmax expectation); [A, 4] kept as is."""
    reg = reg.astype(np.float32)
    if reg_max == 0:
        return reg
    bins = reg.reshape(len(reg), 4, reg_max + 1)
    e = np.exp(bins - bins.max(axis=2, keepdims=True))
    weights = np.arange(reg_max + 1, dtype=np.float32)
    return ((e * weights).sum(axis=2) / e.sum(axis=2)).astype(np.float32)


def nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou: float, top_k: int,
        max_detections: int) -> np.ndarray:
    """Indices kept by class-aware greedy NMS, best first (stable for equal scores)."""
    order = np.argsort(-scores.astype(np.float64), kind="stable")[:top_k]
    kept: list[int] = []
    per_class: dict[int, list[int]] = {}
    for i in order:
        mine = per_class.setdefault(int(classes[i]), [])
        if mine and coco.iou_matrix(boxes[i][None], boxes[mine]).max() > iou:
            continue
        mine.append(int(i))
        kept.append(int(i))
        if len(kept) == max_detections:
            break
    return np.asarray(kept, np.int64)


def nms_rows(rows: np.ndarray, counts: np.ndarray) -> list[Detections]:
    """Detections of a graph that ran NMS itself (PaddleDetection's `multiclass_nms3`): rows [K, 6] of (class, score,
    x0, y0, x1, y1) over the batch and the count per image [N], best first per image (stable)."""
    rows = np.asarray(rows, np.float32).reshape(-1, 6)
    counts = np.asarray(counts).reshape(-1).astype(np.int64)
    if (counts < 0).any() or counts.sum() > len(rows):
        raise DataError(f"NMS counts {counts.tolist()} do not fit {len(rows)} rows",
                        "pass the op's rows and its per-image count (bbox_num) together")
    found, start = [], 0
    for count in counts:
        image = rows[start:start + count]
        start += int(count)
        order = np.argsort(-image[:, 1].astype(np.float64), kind="stable")
        image = image[order]
        found.append(Detections(image[:, 2:6].copy(), image[:, 1].copy(), image[:, 0].astype(np.int64)))
    return found


def matrix_nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, top_k: int, max_detections: int,
               post_threshold: float, gaussian: bool, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Paddle's matrix_nms: (indices kept, their decayed float32 scores), best first (stable).

    Per class in increasing order: the candidates sorted by score (stable), the first `top_k`; IoU in double
    between each and every better one; a candidate's decay is the minimum over better boxes j of
    (1 - iou) / (1 - max_iou_j) (or exp((max_iou_j^2 - iou^2) * sigma)), max_iou_j being j's largest IoU with a
    box better than itself; kept if decay * score (float32) > post_threshold. Then all, by decayed score."""
    picked: list[int] = []
    decayed: list[np.float32] = []
    for klass in np.unique(classes):
        mine = np.nonzero(classes == klass)[0]
        mine = mine[np.argsort(-scores[mine].astype(np.float64), kind="stable")][:top_k]
        iou = coco.iou_matrix(boxes[mine], boxes[mine])
        below = np.tril(iou, -1)
        iou_max = below.max(axis=1) if len(mine) else below
        for i, index in enumerate(mine):
            decay = 1.0
            if i:
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.exp((iou_max[:i] ** 2 - iou[i, :i] ** 2) * sigma) if gaussian \
                        else (1.0 - iou[i, :i]) / (1.0 - iou_max[:i])
                for value in ratio:             # as std::min(decay, value): NaN leaves it unchanged
                    decay = value if value < decay else decay
            score = np.float32(decay * float(scores[index]))
            if score > np.float32(post_threshold):
                picked.append(int(index))
                decayed.append(score)
    values = np.asarray(decayed, np.float32)
    order = np.argsort(-values.astype(np.float64), kind="stable")[:max_detections]
    return np.asarray(picked, np.int64)[order], values[order]


def coco_truth(document: Mapping, files: Sequence[str]) -> tuple[list[dict], list[str]]:
    """COCO annotation JSON -> (truth entries for `files` in that order, class names by category id order).

    Images are found by `file_name`; category ids map to 0.. in increasing id order; `iscrowd` annotations
    are left out; bbox [x, y, w, h] becomes [x0, y0, x1, y1]; `size` is the image's height and width."""
    if not isinstance(document, Mapping) or not all(isinstance(document.get(k), list) for k in
                                                    ("images", "annotations", "categories")):
        raise DataError("COCO annotations need lists images, annotations and categories", "give a COCO instances file")
    try:
        categories = sorted(document["categories"], key=lambda c: int(c["id"]))
        index = {int(c["id"]): i for i, c in enumerate(categories)}
        images = {str(im["file_name"]): im for im in document["images"]}
        entries = []
        for name in files:
            if name not in images:
                raise DataError(f"COCO annotations have no image {name!r}", "annotate every evaluation image")
            image = images[name]
            boxes, classes = [], []
            for a in document["annotations"]:
                if a["image_id"] != image["id"] or a.get("iscrowd", 0):
                    continue
                x, y, w, h = (float(v) for v in a["bbox"])
                boxes.append([x, y, x + w, y + h])
                classes.append(index[int(a["category_id"])])
            entries.append({"boxes": boxes, "classes": classes, "size": [int(image["height"]), int(image["width"])]})
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"COCO annotations are malformed ({type(exc).__name__}: {exc})",
                        "give a COCO instances file: images with id/file_name/width/height, annotations with "
                        "image_id/category_id/bbox, categories with id/name") from exc
    return entries, [str(c.get("name", c["id"])) for c in categories]


# ---------------------------------------------------------------- golden detections: the INT8 self-test gate

GOLDEN_MIN_IOU = 0.5       # a golden detection is found again by a box of its class overlapping it by at least this
GOLDEN_MARGIN = 0.1        # the recall/precision floors: the worst image measured at build time, less this


def _greedy(truth: Sequence[Mapping], found: Sequence[Mapping], min_iou: float) -> list[float]:
    """mAP's matching for one image: `found` best score first (stable), each taking the unmatched `truth` box of its
    class with the highest IoU (the first on ties) if that is >= min_iou. The IoU of every match."""
    order = sorted(range(len(found)), key=lambda k: -float(found[k]["score"]))
    taken = [False] * len(truth)
    ious = []
    for k in order:
        best, where = min_iou, -1
        for j, t in enumerate(truth):
            if taken[j] or int(t["class"]) != int(found[k]["class"]):
                continue
            iou = float(coco.iou_matrix(np.asarray(found[k]["box"], np.float64), np.asarray(t["box"], np.float64))[0, 0])
            if iou >= best and (where < 0 or iou > best):
                best, where = iou, j
        if where >= 0:
            taken[where] = True
            ious.append(best)
    return ious


def match_detections(expected: Sequence[Mapping], got: Sequence[Mapping], score_threshold: float,
                     min_iou: float = GOLDEN_MIN_IOU) -> dict:
    """One image's detections (`postprocess` items: box, class, score) against the FP32 reference's, by matching
    rather than in order: recall = the reference's detections scoring >= score_threshold that any of `got` finds
    again (same class, IoU >= min_iou, greedy as mAP matches); precision = `got`'s confident detections that any of
    the reference's confirm. A score crossing the threshold is no miss; a lost, moved or re-classed box is.
    Both are 1 when there is nothing to find. The C++ self-test (native/app/src/selftest.cc) computes the same."""
    wanted = [d for d in expected if float(d["score"]) >= score_threshold]
    confident = [d for d in got if float(d["score"]) >= score_threshold]
    found = _greedy(wanted, got, min_iou)
    confirmed = _greedy(expected, confident, min_iou)
    return {"expected": len(wanted), "found": len(found), "recall": len(found) / len(wanted) if wanted else 1.0,
            "confident": len(confident), "confirmed": len(confirmed),
            "precision": len(confirmed) / len(confident) if confident else 1.0,
            "min_iou": min(found) if found else None}


def match_summary(per_image: Sequence[Mapping]) -> dict:
    """The worst image's recall and precision, and the pooled ones, of `match_detections` results."""
    expected, confident = sum(m["expected"] for m in per_image), sum(m["confident"] for m in per_image)
    ious = [m["min_iou"] for m in per_image if m["min_iou"] is not None]
    return {"images": len(per_image), "min_recall": min((m["recall"] for m in per_image), default=1.0),
            "min_precision": min((m["precision"] for m in per_image), default=1.0),
            "recall": sum(m["found"] for m in per_image) / expected if expected else 1.0,
            "precision": sum(m["confirmed"] for m in per_image) / confident if confident else 1.0,
            "min_iou": min(ious) if ious else None}


def golden_tolerance(measured: Mapping, tier: str, score_threshold: float) -> dict:
    """golden.json's `tolerances.detections`: the floors a device's golden detections must meet against the FP32
    reference's, from the worst image `measured` (a `match_summary`) at build time, less GOLDEN_MARGIN."""
    def floor(value: float) -> float:
        return max(0.0, math.floor(round((value - GOLDEN_MARGIN) * 100, 6)) / 100)

    return {"min_iou": GOLDEN_MIN_IOU, "score_threshold": score_threshold,
            "min_recall": floor(measured["min_recall"]), "min_precision": floor(measured["min_precision"]),
            "measured": dict(measured, tier=tier),
            "basis": f"detections matched to the fp32 reference's (class, IoU >= {GOLDEN_MIN_IOU}): the worst image of "
                     f"tier {tier} on {measured['images']} evaluation images, less {GOLDEN_MARGIN}"}


@dataclass(frozen=True)
class Detection(Task):
    head: str = "anchor_free"
    strides: tuple[int, ...] = (8, 16, 32)
    reg_max: int = 7
    cell_offset: float = 0.5
    activation: str = "sigmoid"
    score_threshold: float = 0.05
    nms_iou: float = 0.5
    nms_top_k: int = 1000
    max_detections: int = 100
    f1_threshold: float = 0.5
    labels: tuple[str, ...] = ()
    num_classes: int = 0              # 0: the count of labels, else taken from the model's outputs
    nms_kind: str = "greedy"          # task option `nms`
    post_threshold: float = 0.0       # matrix
    use_gaussian: bool = False        # matrix
    gaussian_sigma: float = 2.0       # matrix
    input_size: tuple[int, ...] = ()  # anchor_free: (height, width) of the input tensor; () unknown

    kind = TaskKind.detection
    primary = "map50"
    golden_key = "detections"     # golden.json tolerances / tier C summary key of the golden detections' matching

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "Detection":
        k = cls.kind
        check_options(k, options, OPTIONS)
        head = options.get("head", "anchor_free")
        activation = options.get("activation", "sigmoid")
        if head not in HEADS:
            raise ConfigError(f"task detection option head = {head!r} is unknown", f"use one of {', '.join(HEADS)}")
        if activation not in ACTIVATIONS:
            raise ConfigError(f"task detection option activation = {activation!r} is unknown",
                              f"use one of {', '.join(ACTIVATIONS)}")
        strides = options.get("strides", [8, 16, 32])
        if not isinstance(strides, (list, tuple)) or not strides or not all(
                isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= 512 for s in strides):
            raise ConfigError(f"task detection option strides = {strides!r} is not a list of strides",
                              "e.g. strides = [8, 16, 32]")
        labels = options.get("labels", ())
        if not isinstance(labels, (list, tuple)) or not all(isinstance(n, str) for n in labels):
            raise ConfigError("task detection option labels is not a list of class names", 'e.g. labels = ["cat", "dog"]')
        num_classes = int(number_option(k, options, "num_classes", len(labels), 0, 100000))
        if labels and num_classes != len(labels):
            raise ConfigError(f"task detection: num_classes = {num_classes} but {len(labels)} labels",
                              "give one label per class, or leave num_classes out")
        nms_kind = options.get("nms", "greedy")
        if nms_kind not in NMS_KINDS:
            raise ConfigError(f"task detection option nms = {nms_kind!r} is unknown", f"use one of {', '.join(NMS_KINDS)}")
        gaussian = options.get("use_gaussian", False)
        if not isinstance(gaussian, bool):
            raise ConfigError(f"task detection option use_gaussian = {gaussian!r} is not true or false",
                              "write use_gaussian = true or false")
        size = options.get("input_size", ())
        if not isinstance(size, (list, tuple)) or len(size) not in (0, 2) or not all(
                isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 16384 for v in size):
            raise ConfigError(f"task detection option input_size = {size!r} is not [height, width]",
                              "e.g. input_size = [800, 608], or leave it out (the build takes it from the data)")
        return cls(head, tuple(strides), int(number_option(k, options, "reg_max", 7, 0, 64)),
                   number_option(k, options, "cell_offset", 0.5, 0.0, 1.0), activation,
                   number_option(k, options, "score_threshold", 0.05, 0.0, 1.0),
                   number_option(k, options, "nms_iou", 0.5, 0.0, 1.0),
                   int(number_option(k, options, "nms_top_k", 1000, 1, 100000)),
                   int(number_option(k, options, "max_detections", 100, 1, 10000)),
                   number_option(k, options, "f1_threshold", 0.5, 0.0, 1.0), tuple(labels), num_classes, nms_kind,
                   number_option(k, options, "post_threshold", 0.0, 0.0, 1.0), gaussian,
                   number_option(k, options, "gaussian_sigma", 2.0, 0.0, 1000.0), tuple(size))

    def with_input(self, height: int, width: int) -> "Detection":
        """The task with the input tensor's size, which flattened anchor-free heads need to lay out their cells;
        unchanged when the size is already known or the head decodes no cells."""
        if self.head != "anchor_free" or self.input_size:
            return self
        from dataclasses import replace

        return replace(self, input_size=(int(height), int(width)))

    def options(self) -> dict:
        found = {"head": self.head, "activation": self.activation, "score_threshold": self.score_threshold,
                 "nms_iou": self.nms_iou, "nms_top_k": self.nms_top_k, "max_detections": self.max_detections,
                 "f1_threshold": self.f1_threshold}
        if self.head == "nms":
            del found["nms_iou"], found["nms_top_k"], found["activation"]
        if self.head == "anchor_free":
            found.update(strides=list(self.strides), reg_max=self.reg_max, cell_offset=self.cell_offset)
            if self.input_size:
                found["input_size"] = list(self.input_size)
        if self.nms_kind == "matrix" and self.head != "nms":
            found.update(nms="matrix", post_threshold=self.post_threshold, use_gaussian=self.use_gaussian,
                         gaussian_sigma=self.gaussian_sigma)
            del found["nms_iou"]
        if self.labels:
            found["labels"] = list(self.labels)
        elif self.num_classes:
            found["num_classes"] = self.num_classes
        return found

    # --- decoding -------------------------------------------------------------------------------

    def rows(self, outputs: Sequence[np.ndarray]) -> list[Detections]:
        """Head `nms`: per image, the graph's NMS rows above score_threshold, best first, at most max_detections."""
        shapes = [list(np.shape(o)) for o in outputs]
        if len(outputs) != 2:
            raise self._fail(f"expects 2 outputs (rows [K, 6], counts [N]), the model gives {len(outputs)}: {shapes}")
        rows, counts = (np.asarray(o) for o in outputs)
        if counts.ndim != 1 or counts.dtype.kind not in "iu" or not (
                rows.ndim == 2 and rows.shape[1] == 6 or rows.size == 0):
            raise self._fail(f"output 0 must be rows [K, 6] (class, score, x0, y0, x1, y1) and output 1 integer counts "
                             f"[N]; got {shapes} ({rows.dtype}, {counts.dtype})")
        rows = rows.astype(np.float32).reshape(-1, 6)
        counts = counts.astype(np.int64)
        if (counts < 0).any() or counts.sum() > len(rows):
            raise self._fail(f"the counts {counts.tolist()} do not fit the {len(rows)} rows")
        found, start = [], 0
        for count in counts:
            image = rows[start:start + int(count)]
            start += int(count)
            image = image[image[:, 1] > np.float32(self.score_threshold)]
            classes = image[:, 0].astype(np.int64)
            if self.num_classes and len(classes) and (classes.min() < 0 or classes.max() >= self.num_classes):
                bad = classes[(classes < 0) | (classes >= self.num_classes)][0]
                raise self._fail(f"output 0 names class {int(bad)}, the task names {self.num_classes}")
            order = np.argsort(-image[:, 1].astype(np.float64), kind="stable")[:self.max_detections]
            image, classes = image[order], classes[order]
            found.append(Detections(image[:, 2:6].copy(), image[:, 1].copy(), classes))
        return found

    def _fail(self, what: str) -> DataError:
        return DataError(f"task detection ({self.head} head): {what}",
                         "fix task options strides/reg_max/num_classes/head to match the model's outputs")

    def candidates(self, outputs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """All anchors' boxes [N, A, 4] and class scores [N, A, C] (float32), outputs checked against the options."""
        shapes = [list(np.shape(o)) for o in outputs]
        if self.head == "decoded":
            if len(outputs) != 2:
                raise self._fail(f"expects 2 outputs (boxes [N, M, 4], scores [N, M, C]), the model gives "
                                 f"{len(outputs)}: {shapes}")
            boxes, scores = (np.asarray(o, np.float32) for o in outputs)
            if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[:2] != boxes.shape[:2]:
                raise self._fail(f"output 0 must be boxes [N, M, 4] and output 1 scores [N, M, C]; got {shapes}")
            self._check_classes(scores.shape[2], "output 1")
            return boxes, (sigmoid(scores) if self.activation == "sigmoid" else scores)
        levels = len(self.strides)
        flat = bool(outputs) and all(np.ndim(o) == 3 for o in outputs)
        if len(outputs) != 2 * levels:
            if flat:
                raise self._no_layout(shapes, f"{2 * levels} outputs wanted, the model gives {len(outputs)}")
            raise self._fail(f"expects {2 * levels} outputs ({levels} class maps, then {levels} box maps, for strides "
                             f"{list(self.strides)}), the model gives {len(outputs)}: {shapes}")
        if not all(np.ndim(o) == 4 for o in outputs) and not flat:
            raise self._no_layout(shapes, "neither all 4-D (maps) nor all 3-D (flattened)")
        all_boxes, all_scores = [], []
        for stride, h, w, scores, bins in (self._flat_levels(outputs, shapes) if flat else self._map_levels(outputs, shapes)):
            n = scores.shape[0]
            sides = dfl_sides(bins.reshape(n * h * w, bins.shape[2]), self.reg_max)
            sides = sides.reshape(n, h * w, 4) * np.float32(stride)
            rows, cols = np.divmod(np.arange(h * w), w)
            cx = ((cols.astype(np.float32) + np.float32(self.cell_offset)) * np.float32(stride))[None, :]
            cy = ((rows.astype(np.float32) + np.float32(self.cell_offset)) * np.float32(stride))[None, :]
            all_boxes.append(np.stack([cx - sides[..., 0], cy - sides[..., 1], cx + sides[..., 2], cy + sides[..., 3]],
                                      axis=2).astype(np.float32))
            all_scores.append(sigmoid(scores) if self.activation == "sigmoid" else scores)
        return np.concatenate(all_boxes, axis=1), np.concatenate(all_scores, axis=1)

    def _map_levels(self, outputs: Sequence[np.ndarray], shapes: list):
        """Per stride of the maps layout: (stride, h, w, scores [N, h*w, C], bins [N, h*w, 4 (reg_max + 1)])."""
        levels, bins = len(self.strides), 4 * (self.reg_max + 1)
        size = None
        for i, stride in enumerate(self.strides):
            cls_map, reg_map = np.asarray(outputs[i], np.float32), np.asarray(outputs[levels + i], np.float32)
            if reg_map.shape[1] != bins or cls_map.shape[2:] != reg_map.shape[2:] or cls_map.shape[0] != reg_map.shape[0]:
                raise self._fail(f"output {i} (class map) and output {levels + i} (box map) of stride {stride} must be "
                                 f"[N, C, h, w] and [N, {bins}, h, w] (4 x (reg_max {self.reg_max} + 1)); got "
                                 f"{shapes[i]} and {shapes[levels + i]}")
            self._check_classes(cls_map.shape[1], f"output {i}")
            n, c, h, w = cls_map.shape
            level_size = (h * stride, w * stride)
            if size is not None and level_size != size:
                raise self._fail(f"output {i} is {h}x{w} at stride {stride} ({level_size[0]}x{level_size[1]} px), "
                                 f"earlier levels cover {size[0]}x{size[1]} px: the strides are wrong")
            size = level_size
            yield (stride, h, w, cls_map.reshape(n, c, h * w).transpose(0, 2, 1),
                   reg_map.reshape(n, bins, h * w).transpose(0, 2, 1))

    def _grids(self) -> list[tuple[int, int]]:
        height, width = self.input_size
        return [(-(-height // s), -(-width // s)) for s in self.strides]

    def _flat_levels(self, outputs: Sequence[np.ndarray], shapes: list):
        """Per stride of the flattened layout, as _map_levels; the cells' grid from input_size."""
        if not self.input_size:
            raise self._fail(f"flattened outputs {shapes} need the input's height and width to lay out their cells, "
                             "and the task has no input_size")
        levels, bins = len(self.strides), 4 * (self.reg_max + 1)
        grids = self._grids()
        for i, (stride, (h, w)) in enumerate(zip(self.strides, grids)):
            scores, reg = np.asarray(outputs[i], np.float32), np.asarray(outputs[levels + i], np.float32)
            if scores.shape[1] != h * w or reg.shape[1] != h * w or reg.shape[2] != bins or scores.shape[0] != reg.shape[0]:
                raise self._no_layout(shapes, f"stride {stride} wants [N, {h * w}, C] and [N, {h * w}, {bins}]")
            self._check_classes(scores.shape[2], f"output {i}")
            yield stride, h, w, scores, reg

    def _no_layout(self, shapes: list, why: str) -> DataError:
        """Outputs that fit no anchor-free layout: the shapes seen and what each layout wanted."""
        bins, strides = 4 * (self.reg_max + 1), list(self.strides)
        flat = (f"flattened [N, h*w, C] x {len(strides)}, then [N, h*w, {bins}] x {len(strides)} with h x w = "
                + ", ".join(f"{h}x{w}" for h, w in self._grids()) + f" (input {self.input_size[0]}x{self.input_size[1]})"
                if self.input_size else f"flattened [N, h*w, C] then [N, h*w, {bins}] per stride (input size unknown)")
        return self._fail(f"outputs {shapes} match no head layout ({why}); tried: maps [N, C, h, w] x "
                          f"{len(strides)}, then [N, {bins}, h, w] x {len(strides)} for strides {strides}; {flat}")

    def _check_classes(self, count: int, where: str) -> None:
        if self.num_classes and count != self.num_classes:
            raise self._fail(f"{where} scores {count} classes, the task names {self.num_classes}")

    def detect(self, outputs: Sequence[np.ndarray]) -> list[Detections]:
        """Decoded, thresholded, NMS'd detections per image, in model-input pixels."""
        if self.head == "nms":
            return self.rows(outputs)
        boxes, scores = self.candidates(outputs)
        found = []
        for image_boxes, image_scores in zip(boxes, scores):
            anchor, klass = np.nonzero(image_scores > np.float32(self.score_threshold))   # anchor-major order
            cand_boxes, cand_scores = image_boxes[anchor], image_scores[anchor, klass]
            if self.nms_kind == "matrix":
                keep, decayed = matrix_nms(cand_boxes, cand_scores, klass, self.nms_top_k, self.max_detections,
                                           self.post_threshold, self.use_gaussian, self.gaussian_sigma)
                found.append(Detections(cand_boxes[keep].reshape(-1, 4), decayed, klass[keep].astype(np.int64)))
                continue
            keep = nms(cand_boxes, cand_scores, klass, self.nms_iou, self.nms_top_k, self.max_detections)
            found.append(Detections(cand_boxes[keep].reshape(-1, 4), cand_scores[keep], klass[keep].astype(np.int64)))
        return found

    # --- task interface -------------------------------------------------------------------------

    def label(self, klass: int) -> str:
        return self.labels[klass] if klass < len(self.labels) else str(klass)

    def postprocess(self, outputs: Sequence[np.ndarray]) -> list[list[dict]]:
        """Per image, best first: box (tensor pixels, float32 values exactly), class, label, score."""
        return [[{"box": [float(v) for v in d.boxes[k]], "class": int(d.classes[k]),
                  "label": self.label(int(d.classes[k])), "score": float(d.scores[k])} for k in range(len(d))]
                for d in self.detect(outputs)]

    def in_image(self, result: list[dict], geometry) -> list[dict]:
        """postprocess() results of one image with boxes in the source image's pixels (letterbox/resize undone
        in float32, as the C++ core does), then rounded for reading: boxes to 0.01 px, scores to 1e-6."""
        if not result:
            return []
        boxes = geometry.to_image(np.asarray([r["box"] for r in result], np.float32))
        return [dict(r, box=[round(float(v), 2) for v in box], score=round(r["score"], 6))
                for r, box in zip(result, boxes)]

    def predictions(self, outputs: Sequence[np.ndarray]) -> list[dict]:
        """Detections above f1_threshold as truth entries (what `agreement` compares another engine with)."""
        found = []
        for d in self.detect(outputs):
            keep = d.scores >= self.f1_threshold
            found.append({"boxes": d.boxes[keep].astype(np.float64).tolist(), "classes": d.classes[keep].tolist()})
        return found

    def agreement_with(self, outputs: Sequence[np.ndarray], theirs: Sequence) -> float:
        """mAP@0.5 of `outputs` with the other engine's confident detections (`predictions`) as truth; both finding
        nothing is agreement."""
        if not any(t["classes"] for t in theirs):
            return 100.0 if not any(p["classes"] for p in self.predictions(outputs)) else 0.0
        return self.score(outputs, theirs)

    def match_outputs(self, reference: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> dict:
        """`match_summary` of every image's detections in `outputs` against the FP32 `reference`'s."""
        return match_summary([match_detections(want, got, self.f1_threshold)
                              for want, got in zip(self.postprocess(reference), self.postprocess(outputs))])

    def golden_tolerance(self, measured: Mapping, tier: str) -> dict:
        return golden_tolerance(measured, tier, self.f1_threshold)

    def _classes(self, truth: Sequence[dict], found: Sequence[Detections]) -> int:
        if self.num_classes:
            return self.num_classes
        seen = [int(c) for t in truth for c in t["classes"]] + [int(c) for d in found for c in d.classes]
        return max(seen) + 1 if seen else 0

    def evaluate(self, outputs: Sequence[np.ndarray], truth: Sequence) -> dict[str, float]:
        return self.evaluate_detections(self.detect(outputs), truth)

    def evaluate_detections(self, found: Sequence[Detections], truth: Sequence) -> dict[str, float]:
        """Every metric of detections found by any means (e.g. `nms_rows` of a graph that ran NMS itself)."""
        check_count(self.kind, len(found), truth)
        if not any(len(t["classes"]) for t in truth):
            raise DataError("detection truth holds no boxes at all: mAP is undefined",
                            "evaluate on images with annotated objects")
        metrics = coco.detection_metrics([coco.ImageBoxes.of(d.boxes, d.classes, d.scores) for d in found],
                                         [coco.ImageBoxes.of(t["boxes"], t["classes"]) for t in truth],
                                         self._classes(truth, found), self.f1_threshold, self.max_detections)
        return {key: percent(value) for key, value in metrics.items()}

    def class_report(self, outputs: Sequence[np.ndarray], truth: Sequence) -> list[dict]:
        """Per class: AP@0.5, AP@0.5:0.95 and F1 at f1_threshold (percent; AP None without truth of the class)."""
        found = self.detect(outputs)
        dets = [coco.ImageBoxes.of(d.boxes, d.classes, d.scores) for d in found]
        gts = [coco.ImageBoxes.of(t["boxes"], t["classes"]) for t in truth]
        classes = list(range(self._classes(truth, found)))
        ap = coco.average_precision(dets, gts, classes, "all", self.max_detections)
        counts = coco.f1_counts(dets, gts, classes, self.f1_threshold)
        return [{"class": c, "label": self.label(c),
                 "ap50": None if math.isnan(ap[c, 0]) else percent(ap[c, 0]),
                 "ap": None if math.isnan(ap[c, 0]) else percent(ap[c].mean()),
                 "f1": percent(coco.f1(*counts[c])), "truth": counts[c][0] + counts[c][2]} for c in classes]

    def truth_from_json(self, raw: Any) -> list[dict]:
        if not isinstance(raw, list):
            raise DataError("detection truth is not a list (one entry per image)",
                            'write {"boxes": [[x0, y0, x1, y1], ...], "classes": [...], "size": [h, w]} per image')
        checked = []
        for i, entry in enumerate(raw):
            checked.append(self._entry(i, entry))
        return checked

    def _entry(self, i: int, entry: Any) -> dict:
        fix = 'write {"boxes": [[x0, y0, x1, y1], ...], "classes": [...], "size": [h, w]} per image'
        if not isinstance(entry, dict) or not isinstance(entry.get("boxes"), list) \
                or not isinstance(entry.get("classes"), list) or len(entry["boxes"]) != len(entry["classes"]):
            raise DataError(f"detection truth of image {i} is not an object with as many boxes as classes", fix)
        size = entry.get("size")
        if size is not None and not (isinstance(size, list) and len(size) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)):
            raise DataError(f"detection truth of image {i}: size {size!r} is not [height, width]", fix)
        boxes = []
        for box, klass in zip(entry["boxes"], entry["classes"]):
            if not (isinstance(box, list) and len(box) == 4 and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in box)
                    and box[0] < box[2] and box[1] < box[3]):
                raise DataError(f"detection truth of image {i}: box {box!r} is not [x0, y0, x1, y1] with x0 < x1, "
                                "y0 < y1", fix)
            if not isinstance(klass, int) or isinstance(klass, bool) or klass < 0 \
                    or (self.num_classes and klass >= self.num_classes):
                raise DataError(f"detection truth of image {i}: class {klass!r} is not an index below "
                                f"{self.num_classes or 'the class count'}", "use class indices 0..classes-1")
            if size is not None and (box[0] < -BOX_SLACK or box[1] < -BOX_SLACK or box[2] > size[1] + BOX_SLACK
                                     or box[3] > size[0] + BOX_SLACK):
                raise DataError(f"detection truth of image {i}: box {box} lies outside the {size[1]}x{size[0]} image",
                                "fix the annotation (boxes are in the evaluated image's pixels)")
            boxes.append([float(v) for v in box])
        out = {"boxes": boxes, "classes": list(entry["classes"])}
        if size is not None:
            out["size"] = list(size)
        return out

    def truth_to_json(self, truth: Sequence) -> list:
        return [dict(t) for t in truth]
