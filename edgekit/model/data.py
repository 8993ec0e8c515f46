"""Calibration / evaluation samples: image folders read through the preprocessing spec
(edgekit/contracts/preprocess.py), or tensors from .npy/.npz files, checked against the limits."""

from __future__ import annotations

import hashlib
import logging
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from edgekit.core import limits
from edgekit.core.errors import DataError, InputModelError

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


# Lines of a dynamic-width folder run in groups of similar width: each line is padded to the first of the widths
# step, then each GROUP_RATIO times the last (rounded up to step), that holds it (fixed edges, so a line reads the
# same whichever other lines run beside it). About the padding PaddleOCR's batches of six lines sorted by width
# leave. Padding every line to the folder's widest instead is what no deployment does, and it changes what a
# recogniser reads: PP-OCRv5 mobile rec's INT8 .nb read 15 of 16 page crops each at its own width and 10 of 16
# padded to the widest (bench/bench_rec_widths.py).
GROUP_RATIO = 1.25


def group_width(width: int, step: int, widest: int) -> int:
    """The width a line `width` wide runs at among lines of a batch `widest` wide (GROUP_RATIO's fixed edges)."""
    edge = step
    while edge < width:
        edge = max(edge + step, -(-int(edge * GROUP_RATIO) // step) * step)
    return min(edge, widest)


@dataclass(frozen=True)
class Lines:
    """The text lines of a dynamic-width image folder: the batch is padded on the right to its widest line; `widths`
    are each line's own tensor width along `axis` (of the batch array) of the input `feed`, multiples of `step`."""

    feed: str
    axis: int
    widths: tuple[int, ...]
    step: int

    def take(self, picks: Sequence[int]) -> "Lines":
        return Lines(self.feed, self.axis, tuple(self.widths[int(i)] for i in picks), self.step)

    def groups(self, widest: int) -> list[tuple[np.ndarray, int]]:
        """(indices in sample order, the width they run at) of a batch `widest` wide, narrowest group first."""
        at = np.asarray([group_width(w, self.step, widest) for w in self.widths], np.int64)
        return [(np.flatnonzero(at == width), int(width)) for width in np.unique(at)]


@dataclass(frozen=True)
class Samples:
    """A batch of model inputs keyed by feed name, optionally with integer labels; `lines` when they are text lines
    of a dynamic-width folder, padded to the widest (run them with `run_lines`)."""

    inputs: Mapping[str, np.ndarray]
    labels: np.ndarray | None = None
    files: tuple[str, ...] = field(default_factory=tuple)
    source: str = ""
    lines: Lines | None = None

    def __len__(self) -> int:
        return len(next(iter(self.inputs.values())))

    def digest(self, with_labels: bool = False) -> str:
        """Identifies the exact tensors a build used (and their labels, when asked)."""
        arrays = dict(self.inputs)
        if with_labels and self.labels is not None:
            arrays["\0labels"] = np.asarray(self.labels, np.int64)   # a name no feed can have
        if self.lines is not None:      # the same tensors run in width groups give other outputs
            arrays["\0widths"] = np.asarray(self.lines.widths, np.int64)
        return array_digest(arrays)

    def take(self, picks: Sequence[int]) -> "Samples":
        """The samples at `picks`, in that order."""
        picks = np.asarray(picks, np.int64)
        return Samples({k: v[picks] for k, v in self.inputs.items()},
                       None if self.labels is None else self.labels[picks],
                       tuple(self.files[i] for i in picks) if self.files else (), self.source,
                       None if self.lines is None else self.lines.take(picks))

    def spread(self, n: int) -> "Samples":
        """`n` samples evenly spaced over the set (folders are read class by class, so head() is one class)."""
        if n >= len(self):
            return self
        return self.take(spread_indices(len(self), n))

    def without(self, names: Sequence[str]) -> "Samples":
        """The same samples without the inputs `names` (feeds bound into the graph)."""
        lines = None if self.lines is None or self.lines.feed in names else self.lines
        return Samples({k: v for k, v in self.inputs.items() if k not in names}, self.labels, self.files, self.source,
                       lines)

    def head(self, n: int) -> "Samples":
        return self.take(np.arange(min(n, len(self))))

    def with_inputs(self, inputs: Mapping[str, np.ndarray]) -> "Samples":
        """The same samples with `inputs` (the same count, e.g. cast or renamed; a renamed lines feed follows)."""
        lines = self.lines
        if lines is not None and lines.feed not in inputs:
            lines = None
        return Samples(inputs, self.labels, self.files, self.source, lines)


def width_groups(samples: Samples) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """(indices in sample order, their inputs) per group of similar width (`Lines.groups`), the lines' feed cut to
    the group's width (the columns beyond are padding for all of its lines); one group of everything otherwise."""
    lines = samples.lines
    everything = np.arange(len(samples))
    if lines is None or len(samples) == 0:
        return [(everything, dict(samples.inputs))]
    width = samples.inputs[lines.feed].shape[lines.axis]
    groups = lines.groups(width)
    if len(groups) == 1 and groups[0][1] == width:
        return [(everything, dict(samples.inputs))]
    found = []
    for members, at in groups:
        inputs = {}
        for name, value in samples.inputs.items():
            chosen = value[members]
            if name == lines.feed:
                cut = [slice(None)] * chosen.ndim
                cut[lines.axis] = slice(0, at)
                chosen = np.ascontiguousarray(chosen[tuple(cut)])
            inputs[name] = chosen
        found.append((members, inputs))
    return found


def one_width(samples: Samples, n: int) -> Samples:
    """`n` samples spread over the set, as one batch that reads as `run_lines` reads it: text lines come from the
    width group holding the most lines (the narrower on a tie), their feed cut to its width; fewer than `n` when the
    group holds fewer. What a device replays as one tensor (the golden vectors), so it is judged on the tensors the
    host's figures were measured on: padded to the folder's widest instead, the PP-OCRv5 rec INT8 `.nb` under qemu
    missed its own golden cosine floor (0.944 against 0.967)."""
    if samples.lines is None:
        return samples.spread(n)
    members, inputs = max(width_groups(samples), key=lambda group: len(group[0]))
    return samples.take(members).with_inputs(inputs).spread(n)


def first_sample(samples: Samples) -> dict[str, np.ndarray]:
    """The first sample's inputs as `run_lines` runs it (a text line at its group's width): what is counted."""
    return width_groups(samples.head(1))[0][1]


def run_lines(run: Callable[[Mapping[str, np.ndarray]], list[np.ndarray]], samples: Samples) -> list[np.ndarray]:
    """`run(inputs)` on `samples`. Text lines (`samples.lines`) run in groups of similar width (`width_groups`) and
    come back in sample order: an output whose size follows the width (a recogniser's time steps) is zero past a
    group's end, which greedy CTC reads as the blank (index 0) and which adds nothing to a cosine or a max abs
    (`fit_outputs`)."""
    groups = width_groups(samples)
    if len(groups) == 1:
        return list(run(groups[0][1]))
    parts = [(members, [np.asarray(o) for o in run(inputs)]) for members, inputs in groups]
    out = []
    for index in range(len(parts[0][1])):
        shapes = [outputs[index].shape for _, outputs in parts]
        rows = [(len(members), outputs[index].shape[:1]) for members, outputs in parts]
        if len({len(shape) for shape in shapes}) != 1 or any(shape != (count,) for count, shape in rows):
            raise InputModelError(f"output {index} comes back as {[list(s) for s in shapes]} for width groups of "
                                  f"{[count for count, _ in rows]} text lines: edgekit runs lines in groups of similar "
                                  "width and needs every output to keep the batch as its first axis",
                                  "export the recogniser with the batch first in every output (e.g. [N, T, C])")
        size = tuple(max(dims) for dims in zip(*(shape[1:] for shape in shapes)))
        merged = np.zeros((len(samples), *size), np.result_type(*(outputs[index] for _, outputs in parts)))
        for members, outputs in parts:
            piece = outputs[index]
            merged[(members, *(slice(0, d) for d in piece.shape[1:]))] = piece
        out.append(merged)
    return out


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
    lines = None
    if spec.dynamic_width:
        axis = 2 if spec.layout == "NCHW" else 1
        lines = Lines(feed_name, axis + 1, tuple(int(t.shape[axis]) for t in tensors), spec.width_step)
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
        lines,
    )


def fit_outputs(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Two runs' outputs at one shape per output: a smaller one zero-padded at the end of each axis (`run_lines` on
    lines that ran in other company, e.g. a subset, ends its outputs earlier; past a line's group they are zero)."""
    left, right = [], []
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape and x.ndim == y.ndim and x.shape[0] == y.shape[0]:
            size = tuple(max(i, j) for i, j in zip(x.shape, y.shape))
            x, y = (np.pad(v, [(0, n - d) for d, n in zip(v.shape, size)]) if v.shape != size else v for v in (x, y))
        left.append(x)
        right.append(y)
    return left, right


def _as_wide_as_the_widest(tensors: list[np.ndarray], spec: PreprocessSpec) -> list[np.ndarray]:
    """Lines of a dynamic-width spec, each at its own width, padded on the right with pad_value to the widest of the
    folder: one batch (squeezing them to resize[1] would change what they read). `Samples.lines` keeps each line's
    own width, and `run_lines` runs them in groups of similar width."""
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
    return samples.with_inputs({**samples.inputs, **added})


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

