"""Run bundles on images on the host, as the apps do: the bundle's own preprocess.json, its x86 twin, its task.json.

This is the Python twin of native/'s app core: `edgekit run` and `edgekit ocr` print
what an app built on the same bundles must show, and the golden image results in a
bundle come from here.

    image (BGR uint8) -> PreprocessSpec (preprocess.json) -> model -> task.postprocess (task.json)

The OCR system chains three bundles as PaddleOCR does: the detector finds text boxes
on the page (in model pixels, scaled back to the image), each box is cropped from the
original image, the direction classifier turns crops it reads as upside down (label
"180" with a score above `cls_thresh`), and the recogniser reads each crop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .data import PreprocessSpec, decode_image
from .errors import BundleError, DataError
from .tasks import Task, TaskKind, make_task

CLS_THRESH = 0.9          # PaddleOCR's default: rotate a crop only when the classifier is this sure
SAME_LINE_PIXELS = 10     # PaddleOCR's sorted_boxes: boxes whose tops differ by less are on one line


def read_image(path: Path) -> np.ndarray:
    """The image as every edgekit path decodes it (uint8 BGR or gray, alpha dropped)."""
    if not Path(path).is_file():
        raise DataError(f"image {path} does not exist", "check the path")
    return decode_image(Path(path))


@dataclass(frozen=True)
class BundleModel:
    """One verified bundle, ready to run on images: its spec, its task and an engine (the x86 twin by default)."""

    path: Path
    spec: PreprocessSpec
    task: Task
    feed: str
    runner: object            # anything with run({feed: batch}) -> outputs (edgekit.runners.Runner)
    takes: tuple = ()         # (dtype, shape) the model declares for its input, -1 = any; checked before it runs

    @classmethod
    def load(cls, path: Path, runner=None) -> "BundleModel":
        from . import limits
        from .inspection import locked
        from .lite.runtime import LiteRunner

        bundle = locked(path, twin=True)
        task_file, spec_file = path / "task.json", path / "preprocess.json"
        if not task_file.is_file():
            raise BundleError(f"{path} has no task.json: it was built without labels or ground truth",
                              "rebuild with labelled evaluation data (or a truth file) so the bundle knows its task")
        rebuild = "rebuild the bundle with `edgekit build`"
        spec_json = limits.read_json(spec_file, BundleError, rebuild)
        if not isinstance(spec_json, dict) or not isinstance(spec_json.get("preprocess", {}), (dict, type(None))):
            raise BundleError(f"{spec_file} is not a preprocess.json (an object with a preprocess object or null)", rebuild)
        raw = spec_json.get("preprocess")
        if raw is None:
            raise BundleError(f"{path} has no preprocessing spec (it was built from tensor data without [preprocess])",
                              "rebuild with a [preprocess] table so the bundle says how images become its input")
        task_spec = limits.read_json(task_file, BundleError, rebuild)
        if not isinstance(task_spec, dict) or not isinstance(task_spec.get("kind"), str) \
                or not isinstance(task_spec.get("options", {}), dict):
            raise BundleError(f"{task_file} is not a task.json (an object with a kind and an options object)", rebuild)
        inputs = bundle.manifest["model"]["inputs"]
        if len(inputs) != 1:
            raise BundleError(f"{path}: images feed single-input models; this one has {len(inputs)} inputs",
                              "run it on tensors instead (edgekit parity replays its golden vectors)")
        feed = inputs[0]["name"]
        if runner is None:
            runner = LiteRunner(path / bundle.manifest["host_twin"]["file"], [feed])
        spec = PreprocessSpec.from_mapping({k: v for k, v in raw.items() if k != "order"})
        return cls(path, spec, make_task(task_spec["kind"], task_spec.get("options", {})), feed, runner,
                   (inputs[0]["dtype"], tuple(inputs[0]["shape"])))

    @property
    def input_size(self) -> tuple[int, int]:
        return self.spec.resize if self.spec.resize else (0, 0)

    def tensor(self, image: np.ndarray) -> np.ndarray:
        return self.spec.apply(image)

    def outputs(self, image: np.ndarray) -> list[np.ndarray]:
        batch = self.tensor(image)[None]
        if self.takes:
            dtype, shape = self.takes
            if batch.dtype.name != dtype or len(shape) != batch.ndim or any(
                    d not in (-1, n) for d, n in zip(shape[1:], batch.shape[1:])):
                # Paddle-Lite does not check what it is fed: a wrong shape is a crash there, an error here
                raise BundleError(f"{self.path}: preprocess.json makes {batch.dtype.name} {list(batch.shape[1:])} "
                                  f"tensors, the model takes {dtype} {list(shape[1:])} (-1 = any)",
                                  "rebuild the bundle with `edgekit build`; its preprocess.json was edited")
        return self.runner.run({self.feed: batch})

    def predict(self, image: np.ndarray) -> object:
        """The task's readable result for one image (detections in the image's own pixels)."""
        result = self.task.postprocess(self.outputs(image))[0]
        if self.task.kind is TaskKind.ocr_det:
            sx, sy = _det_scale(self, image)
            result = [dict(r, box=_scaled(r["box"], sx, sy)) for r in result]
        return result


def _det_scale(det: BundleModel, image: np.ndarray) -> tuple[float, float]:
    height, width = det.input_size
    if det.spec.resize_mode != "stretch" or not height:
        raise BundleError(f"{det.path}: the detector's preprocessing is not a plain resize",
                          "build the detector with [preprocess] resize = [H, W] and resize_mode = \"stretch\"")
    return image.shape[1] / width, image.shape[0] / height


def _scaled(box: Sequence[float], sx: float, sy: float) -> list[float]:
    return [round(box[0] * sx, 2), round(box[1] * sy, 2), round(box[2] * sx, 2), round(box[3] * sy, 2)]


def sort_boxes(boxes: Sequence[Sequence[float]]) -> list[int]:
    """Reading order, as PaddleOCR's sorted_boxes: by top then left; neighbours less than 10 px apart in height
    are one line, ordered left to right. Returns indices into `boxes`."""
    order = sorted(range(len(boxes)), key=lambda i: (boxes[i][1], boxes[i][0]))
    for i in range(len(order) - 1):
        for j in range(i, -1, -1):
            a, b = boxes[order[j]], boxes[order[j + 1]]
            if abs(b[1] - a[1]) < SAME_LINE_PIXELS and b[0] < a[0]:
                order[j], order[j + 1] = order[j + 1], order[j]
            else:
                break
    return order


def _article(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def crop(image: np.ndarray, box: Sequence[float]) -> np.ndarray:
    """The pixels a box covers: edges rounded outwards (floor/ceil), clamped to the image."""
    height, width = image.shape[:2]
    x0, y0 = max(0, math.floor(box[0])), max(0, math.floor(box[1]))
    x1, y1 = min(width, math.ceil(box[2])), min(height, math.ceil(box[3]))
    return image[y0:y1, x0:x1]


def ocr_system(image: np.ndarray, det: BundleModel, rec: BundleModel, cls: BundleModel | None = None,
               cls_thresh: float = CLS_THRESH) -> list[dict]:
    """Text lines of a page: box (image pixels), text and confidence, direction when a classifier is given."""
    for model, kind in ((det, TaskKind.ocr_det), (rec, TaskKind.ocr_rec), (cls, TaskKind.ocr_cls)):
        if model is not None and model.task.kind is not kind:
            raise BundleError(f"{model.path} is {_article(model.task.kind.value)} bundle, not {kind.value}",
                              "pass the detection, recognition and direction bundles in their places")
    found = det.predict(image)
    boxes = [r["box"] for r in found]
    lines = []
    for index in sort_boxes(boxes):
        piece = crop(image, boxes[index])
        if piece.shape[0] < 1 or piece.shape[1] < 1:
            continue
        line = {"box": boxes[index], "det_score": found[index]["score"]}
        if cls is not None:
            direction = cls.predict(piece)
            line["angle"], line["angle_score"] = direction["label"], direction["score"]
            if direction["label"] == "180" and direction["score"] > cls_thresh:
                piece = np.ascontiguousarray(piece[::-1, ::-1])
        read = rec.predict(piece)
        line["text"], line["confidence"] = read["text"], read["confidence"]
        lines.append(line)
    return lines
