"""Calibration / evaluation samples: image folders with a preprocessing spec, or tensors.

The preprocessing spec is the single definition of how pixels become the model's
input. The host uses it here, it is written into every bundle as
`preprocess.json`, and native/'s core implements exactly these steps, in this order:
decode -> colour -> resize -> centre crop -> scale -> (x - mean) / std -> layout -> pad.

Resize modes: `stretch` resizes to exactly [height, width]; `fit_height` (text lines:
PaddleOCR's rec/cls input) resizes to `height` keeping the aspect ratio, at most
`width` wide (width ceil(height * w / h)), and fills the columns to the right with
`pad_value` in the final tensor. With `width_mode = "dynamic"` a fit_height tensor is as wide as
the line itself (PaddleOCR's own resize): a line wider than `resize[1]` is resized to int(height * (w / h))
columns (PaddleOCR's truncation, not ceil), at most `max_width`, and the tensor
is that width rounded up to a multiple of `width_step`, at least `resize[1]`, at most `max_width` (the
rest padded). `letterbox` (detectors) scales the image by
min(height / h, width / w) keeping its aspect ratio (sides rounded half up, at least 1),
centres it (top = (height - new h) // 2, left likewise) and fills the border of the final
tensor with `pad_value`; `to_image` maps boxes in tensor pixels back to the image.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from edgekit.contracts.files import PREPROCESS, REBUILD, schema_ok, write_json
from edgekit.core import limits
from edgekit.core.errors import BundleError, DataError

log = logging.getLogger(__name__)

COLORS = ("rgb", "bgr", "gray")
LAYOUTS = ("NCHW", "NHWC")
INTERPOLATIONS = ("linear", "nearest", "area")
RESIZE_MODES = ("stretch", "fit_height", "letterbox")
WIDTH_MODES = ("fixed", "dynamic")
PREPROCESS_SCHEMA = "edgekit.preprocess/1"


@dataclass(frozen=True)
class PreprocessSpec:
    color: str = "rgb"
    resize: tuple[int, int] | None = None      # (height, width) after decoding
    crop: tuple[int, int] | None = None        # centre crop (height, width) after resizing
    interpolation: str = "linear"
    scale: float = 1.0 / 255.0
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    layout: str = "NCHW"
    resize_mode: str = "stretch"
    pad_value: float = 0.0                     # fit_height / letterbox: the tensor's value outside the image
    width_mode: str = "fixed"                  # fit_height: "dynamic" = the tensor as wide as the line (<= max_width)
    max_width: int | None = None               # dynamic: the widest tensor (and line)
    width_step: int = 32                       # dynamic: tensor widths are multiples of this (fewer shapes)

    def __post_init__(self) -> None:
        if self.color not in COLORS:
            raise DataError(f"preprocess.color is {self.color!r}", f"use one of {', '.join(COLORS)}")
        if self.layout not in LAYOUTS:
            raise DataError(f"preprocess.layout is {self.layout!r}", f"use one of {', '.join(LAYOUTS)}")
        if self.interpolation not in INTERPOLATIONS:
            raise DataError(f"preprocess.interpolation is {self.interpolation!r}", f"use one of {', '.join(INTERPOLATIONS)}")
        channels = 1 if self.color == "gray" else 3
        for key in ("mean", "std"):
            values = getattr(self, key)
            if len(values) not in (1, channels):
                raise DataError(f"preprocess.{key} has {len(values)} values for {channels} channel(s)",
                                f"give 1 or {channels} values")
        for key in ("resize", "crop"):
            size = getattr(self, key)
            if size is not None and (len(size) != 2 or min(size) < 1):
                raise DataError(f"preprocess.{key} is {list(size)}", f"give {key} as [height, width] of positive sizes")
            if size is not None:
                limits.check(DataError, f"preprocess.{key} {list(size)}: its larger side", max(size), "MAX_RESIZE_SIDE",
                             f"give {key} sides of at most {limits.MAX_RESIZE_SIDE} pixels")
        if not isinstance(self.pad_value, (int, float)) or isinstance(self.pad_value, bool):
            raise DataError(f"preprocess.pad_value is {self.pad_value!r}", "give a number")
        if not isinstance(self.scale, (int, float)) or isinstance(self.scale, bool) or not self.scale > 0:
            raise DataError(f"preprocess.scale is {self.scale!r}", "give a positive number, e.g. 0.00392156862745098 (1/255)")
        if any(s == 0 for s in self.std):
            raise DataError("preprocess.std contains 0", "std values divide the input: use non-zero values")
        if self.resize_mode not in RESIZE_MODES:
            raise DataError(f"preprocess.resize_mode is {self.resize_mode!r}", f"use one of {', '.join(RESIZE_MODES)}")
        if self.resize_mode == "fit_height" and (self.resize is None or self.crop is not None):
            raise DataError("preprocess.resize_mode fit_height needs resize = [height, max width] and no crop",
                            "give resize and drop crop, or use resize_mode stretch")
        if self.resize_mode == "letterbox" and (self.resize is None or self.crop is not None):
            raise DataError("preprocess.resize_mode letterbox needs resize = [height, width] and no crop",
                            "give resize and drop crop, or use resize_mode stretch")
        self._check_width_mode()

    def _check_width_mode(self) -> None:
        if self.width_mode not in WIDTH_MODES:
            raise DataError(f"preprocess.width_mode is {self.width_mode!r}", f"use one of {', '.join(WIDTH_MODES)}")
        for key in ("max_width", "width_step"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise DataError(f"preprocess.{key} is {value!r}", f"give {key} as a positive whole number of pixels")
        if self.width_mode == "fixed":
            if self.max_width is not None:
                raise DataError("preprocess.max_width is given with width_mode fixed",
                                'drop max_width, or set width_mode = "dynamic"')
            return
        if self.resize_mode != "fit_height" or self.max_width is None or self.max_width < self.resize[1]:
            raise DataError("preprocess.width_mode dynamic needs resize_mode fit_height and max_width >= resize[1]",
                            'e.g. resize = [48, 320], resize_mode = "fit_height", max_width = 1280')
        limits.check(DataError, f"preprocess.max_width {self.max_width}", self.max_width, "MAX_RESIZE_SIDE",
                     f"give max_width of at most {limits.MAX_RESIZE_SIDE} pixels")

    @property
    def dynamic_width(self) -> bool:
        return self.width_mode == "dynamic"

    def line_width(self, height: int, width: int) -> int:
        """fit_height: the resized line's width (at most resize[1], or max_width when dynamic)."""
        if self.dynamic_width:
            # PaddleOCR's resize_norm_img: with ratio = w / h (double), ceil(H * ratio) when that fits in resize[1],
            # else the tensor's own width int(H * ratio): one column less than ceil, which flipped "office" to
            # "ofice" on PP-OCRv5 rec (bench/bench_ocrv5_system.py)
            wide = self.resize[0] * (width / height)
            fits = math.ceil(wide)
            return max(1, min(self.max_width, fits if fits <= self.resize[1] else int(wide)))
        return max(1, min(self.resize[1], math.ceil(self.resize[0] * width / height)))

    def tensor_width(self, line_width: int) -> int:
        """fit_height: the tensor's width for a resized line `line_width` wide."""
        if not self.dynamic_width:
            return self.resize[1]
        stepped = -(-line_width // self.width_step) * self.width_step
        return min(self.max_width, max(self.resize[1], stepped))

    @property
    def channels(self) -> int:
        return 1 if self.color == "gray" else 3

    def geometry(self, height: int, width: int) -> "Geometry":
        """Where an image of `height` x `width` lands in the tensor (scales and offsets of its pixels)."""
        if self.resize is None:
            h, w, top, left = height, width, 0, 0
        elif self.resize_mode == "letterbox":
            scale = min(self.resize[0] / height, self.resize[1] / width)
            h = max(1, min(self.resize[0], math.floor(height * scale + 0.5)))
            w = max(1, min(self.resize[1], math.floor(width * scale + 0.5)))
            top, left = (self.resize[0] - h) // 2, (self.resize[1] - w) // 2
        elif self.resize_mode == "fit_height":
            h, top, left = self.resize[0], 0, 0
            w = self.line_width(height, width)
        else:
            h, w, top, left = self.resize[0], self.resize[1], 0, 0
        if self.crop is not None:
            top, left = top - (h - self.crop[0]) // 2, left - (w - self.crop[1]) // 2
        return Geometry(height, width, h, w, top, left)

    def to_image(self, boxes: np.ndarray, height: int, width: int) -> np.ndarray:
        """Boxes [K, 4] (x0, y0, x1, y1) in tensor pixels -> the pixels of the `height` x `width` source image."""
        return self.geometry(height, width).to_image(boxes)

    @classmethod
    def from_mapping(cls, raw: Mapping) -> "PreprocessSpec":
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(raw) - known
        if unknown:
            raise DataError(f"unknown preprocess key(s): {', '.join(sorted(unknown))}", f"known keys: {', '.join(sorted(known))}")
        values = dict(raw)
        for key in ("max_width", "width_step"):
            if isinstance(values.get(key), float) and values[key].is_integer():
                values[key] = int(values[key])
        for key, kind in (("resize", int), ("crop", int), ("mean", float), ("std", float)):
            if values.get(key) is None and key in ("resize", "crop"):
                continue
            if key in values:
                given = values[key]
                if not isinstance(given, (list, tuple)) or not all(
                        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in given):
                    raise DataError(f"preprocess.{key} is {given!r}", f"give {key} as a list of numbers")
                values[key] = tuple(kind(v) for v in given)
        return cls(**values)

    def to_json(self) -> dict:
        record = asdict(self)
        if not self.dynamic_width:         # fixed-width files stay as older cores read them
            for key in ("width_mode", "max_width", "width_step"):
                record.pop(key)
        record["order"] = ["decode", "color", "resize", "crop", "scale", "normalize", "layout", "pad"]
        return record

    def apply(self, image: np.ndarray) -> np.ndarray:
        """Turn one decoded BGR/gray uint8 image (HxW or HxWxC) into a CHW or HWC float32 tensor."""
        import cv2

        interp = {"linear": cv2.INTER_LINEAR, "nearest": cv2.INTER_NEAREST, "area": cv2.INTER_AREA}[self.interpolation]
        if image.ndim == 2:
            image = image[:, :, None]
        if self.color == "gray":
            image = image if image.shape[2] == 1 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)[:, :, None]
        else:
            if image.shape[2] == 1:
                image = np.repeat(image, 3, axis=2)
            if self.color == "rgb":
                image = image[:, :, ::-1]
        width, box = None, None
        if self.resize is not None:
            h, w = self.resize
            if self.resize_mode == "letterbox":
                g = self.geometry(image.shape[0], image.shape[1])
                box, h, w = g, g.resized_height, g.resized_width
            if self.resize_mode == "fit_height":
                w = self.line_width(image.shape[0], image.shape[1])
                width = self.tensor_width(w)
            image = cv2.resize(np.ascontiguousarray(image), (w, h), interpolation=interp)
            if image.ndim == 2:
                image = image[:, :, None]
        if self.crop is not None:
            ch, cw = self.crop
            h, w = image.shape[:2]
            if ch > h or cw > w:
                raise DataError(f"crop {ch}x{cw} is larger than the resized image {h}x{w}", "make preprocess.crop <= preprocess.resize")
            top, left = (h - ch) // 2, (w - cw) // 2
            image = image[top:top + ch, left:left + cw]
        x = image.astype(np.float32) * np.float32(self.scale)
        x = (x - np.asarray(self.mean, np.float32)) / np.asarray(self.std, np.float32)
        if width is not None and x.shape[1] < width:
            padded = np.full((x.shape[0], width, x.shape[2]), np.float32(self.pad_value), np.float32)
            padded[:, :x.shape[1]] = x
            x = padded
        if box is not None:
            canvas = np.full((self.resize[0], self.resize[1], x.shape[2]), np.float32(self.pad_value), np.float32)
            canvas[box.top:box.top + box.resized_height, box.left:box.left + box.resized_width] = x
            x = canvas
        if self.layout == "NCHW":
            x = x.transpose(2, 0, 1)
        return np.ascontiguousarray(x, dtype=np.float32)


@dataclass(frozen=True)
class Geometry:
    """An image's place in the tensor: resized to resized_height x resized_width, its top-left corner at
    (top, left) (negative after a crop). A tensor pixel x maps to image pixel (x - left) * width / resized_width."""

    height: int
    width: int
    resized_height: int
    resized_width: int
    top: int
    left: int

    def to_image(self, boxes: np.ndarray) -> np.ndarray:
        boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
        sx = np.float32(self.width / self.resized_width)
        sy = np.float32(self.height / self.resized_height)
        x = np.clip((boxes[:, 0::2] - np.float32(self.left)) * sx, 0, np.float32(self.width))
        y = np.clip((boxes[:, 1::2] - np.float32(self.top)) * sy, 0, np.float32(self.height))
        return np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1).astype(np.float32)

    def point_to_image(self, x, y):
        """A point in tensor pixels -> image pixels, in double precision and clamped to the image (OCR quads,
        rounded to 0.01 px after this). x and y keep their type, since numpy and Python round differently."""
        sx, sy = self.width / self.resized_width, self.height / self.resized_height
        return (min(max((x - self.left) * sx, 0.0), float(self.width)),
                min(max((y - self.top) * sy, 0.0), float(self.height)))

    def to_tensor(self, boxes: np.ndarray) -> np.ndarray:
        """Boxes in image pixels -> tensor pixels (truth in original pixels, e.g. COCO, for evaluation)."""
        boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
        sx, sy = self.resized_width / self.width, self.resized_height / self.height
        return np.stack([boxes[:, 0] * sx + self.left, boxes[:, 1] * sy + self.top,
                         boxes[:, 2] * sx + self.left, boxes[:, 3] * sy + self.top], axis=1)


# ---------------------------------------------------------------- preprocess.json

@dataclass(frozen=True)
class PreprocessFile:
    """A bundle's preprocess.json: how an image becomes the model's input, or spec None for a tensor-data build."""

    inputs: tuple[str, ...]
    spec: PreprocessSpec | None

    def write(self, folder: Path) -> None:
        self.write_file(folder / PREPROCESS)

    def write_file(self, file: Path) -> None:
        write_json(file, {"schema": PREPROCESS_SCHEMA, "inputs": list(self.inputs),
                          "preprocess": self.spec.to_json() if self.spec is not None else None})

    @classmethod
    def read(cls, folder: Path) -> "PreprocessFile":
        """The bundle's preprocessing; a bundle without the file has none (spec None)."""
        file = folder / PREPROCESS
        if not file.is_file():
            return cls((), None)
        raw = limits.read_json(file, BundleError, REBUILD)
        if not isinstance(raw, dict) or not isinstance(raw.get("preprocess", {}), (dict, type(None))) \
                or not isinstance(raw.get("inputs", []), list):
            raise BundleError(f"{file} is not a preprocess.json (an object with a preprocess object or null)", REBUILD)
        schema_ok(raw, PREPROCESS_SCHEMA, file)
        spec = raw.get("preprocess")
        # "order" documents the steps for the C++ core; PreprocessSpec's order is fixed
        parsed = PreprocessSpec.from_mapping({k: v for k, v in spec.items() if k != "order"}) if spec else None
        return cls(tuple(str(name) for name in raw.get("inputs", [])), parsed)
