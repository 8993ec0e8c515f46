"""Read a `.nb` file's header without the runtime (the version-lock check needs it).

Layout (naive_buffer, format 2): uint16 LE format version, 16-byte NUL-padded opt
version string, uint64 LE length of the flatbuffers program; then the program,
then the parameters.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from edgekit.errors import InputModelError

HEADER = struct.Struct("<H16sQ")


@dataclass(frozen=True)
class NbHeader:
    format_version: int
    opt_version: str
    program_bytes: int
    params_bytes: int
    file_bytes: int


def read_header(path: Path) -> NbHeader:
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            raw = handle.read(HEADER.size)
    except OSError as exc:
        raise InputModelError(f"cannot read {path}: {exc.strerror}", "check the path") from exc
    if len(raw) < HEADER.size:
        raise InputModelError(f"{path} is too short to be a Paddle-Lite .nb model", "rebuild it with edgekit build")
    fmt, version, program = HEADER.unpack(raw)
    text = version.split(b"\0", 1)[0].decode("ascii", "replace")
    if fmt != 2 or not text.startswith("v") or program > size - HEADER.size:
        raise InputModelError(f"{path} is not a naive_buffer .nb model (format {fmt}, version {text!r})",
                              "pass a .nb written by paddle_lite_opt (--optimize_out_type=naive_buffer)")
    return NbHeader(fmt, text, program, size - HEADER.size - program, size)


def zero_version_padding(path: Path) -> int:
    """Zero the bytes after the NUL in the header's version field; returns how many changed.

    opt 2.13rc0 copies the version string into the 16-byte field without clearing
    it, so the padding holds leftover stack bytes (a pointer, seen here) and two
    builds of the same model differ in those bytes only. The runtime reads the
    field as a C string, so zeroing the padding changes nothing it reads and makes
    builds byte-for-byte reproducible.
    """
    with path.open("r+b") as handle:
        raw = bytearray(handle.read(HEADER.size))
        if len(raw) < HEADER.size:
            return 0
        field = raw[2:18]
        end = field.find(b"\0")
        if end < 0:
            return 0
        changed = sum(1 for b in field[end:] if b != 0)
        if changed:
            raw[2 + end:18] = bytes(16 - end)
            handle.seek(0)
            handle.write(raw)
        return changed
