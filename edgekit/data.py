"""Calibration / evaluation samples: image folders with a preprocessing spec, or tensors.

The preprocessing spec is the single definition of how pixels become the model's
input. The host uses it here, it is written into every bundle as
`preprocess.json`, and native/'s core implements exactly these steps, in this order:
decode -> colour -> resize -> centre crop -> scale -> (x - mean) / std -> layout -> pad.

Resize modes: `stretch` resizes to exactly [height, width]; `fit_height` (text lines:
PaddleOCR's rec/cls input) resizes to `height` keeping the aspect ratio, at most
`width` wide (width ceil(height * w / h)), and fills the columns to the right with
`pad_value` in the final tensor.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from .errors import DataError

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")
COLORS = ("rgb", "bgr", "gray")
LAYOUTS = ("NCHW", "NHWC")
INTERPOLATIONS = ("linear", "nearest", "area")
RESIZE_MODES = ("stretch", "fit_height")


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
    pad_value: float = 0.0                     # fit_height: the tensor's value right of the resized line

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
        if not isinstance(self.scale, (int, float)) or isinstance(self.scale, bool) or not self.scale > 0:
            raise DataError(f"preprocess.scale is {self.scale!r}", "give a positive number, e.g. 0.00392156862745098 (1/255)")
        if any(s == 0 for s in self.std):
            raise DataError("preprocess.std contains 0", "std values divide the input: use non-zero values")
        if self.resize_mode not in RESIZE_MODES:
            raise DataError(f"preprocess.resize_mode is {self.resize_mode!r}", f"use one of {', '.join(RESIZE_MODES)}")
        if self.resize_mode == "fit_height" and (self.resize is None or self.crop is not None):
            raise DataError("preprocess.resize_mode fit_height needs resize = [height, max width] and no crop",
                            "give resize and drop crop, or use resize_mode stretch")

    @property
    def channels(self) -> int:
        return 1 if self.color == "gray" else 3

    @classmethod
    def from_mapping(cls, raw: Mapping) -> "PreprocessSpec":
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(raw) - known
        if unknown:
            raise DataError(f"unknown preprocess key(s): {', '.join(sorted(unknown))}", f"known keys: {', '.join(sorted(known))}")
        values = dict(raw)
        for key in ("resize", "crop"):
            if values.get(key) is not None:
                values[key] = tuple(int(v) for v in values[key])
        for key in ("mean", "std"):
            if key in values:
                values[key] = tuple(float(v) for v in values[key])
        return cls(**values)

    def to_json(self) -> dict:
        record = asdict(self)
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
        width = None
        if self.resize is not None:
            h, w = self.resize
            if self.resize_mode == "fit_height":
                width, w = w, max(1, min(w, math.ceil(h * image.shape[1] / image.shape[0])))
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
        if self.layout == "NCHW":
            x = x.transpose(2, 0, 1)
        return np.ascontiguousarray(x, dtype=np.float32)


def array_digest(arrays: Mapping[str, np.ndarray]) -> str:
    """sha256 over named arrays (name, dtype, shape, bytes), independent of the mapping's order."""
    sha = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        sha.update(f"{name}:{value.dtype.str}:{list(value.shape)}".encode())
        sha.update(value.tobytes())
    return sha.hexdigest()


def spread_indices(total: int, n: int) -> np.ndarray:
    """`n` indices evenly spaced over `total` items (all of them when n >= total)."""
    if n >= total:
        return np.arange(total, dtype=np.int64)
    return np.linspace(0, total - 1, n).round().astype(np.int64)


@dataclass(frozen=True)
class Samples:
    """A batch of model inputs keyed by feed name, optionally with integer labels."""

    inputs: Mapping[str, np.ndarray]
    labels: np.ndarray | None = None
    files: tuple[str, ...] = field(default_factory=tuple)
    source: str = ""

    def __len__(self) -> int:
        return len(next(iter(self.inputs.values())))

    def digest(self, with_labels: bool = False) -> str:
        """Identifies the exact tensors a build used (and their labels, when asked)."""
        arrays = dict(self.inputs)
        if with_labels and self.labels is not None:
            arrays["\0labels"] = np.asarray(self.labels, np.int64)   # a name no feed can have
        return array_digest(arrays)

    def spread(self, n: int) -> "Samples":
        """`n` samples evenly spaced over the set (folders are read class by class, so head() is one class)."""
        if n >= len(self):
            return self
        picks = spread_indices(len(self), n)
        return Samples({k: v[picks] for k, v in self.inputs.items()},
                       None if self.labels is None else self.labels[picks],
                       tuple(self.files[i] for i in picks) if self.files else (), self.source)

    def head(self, n: int) -> "Samples":
        return Samples({k: v[:n] for k, v in self.inputs.items()},
                       None if self.labels is None else self.labels[:n], self.files[:n], self.source)


def read_labels(path: Path) -> list[str]:
    try:
        names = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise DataError(f"cannot read labels file {path}: {exc.strerror}", "give a text file with one class name per line") from exc
    if not names:
        raise DataError(f"labels file {path} is empty", "give a text file with one class name per line")
    return names


def _image_files(folder: Path) -> list[tuple[Path, str | None]]:
    """All images below `folder`: (path, class folder name or None), sorted for reproducibility."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file():
            rel = path.relative_to(folder)
            found.append((path, rel.parts[0] if len(rel.parts) > 1 else None))
    return found


def decode_image(path: Path) -> np.ndarray:
    """An image file as the preprocessing spec takes it: uint8, BGR (HxWx3) or gray (HxW); alpha dropped."""
    import cv2

    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise DataError(f"cannot decode image {path}", "remove or replace the file (PNG, JPEG, BMP or WebP)")
    if image.ndim == 3 and image.shape[2] == 4:
        image = cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    if image.dtype != np.uint8:
        raise DataError(f"image {path} is {image.dtype}, not 8-bit", "convert the images to 8-bit")
    return image


def image_files(folder: Path) -> list[Path]:
    """The images below `folder`, sorted (the order every tool reads them in)."""
    return [path for path, _ in _image_files(folder)]


def load_images(folder: Path, spec: PreprocessSpec, feed_name: str, labels: Sequence[str] | None = None) -> Samples:
    if not folder.is_dir():
        raise DataError(f"data folder {folder} does not exist", "pass an existing folder of images or a .npz file")
    files = _image_files(folder)
    if not files:
        raise DataError(f"data folder {folder} holds no images ({', '.join(IMAGE_SUFFIXES)})",
                        "put images in it (class sub-folders give labels) or pass a .npz file")
    tensors, label_ids = [], []
    index = {name: i for i, name in enumerate(labels)} if labels else None
    for path, klass in files:
        tensors.append(spec.apply(decode_image(path)))
        if index is not None and klass is not None:
            if klass not in index:
                raise DataError(f"class folder {klass!r} of {path} is not in the labels file",
                                "add it to the labels file or rename the folder")
            label_ids.append(index[klass])
    shapes = {t.shape for t in tensors}
    if len(shapes) > 1:
        raise DataError(f"images in {folder} give tensors of different shapes {sorted(shapes)[:3]}",
                        "set preprocess.resize (and crop) so every image becomes the model's input size")
    has_labels = index is not None and len(label_ids) == len(files)
    return Samples(
        {feed_name: np.stack(tensors)},
        np.asarray(label_ids, np.int64) if has_labels else None,
        tuple(str(p.relative_to(folder)) for p, _ in files),
        str(folder),
    )


def load_tensors(path: Path, feed_names: Sequence[str]) -> Samples:
    """A `.npy` (one input) or `.npz` (arrays named after the feeds, optional `labels`)."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read tensors from {path}: {exc}", "give a .npy or .npz written by numpy") from exc
    if isinstance(loaded, np.ndarray):
        if len(feed_names) != 1:
            raise DataError(f"{path} holds one array but the model has {len(feed_names)} inputs",
                            f"use a .npz with arrays named {', '.join(feed_names)}")
        return Samples({feed_names[0]: loaded}, None, (), str(path))
    with loaded:
        keys = set(loaded.files)
        # np.savez(path, array) names a positional array arr_0: that is the one input of a single-input model
        if len(feed_names) == 1 and feed_names[0] not in keys and keys - {"labels"} == {"arr_0"}:
            names = {feed_names[0]: "arr_0"}
        else:
            missing = [n for n in feed_names if n not in keys]
            if missing:
                raise DataError(f"{path} has no array for input(s) {', '.join(missing)} (it has {', '.join(sorted(keys))})",
                                "name the arrays after the model's inputs")
            names = {n: n for n in feed_names}
        try:
            inputs = {n: loaded[k] for n, k in names.items()}
            labels = loaded["labels"] if "labels" in keys else None
        except ValueError as exc:    # object arrays need pickle, which is refused
            raise DataError(f"cannot read arrays from {path}: {exc}", "save plain numeric arrays with numpy") from exc
    for name, arr in inputs.items():
        if arr.dtype.kind not in "fiub":
            raise DataError(f"array {name!r} in {path} has dtype {arr.dtype}", "save numeric arrays")
    if labels is not None:
        if labels.dtype.kind not in "iu" or labels.ndim != 1:
            raise DataError(f"labels in {path} are {labels.dtype} with shape {list(labels.shape)}",
                            "save labels as a 1-D integer array of class indices")
        labels = labels.astype(np.int64)
    sizes = {len(v) for v in inputs.values()}
    if len(sizes) != 1 or (labels is not None and len(labels) not in sizes):
        raise DataError(f"{path}: arrays have different sample counts", "give every array the same first dimension")
    return Samples(inputs, labels, (), str(path))


def load_samples(path: Path, feed_names: Sequence[str], spec: PreprocessSpec | None,
                 labels: Sequence[str] | None) -> Samples:
    if path.suffix in (".npy", ".npz"):
        if not path.is_file():
            raise DataError(f"tensor file {path} does not exist", "check the path")
        samples = load_tensors(path, feed_names)
    elif path.is_file():
        raise DataError(f"{path} is neither an image folder nor a .npy/.npz file", "pass a folder of images or a .npz")
    else:
        if spec is None:
            raise DataError(f"{path} is an image folder but no preprocessing is configured",
                            "add a [preprocess] table to edgekit.toml (color, resize, mean, std, layout)")
        if len(feed_names) != 1:
            raise DataError("image folders feed single-input models only", "use a .npz with one array per input")
        samples = load_images(path, spec, feed_names[0], labels)
    if len(samples) == 0:
        raise DataError(f"{path} holds no samples", "give at least one sample")
    for name, arr in samples.inputs.items():
        if not np.isfinite(arr).all():
            raise DataError(f"input {name!r} from {path} contains NaN or Inf", "clean the data")
    return samples


def write_preprocess(path: Path, spec: PreprocessSpec | None, feed_names: Sequence[str]) -> None:
    payload = {"inputs": list(feed_names), "preprocess": spec.to_json() if spec else None}
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
