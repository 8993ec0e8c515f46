"""Legacy programs written by Paddle 3 (`FLAGS_enable_pir_api=0`), made safe for Paddle-Lite 2.13.

Paddle 3 writes ops with input slots that Paddle 2.6's op definitions do not have (the
first found: `scale` with an empty `BiasTensor`). Paddle 2.6 ignores an empty slot, but
Lite 2.13 reads it and computes a silently wrong result (cosine 0.30 against Paddle on a
conv-BN-hardswish net). The rule here is systematic rather than a list of known traps:
every input or output slot that Paddle 2.6's definition of the op does not declare is
dropped when it is empty, and refused when it holds a variable (its meaning would be
lost). The program's version field says which Paddle wrote it (3.3.1 -> 3003001).
"""

from __future__ import annotations

import logging
from pathlib import Path

from edgekit.core.errors import InputModelError

log = logging.getLogger(__name__)

PADDLE3_VERSION = 3000000


def program_version(data: bytes) -> int:
    from paddle.base.proto import framework_pb2

    desc = framework_pb2.ProgramDesc()
    desc.ParseFromString(data)
    return int(desc.version.version)


def drop_unknown_slots(model_file: Path, written_by: int | None = None) -> list[dict]:
    """Rewrite `model_file` in place without slots Paddle 2.6 does not know; returns what was dropped.

    `written_by`: the version of the program as given, when `model_file` is a copy Paddle 2.6 re-saved."""
    from paddle.base import framework
    from paddle.base.proto import framework_pb2

    desc = framework_pb2.ProgramDesc()
    desc.ParseFromString(model_file.read_bytes())
    if (written_by if written_by is not None else int(desc.version.version)) < PADDLE3_VERSION:
        return []
    holder = framework.OpProtoHolder.instance()
    dropped: list[dict] = []
    for block_index, block in enumerate(desc.blocks):
        for op_index, op in enumerate(block.ops):
            if op.type in ("feed", "fetch"):
                continue
            try:
                proto = holder.get_op_proto(op.type)
            except ValueError:
                continue   # an op Paddle 2.6 lacks: the coverage stage names it
            known = {"inputs": {v.name for v in proto.inputs}, "outputs": {v.name for v in proto.outputs}}
            for kind in ("inputs", "outputs"):
                slots = getattr(op, kind)
                for slot in [s for s in slots if s.parameter not in known[kind]]:
                    if slot.arguments:
                        raise InputModelError(
                            f"op #{op_index} {op.type} (block {block_index}) of {model_file.name} uses the {kind[:-1]} "
                            f"{slot.parameter!r}, which Paddle 2.6 and Paddle-Lite 2.13 do not have (written by Paddle "
                            f"{_version_text(desc)})", "export the model as PIR (Paddle 3's default) and build the .json: "
                            "edgekit translates it into ops Lite reads")
                    dropped.append({"block": block_index, "op": op_index, "type": op.type, "slot": slot.parameter})
                    slots.remove(slot)
    if dropped:
        model_file.write_bytes(desc.SerializeToString())
        log.info("Paddle %s program: dropped %d empty slot(s) Paddle-Lite 2.13 misreads (%s)", _version_text(desc),
                 len(dropped), ", ".join(sorted({f"{d['type']}.{d['slot']}" for d in dropped})))
    return dropped


def _version_text(desc) -> str:
    v = int(desc.version.version)
    return f"{v // 1000000}.{v // 1000 % 1000}.{v % 1000}"
