"""Op coverage: name every op Paddle-Lite cannot run on the target, and where it came from."""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.model.artifacts import StaticModel
from edgekit.export import program as prog


@dataclass(frozen=True)
class UnsupportedOp:
    op_type: str
    outputs: tuple[str, ...]
    source: str               # user source line (dygraph exports) or "" when unknown

    def describe(self) -> str:
        where = f" from {self.source}" if self.source else ""
        return f"{self.op_type} -> {', '.join(self.outputs) or '(no outputs)'}{where}"


def unsupported_ops(model: StaticModel, supported: set[str]) -> list[UnsupportedOp]:
    program = prog.parse_program(model.model_file)
    found = []
    for block in program.blocks:
        for op in block.ops:
            if op.type in ("feed", "fetch") or op.type in supported:
                continue
            outputs = tuple(op.output_arg_names)
            source = next((model.sources[o]["source"] for o in outputs if o in model.sources), "")
            found.append(UnsupportedOp(op.type, outputs, source))
    return found
