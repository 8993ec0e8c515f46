"""Read a `.nb` file's header without the runtime (the version-lock check needs it).

Layout (naive_buffer, format 2): uint16 LE format version, 16-byte NUL-padded opt
version string, uint64 LE length of the flatbuffers program; then the program,
then the parameters.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

from edgekit.core.errors import InputModelError

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


# Paddle-Lite's enums (paddlelite.lite.TargetType / PrecisionType / DataLayoutType in 2.13rc0).
TARGET_NAMES = {0: "Unk", 1: "Host", 2: "X86", 4: "ARM", 5: "OpenCL", 6: "Any", 7: "FPGA", 9: "XPU", 17: "Metal", 18: "NNAdapter"}
PRECISION_NAMES = {0: "Unk", 1: "FP32", 2: "INT8", 3: "INT32", 4: "Any", 5: "FP16", 6: "BOOL", 7: "INT64", 8: "INT16", 9: "UINT8", 10: "FP64"}
# A kernel string starts right after a NUL: the top byte of its uint32 LE length prefix (strings < 16 MiB). Anchoring
# on it keeps the scan linear: only a position after a NUL starts a match attempt, and the classes cannot overlap
# ('/' ends each run), so each byte is looked at a bounded number of times. Without the anchor, a long run of
# letters (an 80 KB crafted .nb) made every position rescan the run: quadratic, a minute per 80 KB.
_KERNEL = re.compile(rb"(?<=\0)([a-z][a-z0-9_]*)/([a-z0-9_]+)/(\d{1,2})/(\d{1,2})/(\d{1,2})\0")


@dataclass(frozen=True)
class Kernel:
    op: str
    alias: str
    target: str
    precision: str


def kernels(path: Path) -> list[Kernel]:
    """The kernel picked for every op, read from the `__@kernel_type_attr@__` strings opt stores.

    Each op of an optimised program carries `op/alias/target/precision/layout`
    (enum numbers); this is what runs on the device, e.g. `conv2d/fp32_out/4/2/1`
    is an ARM INT8 convolution writing float output.
    """
    header = read_header(path)
    with path.open("rb") as handle:
        handle.seek(HEADER.size)
        program = handle.read(header.program_bytes)
    found = []
    for match in _KERNEL.finditer(program):
        # a flatbuffers string: uint32 length prefix, bytes, NUL
        start = match.start()
        if start < 4 or struct.unpack_from("<I", program, start - 4)[0] != match.end() - start - 1:
            continue
        op, alias, target, precision, _layout = match.groups()
        found.append(Kernel(op.decode(), alias.decode(), TARGET_NAMES.get(int(target), f"target{int(target)}"),
                            PRECISION_NAMES.get(int(precision), f"precision{int(precision)}")))
    return found
