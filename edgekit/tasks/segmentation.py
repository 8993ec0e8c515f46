"""Semantic segmentation: a class per pixel from score maps, mIoU against truth masks.

task.json options:

    labels = ["background", "disc", ...]   # class names (optional)
    threshold = 0.5                        # one-channel models: foreground where the score is above it
    activation = "sigmoid"                 # one-channel models: "sigmoid" of a logit, or "none"
    ignore_index = 255                     # truth pixels of this value are not scored

Model output: scores [N, C, h, w] (the class of a pixel is the argmax over C, the first on
ties; C = 1: foreground 1 where the score passes the threshold), or a class map [N, h, w]
already computed by the graph. A map of another size than the truth (or the image) is
resized with nearest-neighbour sampling, source index floor((2 d + 1) * in / (2 * out)) in
integers, so the C++ core gives the same pixels.

Truth (one entry per image): {"size": [h, w], "rle": [[class, run], ...]}, runs in row-major
order; `masks_truth` reads mask PNGs (pixel value = class index) into such entries.
Metrics: mIoU over the classes present in truth or prediction (IoU = TP / (TP + FP + FN),
counted over the whole set) and pixel accuracy, in percent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from edgekit.core.errors import ConfigError, DataError

from .base import Task, TaskKind, check_count, check_options, number_option, percent

ACTIVATIONS = ("sigmoid", "none")
GOLDEN_MARGIN = 1.0        # the golden pixel-agreement floor: the worst image measured at build time, less this (points)


def encode_rle(mask: np.ndarray) -> dict:
    flat = np.asarray(mask).reshape(-1)
    if not len(flat):
        return {"size": list(mask.shape), "rle": []}
    edges = np.nonzero(flat[1:] != flat[:-1])[0] + 1
    starts = np.concatenate([[0], edges])
    runs = np.diff(np.concatenate([starts, [len(flat)]]))
    return {"size": [int(mask.shape[0]), int(mask.shape[1])],
            "rle": [[int(flat[s]), int(r)] for s, r in zip(starts, runs)]}


def decode_rle(entry: Mapping) -> np.ndarray:
    height, width = entry["size"]
    values = np.asarray([v for v, _ in entry["rle"]], np.uint8)
    runs = np.asarray([r for _, r in entry["rle"]], np.int64)
    return np.repeat(values, runs).reshape(height, width)


def nearest_indices(size_in: int, size_out: int) -> np.ndarray:
    d = np.arange(size_out, dtype=np.int64)
    return np.minimum((2 * d + 1) * size_in // (2 * size_out), size_in - 1)


def resize_nearest(mask: np.ndarray, height: int, width: int) -> np.ndarray:
    if mask.shape == (height, width):
        return mask
    return mask[nearest_indices(mask.shape[0], height)][:, nearest_indices(mask.shape[1], width)]


def tensor_size(spec, height: int, width: int) -> tuple[int, int]:
    """The height and width of the tensor `spec` makes of a `height` x `width` image."""
    if spec.crop is not None:
        return tuple(spec.crop)
    if spec.resize is not None:
        return tuple(spec.resize)
    return height, width


def to_image(mask: np.ndarray, spec, height: int, width: int) -> np.ndarray:
    g = spec.geometry(height, width)
    mask = resize_nearest(mask, *tensor_size(spec, height, width))
    top, left = max(0, g.top), max(0, g.left)
    part = mask[top:max(top + 1, g.top + g.resized_height), left:max(left + 1, g.left + g.resized_width)]
    return resize_nearest(part, height, width)


def compare_masks(expected: np.ndarray, got: np.ndarray) -> dict:
    """One image's class map against the reference's (same resolution): the pixels that differ, the agreement and the
    mean IoU of the two maps over the classes either holds, in percent."""
    pixels = int(expected.size)
    if expected.shape != got.shape:
        return {"pixels": pixels, "differing": pixels, "agreement": 0.0, "miou": 0.0,
                "shapes": [list(expected.shape), list(got.shape)]}
    differing = int(np.count_nonzero(expected != got))
    ious = [np.count_nonzero((expected == c) & (got == c)) / np.count_nonzero((expected == c) | (got == c))
            for c in np.union1d(np.unique(expected), np.unique(got))]
    return {"pixels": pixels, "differing": differing,
            "agreement": percent(1.0 - differing / pixels) if pixels else 100.0,
            "miou": percent(np.mean(ious)) if ious else 100.0}


def mask_summary(per_image: Sequence[Mapping]) -> dict:
    """The worst image's agreement and mask IoU, and the pooled agreement, of `compare_masks` results."""
    pixels = sum(m["pixels"] for m in per_image)
    differing = sum(m["differing"] for m in per_image)
    return {"images": len(per_image), "pixels": pixels, "differing": differing,
            "agreement": percent(1.0 - differing / pixels) if pixels else 100.0,
            "min_agreement": min((m["agreement"] for m in per_image), default=100.0),
            "min_miou": min((m["miou"] for m in per_image), default=100.0)}


def golden_tolerance(measured: Mapping, tier: str) -> dict:
    """golden.json's `tolerances.masks`: the pixel agreement a device's golden class maps must reach against the FP32
    reference's, from the worst image `measured` (a `mask_summary`) at build time, less GOLDEN_MARGIN points."""
    floor = max(0.0, math.floor(round((float(measured["min_agreement"]) - GOLDEN_MARGIN) * 100, 6)) / 100)
    return {"min_agreement": floor, "measured": dict(measured, tier=tier),
            "basis": f"class maps vs the fp32 reference's, pixel by pixel: the worst image of tier {tier} on "
                     f"{measured['images']} evaluation images, less {GOLDEN_MARGIN:g} points"}


def masks_truth(paths: Sequence[Path]) -> list[dict]:
    """Mask PNGs (8-bit, one channel; pixel value = class index) as truth entries, in the order given; each read by
    `edgekit.core.images.decode_image`, which checks the header against the image limits before decoding."""
    from edgekit.core.images import decode_image

    entries = []
    for path in paths:
        mask = decode_image(path)
        if mask.ndim != 2:
            raise DataError(f"mask {path} is not an 8-bit one-channel PNG",
                            "save masks as grayscale PNGs whose values are class indices")
        entries.append(encode_rle(mask))
    return entries


def confusion(predicted: Sequence[np.ndarray], truth: Sequence[np.ndarray], classes: int, ignore: int) -> np.ndarray:
    matrix = np.zeros((classes, classes), np.int64)             # [truth, predicted]
    for p, t in zip(predicted, truth):
        p = resize_nearest(p, *t.shape).astype(np.int64).reshape(-1)
        t = t.astype(np.int64).reshape(-1)
        keep = t != ignore
        p, t = p[keep], t[keep]
        if len(t) and (t.max() >= classes or p.max() >= classes):
            raise DataError(f"segmentation: class {max(t.max(), p.max())} in truth or prediction, the task has "
                            f"{classes} classes", "give the task one label per class")
        matrix += np.bincount(t * classes + p, minlength=classes * classes).reshape(classes, classes)
    return matrix


def class_ious(matrix: np.ndarray) -> np.ndarray:
    """IoU per class; NaN for a class in neither truth nor prediction."""
    tp = np.diag(matrix).astype(np.float64)
    union = matrix.sum(axis=0) + matrix.sum(axis=1) - tp
    return np.where(union > 0, tp / np.maximum(union, 1), np.nan)


@dataclass(frozen=True)
class Segmentation(Task):
    labels: tuple[str, ...] = ()
    threshold: float = 0.5
    activation: str = "sigmoid"
    ignore_index: int = 255

    kind = TaskKind.segmentation
    primary = "miou"
    golden_key = "masks"      # golden.json tolerances / tier C summary key of the golden class maps' agreement

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "Segmentation":
        check_options(cls.kind, options, ("labels", "threshold", "activation", "ignore_index"))
        labels = options.get("labels", ())
        if not isinstance(labels, (list, tuple)) or not all(isinstance(n, str) for n in labels):
            raise ConfigError("task segmentation option labels is not a list of class names",
                              'e.g. labels = ["background", "person"]')
        activation = options.get("activation", "sigmoid")
        if activation not in ACTIVATIONS:
            raise ConfigError(f"task segmentation option activation = {activation!r} is unknown",
                              f"use one of {', '.join(ACTIVATIONS)}")
        return cls(tuple(labels), number_option(cls.kind, options, "threshold", 0.5, -1e6, 1e6), activation,
                   int(number_option(cls.kind, options, "ignore_index", 255, 0, 255)))

    def options(self) -> dict:
        found = {"threshold": self.threshold, "activation": self.activation, "ignore_index": self.ignore_index}
        if self.labels:
            found["labels"] = list(self.labels)
        return found

    def class_maps(self, outputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The class of every pixel, uint8 [h, w] per image, at the model's output resolution."""
        if not outputs:
            raise DataError("task segmentation got no model outputs", "the model must return its score maps")
        out = np.asarray(outputs[0])
        if out.ndim == 3:
            return [np.asarray(m).astype(np.uint8) for m in out]
        if out.ndim != 4:
            raise DataError(f"task segmentation reads scores [N, C, h, w] or a class map [N, h, w]; the model's first "
                            f"output has shape {list(out.shape)}", "pick the task kind that matches the model")
        if self.labels and out.shape[1] not in (1, len(self.labels)):
            raise DataError(f"the model's output 0 scores {out.shape[1]} classes, the task names {len(self.labels)}",
                            "give one label per output channel (labels)")
        if out.shape[1] == 1:
            scores = out[:, 0].astype(np.float32)
            if self.activation == "sigmoid":
                scores = np.float32(1.0) / (np.float32(1.0) + np.exp(-scores))
            return [(m > np.float32(self.threshold)).astype(np.uint8) for m in scores]
        return [m.astype(np.uint8) for m in out.argmax(axis=1)]

    def match_outputs(self, reference: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> dict:
        """`mask_summary` of every image's class map in `outputs` against the FP32 `reference`'s."""
        return mask_summary([compare_masks(want, got) for want, got in
                             zip(self.class_maps(reference), self.class_maps(outputs))])

    def golden_tolerance(self, measured: Mapping, tier: str) -> dict:
        return golden_tolerance(measured, tier)

    @property
    def classes(self) -> int:
        return max(len(self.labels), 2)

    def _count(self, maps: Sequence[np.ndarray], truth: Sequence[np.ndarray]) -> int:
        seen = [int(m.max()) for m in maps if m.size] + [int(t[t != self.ignore_index].max()) for t in truth
                                                          if (t != self.ignore_index).any()]
        return max([self.classes - 1] + seen) + 1 if not self.labels else len(self.labels)

    def evaluate(self, outputs: Sequence[np.ndarray], truth: Sequence) -> dict[str, float]:
        maps = self.class_maps(outputs)
        check_count(self.kind, len(maps), truth)
        masks = [decode_rle(t) for t in truth]
        matrix = confusion(maps, masks, self._count(maps, masks), self.ignore_index)
        ious = class_ious(matrix)
        total = matrix.sum()
        return {"miou": percent(np.nanmean(ious)) if np.isfinite(ious).any() else 0.0,
                "pixel_accuracy": percent(np.trace(matrix) / total) if total else 0.0}

    def class_report(self, outputs: Sequence[np.ndarray], truth: Sequence) -> list[dict]:
        maps, masks = self.class_maps(outputs), [decode_rle(t) for t in truth]
        ious = class_ious(confusion(maps, masks, self._count(maps, masks), self.ignore_index))
        return [{"class": c, "label": self.labels[c] if c < len(self.labels) else str(c),
                 "iou": None if np.isnan(v) else percent(v)} for c, v in enumerate(ious)]

    def summary(self, mask: np.ndarray) -> dict:
        """What `edgekit run` prints for a class map: its size and the share of each class present, in percent."""
        counts = np.bincount(mask.reshape(-1), minlength=len(self.labels))
        total = max(1, mask.size)
        return {"size": [int(mask.shape[0]), int(mask.shape[1])],
                "classes": {(self.labels[c] if c < len(self.labels) else str(c)): round(100.0 * n / total, 3)
                            for c, n in enumerate(counts) if n}}

    def in_image(self, result: Mapping, spec, height: int, width: int) -> dict:
        """A postprocess() result mapped onto the `height` x `width` source image: the map resized to the tensor,
        the letterbox border cut off, then resized to the image (nearest, as the C++ core's map_to_image)."""
        mask = to_image(decode_rle(result), spec, height, width)
        return dict(self.summary(mask), **encode_rle(mask))

    def postprocess(self, outputs: Sequence[np.ndarray]) -> list[dict]:
        return [dict(self.summary(m), **encode_rle(m)) for m in self.class_maps(outputs)]

    def predictions(self, outputs: Sequence[np.ndarray]) -> list[dict]:
        return [encode_rle(m) for m in self.class_maps(outputs)]

    def truth_from_json(self, raw: Any) -> list[dict]:
        fix = 'write {"size": [h, w], "rle": [[class, run], ...]} per image (edgekit.tasks.segmentation.masks_truth)'
        if not isinstance(raw, list):
            raise DataError("segmentation truth is not a list (one mask per image)", fix)
        for i, entry in enumerate(raw):
            size = entry.get("size") if isinstance(entry, dict) else None
            rle = entry.get("rle") if isinstance(entry, dict) else None
            if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size)
                    and isinstance(rle, list) and all(isinstance(r, list) and len(r) == 2 and all(
                        isinstance(v, int) and not isinstance(v, bool) for v in r) and 0 <= r[0] <= 255 and r[1] > 0
                        for r in rle)):
                raise DataError(f"segmentation truth of image {i} is not a run-length encoded mask", fix)
            if sum(r[1] for r in rle) != size[0] * size[1]:
                raise DataError(f"segmentation truth of image {i}: runs cover {sum(r[1] for r in rle)} pixels of a "
                                f"{size[0]}x{size[1]} mask", fix)
        return [{"size": list(e["size"]), "rle": [list(r) for r in e["rle"]]} for e in raw]

    def truth_to_json(self, truth: Sequence) -> list:
        return [dict(t) for t in truth]
