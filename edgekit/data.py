"""Calibration / evaluation samples: image folders with a preprocessing spec, or tensors.

The preprocessing spec is the single definition of how pixels become the model's
input. The host uses it here, it is written into every bundle as
`preprocess.json`, and native/'s core implements exactly these steps, in this order:
decode -> colour -> resize -> centre crop -> scale -> (x - mean) / std -> layout -> pad.

Resize modes: `stretch` resizes to exactly [height, width]; `fit_height` (text lines:
PaddleOCR's rec/cls input) resizes to `height` keeping the aspect ratio, at most
`width` wide (width ceil(height * w / h)), and fills the columns to the right with
`pad_value` in the final tensor. With `width_mode = "dynamic"` a fit_height tensor is as wide as
the line itself (PaddleOCR's own resize): the line is resized to at most `max_width` columns and the tensor
is that width rounded up to a multiple of `width_step`, at least `resize[1]`, at most `max_width` (the
rest padded). `letterbox` (detectors) scales the image by
min(height / h, width / w) keeping its aspect ratio (sides rounded half up, at least 1),
centres it (top = (height - new h) // 2, left likewise) and fills the border of the final
tensor with `pad_value`; `to_image` maps boxes in tensor pixels back to the image.
"""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from . import limits
from .errors import DataError

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")
COLORS = ("rgb", "bgr", "gray")
LAYOUTS = ("NCHW", "NHWC")
INTERPOLATIONS = ("linear", "nearest", "area")
RESIZE_MODES = ("stretch", "fit_height", "letterbox")
WIDTH_MODES = ("fixed", "dynamic")


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
        cap = self.max_width if self.dynamic_width else self.resize[1]
        return max(1, min(cap, math.ceil(self.resize[0] * width / height)))

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

    def to_tensor(self, boxes: np.ndarray) -> np.ndarray:
        """Boxes in image pixels -> tensor pixels (truth in original pixels, e.g. COCO, for evaluation)."""
        boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
        sx, sy = self.resized_width / self.width, self.resized_height / self.height
        return np.stack([boxes[:, 0] * sx + self.left, boxes[:, 1] * sy + self.top,
                         boxes[:, 2] * sx + self.left, boxes[:, 3] * sy + self.top], axis=1)


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

    def without(self, names: Sequence[str]) -> "Samples":
        """The same samples without the inputs `names` (feeds bound into the graph)."""
        return Samples({k: v for k, v in self.inputs.items() if k not in names}, self.labels, self.files, self.source)

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
    """An image file as the preprocessing spec takes it: uint8, BGR (HxWx3) or gray (HxW); alpha dropped.

    The header's dimensions are checked against `limits.MAX_IMAGE_PIXELS` before the decoder
    allocates anything (native/'s decoder refuses the same images).
    """
    import cv2

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read image {path}: {exc.strerror}", "check the path") from exc
    size = image_size(data)
    if size is None:
        raise DataError(f"cannot decode image {path}: not a PNG, JPEG, BMP or WebP file",
                        "remove or replace the file (PNG, JPEG, BMP or WebP)")
    limits.check_image(DataError, f"image {path}", *size, image_format=image_format(data), file_bytes=len(data))
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED) if min(size) > 0 else None
    if image is None:
        raise DataError(f"cannot decode image {path}", "remove or replace the file (PNG, JPEG, BMP or WebP)")
    if image.ndim == 3 and image.shape[2] == 4:
        image = cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    if image.dtype != np.uint8:
        raise DataError(f"image {path} is {image.dtype}, not 8-bit", "convert the images to 8-bit")
    return image


_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def image_format(data: bytes) -> str | None:
    """"png", "jpeg", "bmp" or "webp" by the file's first bytes (what image_size reads); None for anything else."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:2] == b"BM":
        return "bmp"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:2] == b"\xff\xd8":
        return "jpeg"
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, JPEG, BMP or WebP header; None for anything else or a truncated header."""
    def u(offset: int, size: int, order: str = "big") -> int | None:
        chunk = data[offset:offset + size]
        return int.from_bytes(chunk, order) if len(chunk) == size else None

    kind = image_format(data)
    if kind == "png" and data[12:16] == b"IHDR":
        width, height = u(16, 4), u(20, 4)
        return None if height is None else (width, height)
    if kind == "bmp":
        if u(14, 4, "little") == 12:                       # OS/2 BITMAPCOREHEADER: 16-bit sizes
            width, height = u(18, 2, "little"), u(20, 2, "little")
        else:
            width, height = u(18, 4, "little"), u(22, 4, "little")
            if height is not None:
                width = width if width < 1 << 31 else (1 << 32) - width      # int32, may be negative (top-down)
                height = height if height < 1 << 31 else (1 << 32) - height
        return None if height is None else (width, height)
    if kind == "webp":
        chunk = data[12:16]
        if chunk == b"VP8 " and u(26, 2, "little") is not None and u(28, 2, "little") is not None:
            return u(26, 2, "little") & 0x3FFF, u(28, 2, "little") & 0x3FFF
        if chunk == b"VP8L" and u(21, 4, "little") is not None:
            bits = u(21, 4, "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        if chunk == b"VP8X" and u(27, 3, "little") is not None:
            return u(24, 3, "little") + 1, u(27, 3, "little") + 1
        return None
    if kind == "jpeg":
        at = 2
        while at + 4 <= len(data):                         # one step per segment: linear in the file's size
            if data[at] != 0xFF:
                return None
            marker = data[at + 1]
            if marker == 0xFF:                             # fill byte
                at += 1
                continue
            if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:
                at += 2
                continue
            length = u(at + 2, 2)
            if marker in _JPEG_SOF:
                height, width = u(at + 5, 2), u(at + 7, 2)
                return None if width is None else (width, height)
            if marker in (0xD9, 0xDA) or length is None or length < 2:
                return None                                # image data before any frame header
            at += 2 + length
    return None


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


def _npy_header(handle, what: str, error) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a .npy header (the handle left at the data), refusing object arrays and oversized ones."""
    from numpy.lib import format as npformat

    try:
        version = npformat.read_magic(handle)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"format version {version}")
        read = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
        shape, _fortran, dtype = read(handle)
    except (ValueError, OSError, EOFError) as exc:
        raise error(f"cannot read tensors from {what}: not a .npy array numpy can read ({exc})",
                    "write it with numpy.save") from exc
    if dtype.hasobject:
        raise error(f"cannot read arrays from {what}: it holds Python objects (dtype {dtype})",
                    "save plain numeric arrays with numpy")
    limits.check_tensor(error, what, shape, dtype.itemsize)
    return tuple(int(d) for d in shape), dtype


def read_npy(path: Path, error=DataError, shape: tuple[int, ...] | None = None, dtype: str | None = None) -> np.ndarray:
    """A .npy file from untrusted input: its header checked (the limits, the bytes it holds, and the shape and dtype
    the caller expects) before the array is read."""
    from numpy.lib import format as npformat

    try:
        with Path(path).open("rb") as handle:
            found_shape, found_dtype = _npy_header(handle, f"{path}", error)
            stored = Path(path).stat().st_size - handle.tell()
            want = limits.tensor_bytes(found_shape, found_dtype.itemsize)
            if stored != want:
                raise error(f"{path} declares {list(found_shape)} {found_dtype} ({want:,} bytes) but holds {stored:,} "
                            "bytes of data", "write it again with numpy.save")
            if shape is not None and (found_shape != tuple(shape) or found_dtype.name != dtype):
                raise error(f"{path} is {found_dtype.name} {list(found_shape)}, but the manifest says {dtype} "
                            f"{list(shape)}", "rebuild the bundle with `edgekit build`")
            handle.seek(0)
            return npformat.read_array(handle, allow_pickle=False)
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror}", "check the path") from exc


def _check_npz(archive, path: Path) -> None:
    """Every member's declared size, expansion ratio and .npy header within the limits, before any is decompressed."""
    for info in archive.infolist():
        what = f"member {info.filename!r} of {path}"
        limits.check(DataError, f"{what} uncompressed, in bytes", info.file_size, "MAX_TENSOR_BYTES")
        ratio = info.file_size // max(1, info.compress_size)
        if info.file_size > limits.NPZ_RATIO_FLOOR and ratio > limits.MAX_NPZ_RATIO:
            raise limits.refuse(DataError, f"the expansion ratio of {what} ({info.file_size:,} bytes from "
                                f"{info.compress_size:,})", ratio, "MAX_NPZ_RATIO")
        if not info.filename.endswith(".npy"):
            continue
        with archive.open(info) as member:
            shape, dtype = _npy_header(member, what, DataError)
            want = limits.tensor_bytes(shape, dtype.itemsize)
            if info.file_size - member.tell() != want:
                raise DataError(f"{what} declares {list(shape)} {dtype} ({want:,} bytes) but holds "
                                f"{info.file_size - member.tell():,} bytes", "write the file again with numpy.savez")


def load_tensors(path: Path, feed_names: Sequence[str]) -> Samples:
    """A `.npy` (one input) or `.npz` (arrays named after the feeds, optional `labels`), each checked against the
    limits (edgekit/limits.py) before it is read."""
    import zipfile

    if zipfile.is_zipfile(path):
        try:
            loaded = np.load(path, allow_pickle=False)
            _check_npz(loaded.zip, path)
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise DataError(f"cannot read tensors from {path}: {exc}", "give a .npy or .npz written by numpy") from exc
    else:
        loaded = read_npy(path)
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
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:    # a corrupt member; object arrays (pickle)
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


# PaddleDetection's inputs beside the image (export/geometry.py binds them into the graph): fed as the tensor sees the
# image, so that the graph's boxes stay in model-input pixels and the bundle undoes the resize itself
GEOMETRY_FEEDS = ("im_shape", "scale_factor")


def geometry_values(name: str, tensor_hw: tuple[int, int]) -> np.ndarray:
    """What a geometry feed holds for every image of an H x W tensor: im_shape (H, W), scale_factor (1, 1)."""
    if name == "im_shape":
        return np.asarray(tensor_hw, np.float32)
    if name == "scale_factor":
        return np.ones(2, np.float32)
    raise ValueError(f"{name!r} is not a geometry feed")


def with_geometry(samples: Samples, feed_names: Sequence[str], image: str, layout: str) -> Samples:
    """`samples` of the image feed, with the geometry feeds among `feed_names` added ([N, 2] each)."""
    names = [n for n in feed_names if n in GEOMETRY_FEEDS]
    if not names:
        return samples
    arr = samples.inputs[image]
    hw = (arr.shape[2], arr.shape[3]) if layout == "NCHW" else (arr.shape[1], arr.shape[2])
    added = {n: np.tile(geometry_values(n, (int(hw[0]), int(hw[1]))), (len(arr), 1)) for n in names}
    return Samples({**samples.inputs, **added}, samples.labels, samples.files, samples.source)


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
        images = [n for n in feed_names if n not in GEOMETRY_FEEDS]
        if len(images) != 1:
            raise DataError("image folders feed single-input models only (and PaddleDetection's im_shape and "
                            "scale_factor beside the image)", "use a .npz with one array per input")
        samples = with_geometry(load_images(path, spec, images[0], labels), feed_names, images[0], spec.layout)
    if len(samples) == 0:
        raise DataError(f"{path} holds no samples", "give at least one sample")
    for name, arr in samples.inputs.items():
        if not np.isfinite(arr).all():
            raise DataError(f"input {name!r} from {path} contains NaN or Inf", "clean the data")
    return samples

