"""Writes the crafted inputs in this folder (run from anywhere: `python tests/data/untrusted/make.py`).

Each file is what a hostile or broken producer could hand edgekit; the tests in
tests/unit/test_untrusted_*.py check that every reader refuses it with a typed error
naming the limit, before allocating what the file claims.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def png_header(width: int, height: int) -> bytes:
    """A PNG whose IHDR claims width x height 8-bit gray, with one empty IDAT: decoders allocate before reading."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def bmp_header(width: int, height: int) -> bytes:
    """A 70-byte 24-bit BMP claiming width x height."""
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    body = info + b"\0" * 16
    return b"BM" + struct.pack("<IHHI", 14 + len(body), 0, 0, 54) + body


def jpeg_header(width: int, height: int) -> bytes:
    """A baseline JPEG's SOI, an APP0 and an SOF0 claiming width x height, then EOI."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def npz_member(name: str, array_header: bytes, data: bytes, compress: bool) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as archive:
        archive.writestr(name, array_header + data)
    return out.getvalue()


def npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    text += b" " * (63 - (len(text) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def main() -> None:
    # lite/nbfile.py's kernel scan: 80 KB of letters and no NUL made the old regex quadratic (24 s here)
    program = b"a" * 80000
    (HERE / "quadratic_kernels.nb").write_bytes(struct.pack("<H16sQ", 2, b"v2.13-rc", len(program)) + program + b"p")
    # images whose headers claim 20000 x 20000 (400 Mpx) in a few bytes
    (HERE / "huge_20000.png").write_bytes(png_header(20000, 20000))
    (HERE / "huge_20000.bmp").write_bytes(bmp_header(20000, -20000))
    (HERE / "huge_20000.jpg").write_bytes(jpeg_header(20000, 20000))
    # .npz expansion: 48 MiB of zeros deflate to ~48 KB (ratio ~1000)
    zeros = np.zeros((12, 1 << 20), np.float32)
    buffer = io.BytesIO()
    np.save(buffer, zeros)
    (HERE / "ratio_bomb.npz").write_bytes(npz_member("x.npy", b"", buffer.getvalue(), compress=True))
    # a member whose .npy header declares 2^40 float32 (4 TiB) in a 200-byte file
    (HERE / "header_bomb.npz").write_bytes(npz_member("x.npy", npy_header((1 << 20, 1 << 20)), b"\0" * 64, False))
    (HERE / "header_bomb.npy").write_bytes(npy_header((1 << 20, 1 << 20)) + b"\0" * 64)


if __name__ == "__main__":
    main()
