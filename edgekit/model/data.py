"""Calibration / evaluation samples: image folders read through the preprocessing spec
(edgekit/contracts/preprocess.py), or tensors from .npy/.npz files, checked against the limits."""

from __future__ import annotations

import hashlib
import logging
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.core import limits
from edgekit.core.errors import DataError

log = logging.getLogger(__name__)

from edgekit.core.images import IMAGE_SUFFIXES, decode_image, image_entries
from edgekit.contracts.preprocess import PreprocessSpec

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


def load_images(folder: Path, spec: PreprocessSpec, feed_name: str, labels: Sequence[str] | None = None) -> Samples:
    if not folder.is_dir():
        raise DataError(f"data folder {folder} does not exist", "pass an existing folder of images or a .npz file")
    files = image_entries(folder)
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
    if len(shapes) > 1 and spec.dynamic_width:
        tensors = _as_wide_as_the_widest(tensors, spec)
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


def _as_wide_as_the_widest(tensors: list[np.ndarray], spec: PreprocessSpec) -> list[np.ndarray]:
    """Lines of a dynamic-width spec, each at its own width, padded on the right with pad_value to the widest of the
    folder: one batch, as PaddleOCR pads a batch of lines (squeezing them to resize[1] would change what they read)."""
    axis = 2 if spec.layout == "NCHW" else 1
    widest = max(t.shape[axis] for t in tensors)
    out = []
    for t in tensors:
        pad = [(0, 0)] * t.ndim
        pad[axis] = (0, widest - t.shape[axis])
        out.append(np.pad(t, pad, constant_values=np.float32(spec.pad_value)) if widest > t.shape[axis] else t)
    return out


def _npy_header(handle, what: str, error) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a .npy header (the handle left at the data), refusing object arrays and oversized ones."""
    from numpy.lib import format as npformat

    try:
        version = npformat.read_magic(handle)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"format version {version}")
        read = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
        shape, _fortran, dtype = read(handle)
    except (ValueError, OSError, EOFError, SyntaxError, tokenize.TokenError) as exc:
        # numpy tokenizes the header's dict: one never closed is a TokenError, not a ValueError
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
    limits (edgekit/core/limits.py) before it is read."""
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
IMPORTED_PREFIX = "x2paddle_"   # X2Paddle names the feed of ONNX input `x` `x2paddle_x` (export/onnx_import.py)


def geometry_name(feed: str) -> str | None:
    """The geometry input a feed is: "im_shape" or "scale_factor", so named in the program or in the ONNX model
    X2Paddle imported it from; None for any other feed."""
    name = feed[len(IMPORTED_PREFIX):] if feed.startswith(IMPORTED_PREFIX) else feed
    return name if name in GEOMETRY_FEEDS else None


def geometry_values(name: str, tensor_hw: tuple[int, int]) -> np.ndarray:
    """What a geometry feed holds for every image of an H x W tensor: im_shape (H, W), scale_factor (1, 1)."""
    kind = geometry_name(name)
    if kind == "im_shape":
        return np.asarray(tensor_hw, np.float32)
    if kind == "scale_factor":
        return np.ones(2, np.float32)
    raise ValueError(f"{name!r} is not a geometry feed")


def geometry_rows(values: Mapping[str, Sequence[float]], count: int) -> dict[str, np.ndarray]:
    """Geometry feeds as fed for `count` images: each feed's value repeated, [count, 2] float32."""
    return {name: np.tile(np.asarray(value, np.float32), (count, 1)) for name, value in values.items()}


def with_geometry(samples: Samples, feed_names: Sequence[str], image: str, layout: str) -> Samples:
    """`samples` of the image feed, with the geometry feeds among `feed_names` added ([N, 2] each)."""
    names = [n for n in feed_names if geometry_name(n)]
    if not names:
        return samples
    arr = samples.inputs[image]
    hw = (arr.shape[2], arr.shape[3]) if layout == "NCHW" else (arr.shape[1], arr.shape[2])
    added = geometry_rows({n: geometry_values(n, (int(hw[0]), int(hw[1]))) for n in names}, len(arr))
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
        images = [n for n in feed_names if not geometry_name(n)]
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

