"""The device suite's "golden masks" check: the device's golden outputs turned into class maps on the host with the
bundle's own task.json (the Python twin's Segmentation task: argmax, or the one-channel threshold) and compared,
golden sample by golden sample and pixel by pixel, with the class maps of the bundle's golden reference outputs.

The rules are the app self-test's (native/app/src/selftest.cc): FP32 bundles (no `tolerances.masks`) need every
pixel of every map equal; reduced-precision bundles need each image's pixel agreement to reach
`tolerances.masks.min_agreement` (percent), which the build measured on tier C's (else tier B's) worst image, less
`tasks.segmentation.GOLDEN_MARGIN` points. Maps are compared at the model's output resolution (the self-test
compares the golden images' masks at image size). A reduced-precision bundle built before the floors existed has
no `tolerances.masks`: it is held to the FP32 rule here, where the self-test only reports it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..tasks.segmentation import compare_masks, mask_summary
from .results import CheckResult

NAME = "golden masks"


def compare(expected: Sequence[np.ndarray], got: Sequence[np.ndarray], floors: Mapping | None) -> dict:
    """Every golden image's class map against the reference's: figures and a verdict."""
    if len(expected) != len(got):
        return {"passed": False, "images": len(expected),
                "reason": f"the device's outputs hold {len(got)} class maps, the golden reference {len(expected)}"}
    per = [compare_masks(e, g) for e, g in zip(expected, got)]
    if floors is None:
        mode, floor = "fp32", None
        bad = [i for i, m in enumerate(per) if m["differing"]]
    else:
        mode, floor = "agreement", float(floors["min_agreement"])
        bad = [i for i, m in enumerate(per) if m["agreement"] < floor]
    return dict(mask_summary(per), mode=mode, min_agreement_floor=floor, passed=not bad, failed_images=bad,
                per_image=per)


def message(found: Mapping) -> str:
    if "reason" in found:
        return found["reason"]
    bad = f"; failing images {found['failed_images']}" if found["failed_images"] else ""
    head = f"{found['images']} images, {found['differing']:,} of {found['pixels']:,} pixels differ"
    if found["mode"] == "fp32":
        return f"{head} (every pixel must equal the reference's){bad}"
    return (f"{head}, worst agreement {found['min_agreement']:.2f} % (≥ {found['min_agreement_floor']:g} %), "
            f"worst mask IoU {found['min_miou']:.2f} %{bad}")


def badness(found: Mapping) -> tuple:
    """Orders one launch's `compare` figures, worst last: failed before passed, then by disagreeing pixels."""
    if "reason" in found:
        return (1, float("inf"))
    return (0 if found["passed"] else 1, found["differing"])


def check(task, reference: Sequence[np.ndarray], launches: Sequence[Sequence[np.ndarray]],
          floors: Mapping | None) -> tuple[dict, CheckResult]:
    """The worst launch of the device's golden class maps against the golden reference's, one CheckResult."""
    from .detections import judge

    return judge(NAME, task.class_maps, compare, message, badness, reference, launches, floors)
