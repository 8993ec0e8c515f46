"""The sizes edgekit's Python readers accept from untrusted input, in one place (native/'s core has its twin).

Bundles, asset sets, evaluation data and images may come from someone else. Every
reader checks what it is about to allocate against these limits *before* it
allocates (a header's shape, an image's dimensions, a zip member's declared size), and
a refusal names the limit it hit, e.g. `limits.MAX_IMAGE_PIXELS`. The figures are
generous for real models and data (docs/security.md lists them for the C++ side).
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any, Sequence, Type

from edgekit.core.errors import EdgekitError

MAX_TENSOR_BYTES = 1 << 30          # one array of a .npy / .npz (golden vectors, evaluation data): 1 GiB
MAX_TENSOR_ELEMENTS = 1 << 30       # its element count (bounds 1-byte dtypes and zero-size items alike)
MAX_IMAGE_PIXELS = 1 << 26          # width x height of an image to decode: 67 Mpx (8192 x 8192)
MAX_IMAGE_SIDE = 1 << 16            # either side of an image (what stb_image, native/'s decoder, accepts)
# Bytes an image file must have for the pixels its header claims (decoders pad missing data with zeros, so a few
# hundred bytes could claim 64 Mpx): a complete JPEG spends at least one bit per 8x8 block, a BMP one bit per pixel.
# A file of N bytes may claim at most N x ratio pixels; PNG has no such bound. Twins of native/'s limits.h
# (kMaxJpegPixelsPerByte, kMaxBmpPixelsPerByte, checked in native/app/src/decode_stb.cc), so both sides refuse the
# same files.
MAX_JPEG_PIXELS_PER_BYTE = 512
MAX_BMP_PIXELS_PER_BYTE = 8
PIXELS_PER_BYTE = {"jpeg": "MAX_JPEG_PIXELS_PER_BYTE", "bmp": "MAX_BMP_PIXELS_PER_BYTE"}   # image format -> limit
MAX_RESIZE_SIDE = 8192              # preprocess resize / crop, per side, in pixels
MAX_JSON_BYTES = 16 << 20           # manifest.json, preprocess.json, task.json, assets.json: 16 MiB
MAX_JSON_DEPTH = 64                 # nesting of objects and arrays in those files
MAX_CONFIG_BYTES = 1 << 20          # edgekit.toml, matrix files: 1 MiB
MAX_YML_BYTES = 8 << 20             # inference.yml (PaddleX): PP-OCRv5's rec file, 18k-character dictionary inline, ~150 KB
MAX_YML_DEPTH = 32                  # its nesting (PaddleX writes at most ~8 levels: Hpi dynamic shapes)
MAX_YML_NODES = 1_000_000           # its scalars and collections, aliases counted as what they expand to
MAX_NPZ_RATIO = 100                 # uncompressed / compressed bytes of one .npz member ...
NPZ_RATIO_FLOOR = 16 << 20          # ... checked once a member expands beyond 16 MiB (small zero arrays compress well)

HINT = "this limit guards against crafted files (edgekit/core/limits.py); if the file is genuine, make it smaller"


def refuse(error: Type[EdgekitError], what: str, value: Any, limit: str, hint: str = HINT) -> EdgekitError:
    """The error for `what` being `value`, beyond the limit named `limit` (a name in this module)."""
    shown = f"{value:,}" if isinstance(value, int) else str(value)
    return error(f"{what} is {shown}, beyond the limit {limit} = {globals()[limit]:,}", hint)


def check(error: Type[EdgekitError], what: str, value: int, limit: str, hint: str = HINT) -> None:
    if value > globals()[limit]:
        raise refuse(error, what, value, limit, hint)


def tensor_bytes(shape: Sequence[int], itemsize: int) -> int:
    """Bytes of an array of `shape`, in Python integers (no overflow)."""
    return math.prod(int(d) for d in shape) * int(itemsize)


def check_tensor(error: Type[EdgekitError], what: str, shape: Sequence[int], itemsize: int) -> int:
    """Bytes of an array of `shape` x `itemsize`, once its element and byte counts are within the limits."""
    dims = f"{'x'.join(str(d) for d in shape) or 'scalar'}"
    check(error, f"{what} ({dims}) in elements", tensor_bytes(shape, 1), "MAX_TENSOR_ELEMENTS")
    size = tensor_bytes(shape, itemsize)
    check(error, f"{what} ({dims}) in bytes", size, "MAX_TENSOR_BYTES")
    return size


def check_image(error: Type[EdgekitError], what: str, width: int, height: int, *, image_format: str | None = None,
                file_bytes: int | None = None) -> None:
    """An image's header within the side and pixel limits and, for a JPEG or BMP of `file_bytes`, within its
    pixels-per-byte limit (`area > ratio x bytes` in integers, as native/'s decoder computes it)."""
    check(error, f"{what}'s larger side", max(int(width), int(height)), "MAX_IMAGE_SIDE")
    area = int(width) * int(height)
    check(error, f"{what} ({width}x{height}) in pixels", area, "MAX_IMAGE_PIXELS")
    limit = PIXELS_PER_BYTE.get(image_format or "")
    if limit is not None and file_bytes is not None and area > globals()[limit] * int(file_bytes):
        raise refuse(error, f"{what} ({width}x{height} pixels in {int(file_bytes):,} bytes) in pixels per byte",
                     f"{area / max(int(file_bytes), 1):,.2f}", limit,
                     "the file is truncated or crafted: its header claims more pixels than its bytes can hold")


def json_depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (scalars 0), without recursion: level by level over the containers only
    (a real PIR program, 230 KB, in ~10 ms)."""
    depth, level = 0, [value] if isinstance(value, (dict, list)) else []
    while level:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            return depth
        below: list = []
        for item in level:
            below += [c for c in (item.values() if type(item) is dict else item) if type(c) in (dict, list)]
        level = below
    return depth


def _finite_float(text: str) -> float:
    """A JSON number literal as a float; one that overflows (1e999) is refused, as native/'s reader refuses it."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is beyond a double's range (not finite)")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number (edgekit's JSON holds finite numbers only)")


def parse_json(text: str, what: str, error: Type[EdgekitError], hint: str, *, finite: bool = True) -> Any:
    """JSON text from untrusted input, parsed and within MAX_JSON_DEPTH; with `finite` (every edgekit file: bundles,
    asset sets, specs), NaN, Infinity and literals that overflow a double are refused, as native/'s reader does."""
    extra = {"parse_constant": _no_constant, "parse_float": _finite_float} if finite else {}
    try:
        value = json.loads(text, **extra)
    except RecursionError:
        raise refuse(error, f"the nesting of {what}", "too deep to parse", "MAX_JSON_DEPTH") from None
    except ValueError as exc:
        raise error(f"{what} is not valid JSON ({exc})", hint) from exc
    depth = json_depth(value)
    check(error, f"the nesting depth of {what}", depth, "MAX_JSON_DEPTH")
    return value


def read_text(path: Path, error: Type[EdgekitError], hint: str, limit: str = "MAX_JSON_BYTES") -> str:
    """A UTF-8 text file from untrusted input, its size checked against `limit` before a byte is read."""
    try:
        size = Path(path).stat().st_size
        check(error, f"{path} in bytes", size, limit)
        return Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror}", hint) from exc
    except UnicodeDecodeError as exc:
        raise error(f"{path} is not UTF-8 text", hint) from exc


def read_json(path: Path, error: Type[EdgekitError], hint: str, *, finite: bool = True) -> Any:
    """A JSON file from untrusted input: size and depth within the limits, else `error` (with `hint` when unparsable);
    non-finite numbers refused unless `finite` is False (programs written by other tools)."""
    return parse_json(read_text(path, error, hint), str(path), error, hint, finite=finite)


LINK_HINT = "copy the file itself into the model folder (edgekit does not follow links out of a folder it is given)"


def plain_file(path: Path, error: Type[EdgekitError], what: str = "") -> Path:
    """`path` when it is a regular file, not a symbolic link nor a special file: a file edgekit finds by name in a
    folder someone else handed over (a model folder), so a link cannot make it read a file from elsewhere."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror}", "check the path") from exc
    if stat.S_ISLNK(mode):
        raise error(f"{what or path} is a symbolic link ({path} -> {os.readlink(path)})", LINK_HINT)
    if not stat.S_ISREG(mode):
        raise error(f"{what or path} is not a regular file", LINK_HINT)
    return Path(path)
