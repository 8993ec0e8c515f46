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


# The program is a flatbuffers ProgramDesc (Lite's lite/model_parser/flatbuffers/framework.fbs): field numbers of
# the tables read here. ProgramDesc.blocks 0; BlockDesc.ops 3; OpDesc.type 0, inputs 1, outputs 2, attrs 3;
# OpDesc_.Var.parameter 0, arguments 1; OpDesc_.Attr.name 0, s 4.
KERNEL_ATTR = "__@kernel_type_attr@__"


@dataclass(frozen=True)
class ProgramOp:
    """One op of the program's main block, in the order Lite's RuntimeProgram runs them."""

    index: int                                    # position in block 0 (Lite's `idx`, feed and fetch included)
    type: str
    inputs: tuple[tuple[str, tuple[str, ...]], ...]   # (parameter, variable names)
    outputs: tuple[tuple[str, tuple[str, ...]], ...]
    kernel: str | None                            # opt's op/alias/target/precision/layout, when stored

    @property
    def output(self) -> str:
        """The main output variable: `Out`/`Output`/`Y` when present, else the first one named."""
        named = dict(self.outputs)
        for key in ("Out", "Output", "Y"):
            if named.get(key):
                return named[key][0]
        return next((names[0] for _, names in self.outputs if names), "")

    @property
    def runs(self) -> bool:
        """Lite's RuntimeProgram::Run skips feed and fetch (Instruction::is_feed_fetch_op)."""
        return self.type not in ("feed", "fetch")


class _Flat:
    """Bounds-checked reads of a flatbuffers buffer (tables, vectors, strings); ValueError on anything out of range."""

    def __init__(self, data: bytes):
        self.data = data

    def u(self, fmt: str, at: int) -> int:
        if at < 0 or at + struct.calcsize(fmt) > len(self.data):
            raise ValueError(f"offset {at} outside the program ({len(self.data)} bytes)")
        return struct.unpack_from(fmt, self.data, at)[0]

    def field(self, table: int, number: int) -> int | None:
        """Where field `number` of the table at `table` is stored, or None when absent."""
        vtable = table - self.u("<i", table)
        size = self.u("<H", vtable)
        slot = 4 + 2 * number
        if slot + 2 > size:
            return None
        offset = self.u("<H", vtable + slot)
        return table + offset if offset else None

    def ref(self, table: int, number: int) -> int | None:
        at = self.field(table, number)
        return None if at is None else at + self.u("<I", at)

    def vector(self, table: int, number: int) -> list[int]:
        """Positions of the tables (or strings) a vector-of-references field points at."""
        at = self.ref(table, number)
        if at is None:
            return []
        count = self.u("<I", at)
        if count > len(self.data) // 4:
            raise ValueError(f"a vector of {count} entries in a {len(self.data)}-byte program")
        return [at + 4 + 4 * i + self.u("<I", at + 4 + 4 * i) for i in range(count)]

    def string(self, at: int | None) -> str:
        if at is None:
            return ""
        length = self.u("<I", at)
        if at + 4 + length > len(self.data):
            raise ValueError(f"a string of {length} bytes runs past the program")
        return self.data[at + 4:at + 4 + length].decode("utf-8", "replace")


def program_ops(path: Path) -> list[ProgramOp]:
    """The ops of the program's main block (block 0) in program order, which is the order Lite's RuntimeProgram
    creates its instructions in and runs them (lite/core/program.cc)."""
    header = read_header(path)
    with path.open("rb") as handle:
        handle.seek(HEADER.size)
        program = handle.read(header.program_bytes)
    flat = _Flat(program)
    try:
        blocks = flat.vector(flat.u("<I", 0), 0)
        if not blocks:
            raise ValueError("the program has no block")
        found = []
        for index, op in enumerate(flat.vector(blocks[0], 3)):
            slots = []
            for number in (1, 2):
                slots.append(tuple((flat.string(flat.ref(var, 0)),
                                    tuple(flat.string(s) for s in flat.vector(var, 1)))
                                   for var in flat.vector(op, number)))
            kernel = None
            for attr in flat.vector(op, 3):
                if flat.string(flat.ref(attr, 0)) == KERNEL_ATTR:
                    kernel = flat.string(flat.ref(attr, 4)) or None
            found.append(ProgramOp(index, flat.string(flat.ref(op, 0)), slots[0], slots[1], kernel))
    except ValueError as exc:
        raise InputModelError(f"{path}: its program cannot be read as Lite's flatbuffers ProgramDesc ({exc})",
                              "rebuild it with edgekit build (opt v2.13)") from None
    return found
