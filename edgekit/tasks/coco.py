"""COCO-style detection metrics, written from the definitions pycocotools implements (`COCOeval`, bbox):

- AP per class and IoU threshold: detections of all images sorted by score (stable), greedily matched per
  image to the unmatched truth box of highest IoU >= threshold; precision made monotone from the right and
  read at 101 recall points (0, 0.01, ..., 1), 0 beyond the highest recall reached.
- mAP@0.5 (`map50`), mAP@0.5:0.95 (`map`, ten thresholds) averaged over the classes with truth; at most
  `max_dets` detections per image (highest scores).
- Size buckets (COCO areas, in the truth's pixels): small < 32^2 <= medium < 96^2 <= large. Truth outside a
  bucket is ignored (a detection matched to it is neither a hit nor a miss), as are unmatched detections
  outside it. A bucket without truth scores 0.
- F1 at a score threshold: detections scoring >= threshold, one-to-one per class at IoU >= 0.5.

Boxes are [x0, y0, x1, y1] in continuous pixel coordinates: area = (x1 - x0) * (y1 - y0), no "+1".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
RECALL_POINTS = np.linspace(0.0, 1.0, 101)
AREA_RANGES = {"all": (0.0, 1e10), "small": (0.0, 32.0 ** 2), "medium": (32.0 ** 2, 96.0 ** 2),
               "large": (96.0 ** 2, 1e10)}


@dataclass(frozen=True)
class ImageBoxes:
    """One image's boxes: [K, 4] float, [K] int classes, [K] float scores (truth: scores unused)."""

    boxes: np.ndarray
    classes: np.ndarray
    scores: np.ndarray | None = None

    @classmethod
    def of(cls, boxes, classes, scores=None) -> "ImageBoxes":
        return cls(np.asarray(boxes, np.float64).reshape(-1, 4), np.asarray(classes, np.int64).reshape(-1),
                   None if scores is None else np.asarray(scores, np.float64).reshape(-1))


def areas(boxes: np.ndarray) -> np.ndarray:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in `a` [K, 4] with every box in `b` [M, 4] (float64)."""
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    ix = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = ix * iy
    union = areas(a)[:, None] + areas(b)[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def _match(dets: ImageBoxes, truth: ImageBoxes, klass: int, area: tuple[float, float], max_dets: int):
    """pycocotools' evaluateImg for one image and class: (scores, matched [T, D], ignored [T, D], truth count)."""
    d = np.nonzero(dets.classes == klass)[0]
    d = d[np.argsort(-dets.scores[d], kind="mergesort")][:max_dets]
    g = np.nonzero(truth.classes == klass)[0]
    g_area = areas(truth.boxes[g])
    g_ignore = (g_area < area[0]) | (g_area > area[1])
    order = np.argsort(g_ignore, kind="mergesort")            # truth that counts first
    g, g_ignore = g[order], g_ignore[order]
    ious = iou_matrix(dets.boxes[d], truth.boxes[g])
    matched = np.zeros((len(IOU_THRESHOLDS), len(d)), bool)
    ignored = np.zeros((len(IOU_THRESHOLDS), len(d)), bool)
    for t, threshold in enumerate(IOU_THRESHOLDS):
        taken = np.zeros(len(g), bool)
        for k in range(len(d)):
            best, m = min(threshold, 1 - 1e-10), -1
            for j in range(len(g)):
                if taken[j]:
                    continue
                if m > -1 and not g_ignore[m] and g_ignore[j]:
                    break
                if ious[k, j] < best:
                    continue
                best, m = ious[k, j], j
            if m > -1:
                taken[m] = True
                matched[t, k] = True
                ignored[t, k] = g_ignore[m]
    d_area = areas(dets.boxes[d])
    outside = (d_area < area[0]) | (d_area > area[1])
    ignored |= ~matched & outside[None, :]
    return dets.scores[d], matched, ignored, int((~g_ignore).sum())


def average_precision(dets: Sequence[ImageBoxes], truth: Sequence[ImageBoxes], classes: Sequence[int],
                      area: str = "all", max_dets: int = 100) -> np.ndarray:
    """AP [classes, IoU thresholds] in [0, 1]; NaN for a class without truth in the bucket."""
    out = np.full((len(classes), len(IOU_THRESHOLDS)), np.nan)
    for c, klass in enumerate(classes):
        per_image = [_match(dt, gt, klass, AREA_RANGES[area], max_dets) for dt, gt in zip(dets, truth)]
        positives = sum(p[3] for p in per_image)
        if positives == 0:
            continue
        scores = np.concatenate([p[0] for p in per_image])
        order = np.argsort(-scores, kind="mergesort")
        matched = np.concatenate([p[1] for p in per_image], axis=1)[:, order]
        ignored = np.concatenate([p[2] for p in per_image], axis=1)[:, order]
        for t in range(len(IOU_THRESHOLDS)):
            tp = np.cumsum(matched[t] & ~ignored[t]).astype(np.float64)
            fp = np.cumsum(~matched[t] & ~ignored[t]).astype(np.float64)
            recall = tp / positives
            precision = tp / (tp + fp + np.spacing(1))
            precision = np.maximum.accumulate(precision[::-1])[::-1] if len(precision) else precision
            picks = np.searchsorted(recall, RECALL_POINTS, side="left")
            q = np.zeros(len(RECALL_POINTS))
            valid = picks < len(precision)
            q[valid] = precision[picks[valid]]
            out[c, t] = q.mean()
    return out


def _mean(values: np.ndarray) -> float:
    return float(np.nanmean(values)) if np.isfinite(values).any() else 0.0


def f1_counts(dets: Sequence[ImageBoxes], truth: Sequence[ImageBoxes], classes: Sequence[int],
              threshold: float, iou: float = 0.5) -> dict[int, tuple[int, int, int]]:
    """Per class (true positives, false positives, false negatives) of detections scoring >= threshold."""
    counts = {}
    for klass in classes:
        tp = fp = fn = 0
        for dt, gt in zip(dets, truth):
            d = np.nonzero((dt.classes == klass) & (dt.scores >= threshold))[0]
            d = d[np.argsort(-dt.scores[d], kind="mergesort")]
            g = np.nonzero(gt.classes == klass)[0]
            ious = iou_matrix(dt.boxes[d], gt.boxes[g])
            taken = np.zeros(len(g), bool)
            for k in range(len(d)):
                candidates = np.where(taken, -1.0, ious[k]) if len(g) else np.zeros(0)
                j = int(np.argmax(candidates)) if len(g) else -1
                if j >= 0 and candidates[j] >= iou:
                    taken[j] = True
                    tp += 1
                else:
                    fp += 1
            fn += int((~taken).sum())
        counts[klass] = (tp, fp, fn)
    return counts


def f1(tp: int, fp: int, fn: int) -> float:
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def detection_metrics(dets: Sequence[ImageBoxes], truth: Sequence[ImageBoxes], num_classes: int,
                      f1_threshold: float, max_dets: int = 100) -> dict[str, float]:
    """map50, map (0.5:0.95), map_small/medium/large, f1 (micro over classes), all in [0, 1]."""
    classes = list(range(num_classes))
    ap = average_precision(dets, truth, classes, "all", max_dets)
    result = {"map50": _mean(ap[:, 0]), "map": _mean(ap)}
    for bucket in ("small", "medium", "large"):
        result[f"map_{bucket}"] = _mean(average_precision(dets, truth, classes, bucket, max_dets))
    counts = f1_counts(dets, truth, classes, f1_threshold)
    result["f1"] = f1(*(sum(c[i] for c in counts.values()) for i in range(3)))
    return result
