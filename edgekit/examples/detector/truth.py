"""The detector example's task (task.json options) and its evaluation set, shared by training and tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import scenes


def detection_task():
    from edgekit.tasks import make_task

    from .model import REG_MAX, STRIDES

    return make_task("detection", {"head": "anchor_free", "strides": list(STRIDES), "reg_max": REG_MAX,
                                   "labels": list(scenes.CLASSES), "score_threshold": 0.05, "nms_iou": 0.5,
                                   "max_detections": 100, "f1_threshold": 0.5})


def evaluation_set(folder: Path, spec) -> tuple[np.ndarray, list]:
    """The evaluation images as tensors (the bundle's preprocessing) and their truth, in file order."""
    from edgekit.core.images import decode_image, image_files
    from edgekit.tasks import read_truth

    files = image_files(folder)
    truth = read_truth(folder / "truth.json", len(files))
    return np.stack([spec.apply(decode_image(f)) for f in files]), truth.values
