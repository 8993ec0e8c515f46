"""Image files from untrusted sources: found, sniffed and decoded with their size checked against the limits first."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from edgekit.core import limits
from edgekit.core.errors import DataError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


def image_entries(folder: Path) -> list[tuple[Path, str | None]]:
    """All images below `folder`: (path, class folder name or None), sorted for reproducibility."""
    found = []
    for path in sorted(_plain_files(folder)):
        if path.suffix.lower() in IMAGE_SUFFIXES:
            rel = path.relative_to(folder)
            found.append((path, rel.parts[0] if len(rel.parts) > 1 else None))
    return found


def _plain_files(folder: Path) -> list[Path]:
    """The regular files below `folder`; a symbolic link (to a file or a folder) or a special file there is refused:
    data someone else hands over must not make edgekit read, and copy into a bundle, files from elsewhere."""
    files = []
    for parent, dirs, names in os.walk(folder, followlinks=False):
        for name in dirs + names:
            path = Path(parent) / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "a special file"
                raise DataError(f"{path} in the data folder {folder} is {kind}",
                                "copy the file itself into the folder (links and special files are not followed)")
            if stat.S_ISREG(mode):
                files.append(path)
    return files


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
    return [path for path, _ in image_entries(folder)]
