"""The device suite's "golden detections" check: the device's golden outputs post-processed on the host with the
bundle's own task.json (the Python twin's Detection task: decode + NMS, or the graph's NMS rows) and compared,
golden sample by golden sample, with the detections of the bundle's golden reference outputs.

Semantics mirror the app self-test (native/app/src/selftest.cc): FP32 bundles (no `tolerances.detections`) need the
same classes in the same order and every box corner within BOX_PIXELS (model-input pixels); reduced-precision
bundles are matched by class and IoU (`tasks.detection.match_detections`) and must meet the recall and precision
floors of `tolerances.detections`. Zero detections on an image is a result (nothing to find matches nothing found).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..tasks.detection import match_detections
from .results import CheckResult

BOX_PIXELS = 1.0       # selftest.cc kBoxPixels

NAME = "golden detections"


def exact(expected: Sequence[Mapping], got: Sequence[Mapping]) -> dict:
    """One image, FP32: same classes in order and the largest box-corner difference (px)."""
    same = len(expected) == len(got) and all(int(e["class"]) == int(g["class"]) for e, g in zip(expected, got))
    corner = max((abs(float(a) - float(b)) for e, g in zip(expected, got) for a, b in zip(e["box"], g["box"])),
                 default=0.0)
    return {"expected": len(expected), "got": len(got), "same_classes": same, "max_corner_px": corner,
            "passed": same and corner <= BOX_PIXELS}


def compare(expected: Sequence[Sequence[Mapping]], got: Sequence[Sequence[Mapping]], floors: Mapping | None) -> dict:
    """Every golden image's detections (`postprocess` items) against the reference's: figures and a verdict."""
    if len(expected) != len(got):
        return {"passed": False, "images": len(expected),
                "reason": f"the device's outputs hold {len(got)} images, the golden reference {len(expected)}"}
    if floors is None:
        per = [exact(e, g) for e, g in zip(expected, got)]
        bad = [i for i, m in enumerate(per) if not m["passed"]]
        return {"mode": "fp32", "images": len(per), "passed": not bad, "failed_images": bad,
                "matched": sum(m["expected"] for i, m in enumerate(per) if i not in bad),
                "expected": sum(m["expected"] for m in per), "got": sum(m["got"] for m in per),
                "max_corner_px": max((m["max_corner_px"] for m in per), default=0.0),
                "box_pixels": BOX_PIXELS, "per_image": per}
    threshold, min_iou = float(floors["score_threshold"]), float(floors["min_iou"])
    per = [match_detections(e, g, threshold, min_iou) for e, g in zip(expected, got)]
    bad = [i for i, m in enumerate(per)
           if m["recall"] < float(floors["min_recall"]) or m["precision"] < float(floors["min_precision"])]
    ious = [m["min_iou"] for m in per if m["min_iou"] is not None]
    return {"mode": "matched", "images": len(per), "passed": not bad, "failed_images": bad,
            "matched": sum(m["found"] for m in per), "expected": sum(m["expected"] for m in per),
            "missing": sum(m["expected"] - m["found"] for m in per),
            "extra": sum(m["confident"] - m["confirmed"] for m in per),
            "worst_iou": min(ious) if ious else None,
            "min_recall": min((m["recall"] for m in per), default=1.0),
            "min_precision": min((m["precision"] for m in per), default=1.0),
            "floors": {k: floors[k] for k in ("min_recall", "min_precision", "min_iou", "score_threshold")},
            "per_image": per}


def message(found: Mapping) -> str:
    if "reason" in found:
        return found["reason"]
    bad = f"; failing images {found['failed_images']}" if found["failed_images"] else ""
    if found["mode"] == "fp32":
        return (f"{found['images']} images, {found['expected']} reference / {found['got']} device detections, "
                f"same classes, worst corner {found['max_corner_px']:.3g} px (≤ {BOX_PIXELS:g}){bad}")
    iou = "n/a" if found["worst_iou"] is None else f"{found['worst_iou']:.3f}"
    f = found["floors"]
    return (f"{found['images']} images, matched {found['matched']}/{found['expected']}, missing {found['missing']}, "
            f"extra {found['extra']}, worst IoU {iou}, recall {found['min_recall']:.3f} (≥ {f['min_recall']:g}), "
            f"precision {found['min_precision']:.3f} (≥ {f['min_precision']:g}){bad}")


def badness(found: Mapping) -> tuple:
    """Orders one launch's `compare` figures, worst last: failed before passed, then by how far they are off."""
    if "reason" in found:
        return (1, float("inf"))
    off = found["max_corner_px"] if found["mode"] == "fp32" else 2.0 - found["min_recall"] - found["min_precision"]
    return (0 if found["passed"] else 1, off)


def judge(name: str, post, compare_fn, message_fn, badness_fn, reference: Sequence[np.ndarray],
          launches: Sequence[Sequence[np.ndarray]], floors: Mapping | None) -> tuple[dict, CheckResult]:
    """The worst launch (by `badness_fn`) of the device's golden outputs, post-processed with `post`, against the
    golden reference's: its figures and one CheckResult named `name` (detections here, masks in masks.py)."""
    from edgekit.core.errors import EdgekitError

    try:
        expected = post(list(reference))
        results = [compare_fn(expected, post(list(outs)), floors) for outs in launches]
    except EdgekitError as exc:       # outputs the task spec does not fit: named by the task
        return {}, CheckResult(name, "failed", exc.message)
    if not results:
        return {}, CheckResult(name, "skipped", "no launch outputs")
    worst = max(results, key=badness_fn)
    figures = {k: v for k, v in worst.items() if k != "per_image"}
    text = message_fn(worst) + f", worst of {len(results)} launches"
    return figures, CheckResult(name, "passed" if worst["passed"] else "failed", text)


def check(task, reference: Sequence[np.ndarray], launches: Sequence[Sequence[np.ndarray]],
          floors: Mapping | None) -> tuple[dict, CheckResult]:
    """The worst launch of the device's golden detections against the golden reference's, one CheckResult."""
    return judge(NAME, task.postprocess, compare, message, badness, reference, launches, floors)
