"""What one sample of a program holds in memory, read from the program: its activation shapes at the feed sizes used.

Paddle's own shape inference (`op.desc.infer_shape`) runs on a copy of the program whose feeds are set to one
sample at the sizes actually fed, so dimensions left dynamic (a detector's H and W) get their real values. Two
figures come out of the shapes:

- `held`: the bytes of named activations kept for the whole run. PaddleSlim's calibration makes every activation it
  samples persistable (`_set_activation_persistable`), so the executor never frees them; for a detector that is
  nearly every activation of the program (quantize/ptq.py names them).
- `live`: the most bytes of the other activations alive at once, as Paddle's executor frees each one after the last
  op that reads it. That is what a plain inference run needs per sample.

The figures are per sample: a batch of B holds B times as much. Ops inside sub-blocks (control flow) are not
walked; their activations are not counted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable, Mapping

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Footprint:
    """Bytes one sample of a program needs (module docstring)."""

    held: int            # the activations named as held, all alive to the end of the run
    live: int            # the peak of the other activations, each freed after its last reader
    largest_held: int    # the biggest single held activation (a sampler copies it, and more, while reading it)
    unresolved: int = 0  # activations whose shape stayed dynamic after inference: counted with those dims as 1

    @property
    def total(self) -> int:
        return self.held + self.live


def _tensor_vars(block):
    from paddle.framework import core

    lod = core.VarDesc.VarType.LOD_TENSOR
    return {name: var for name, var in block.vars.items() if var.type == lod}


def inferred_bytes(program, feed_shapes: Mapping[str, Iterable[int]]) -> tuple[dict[str, int], int]:
    """({activation name: bytes at batch 1}, how many stayed partly dynamic) for the main block of `program`, its feeds
    set to `feed_shapes` (sample dims, without the batch). The program is cloned: the caller's is left alone."""
    from paddle.framework import core

    work = program.clone()
    block = work.global_block()
    for name, shape in feed_shapes.items():
        if block.has_var(name):
            block.var(name).desc.set_shape([1, *[int(d) for d in shape]])
    for op in block.ops:
        if op.type in ("feed", "fetch") or op.has_attr("sub_block"):
            continue
        try:
            op.desc.infer_shape(block.desc)
        except Exception as exc:   # an op Paddle cannot infer here keeps its declared shape (dynamic dims count as 1)
            log.debug("no shape inference for %s: %s", op.type, str(exc).splitlines()[0][:120] if str(exc) else "")
    sizes, unresolved = {}, 0
    for name, var in _tensor_vars(block).items():
        if var.persistable:
            continue
        shape = list(var.shape)
        if not shape:
            sizes[name] = core.size_of_dtype(var.dtype)
            continue
        shape[0] = 1 if shape[0] < 0 else shape[0]
        if any(d < 0 for d in shape[1:]):
            unresolved += 1
        count = 1
        for d in shape:
            count *= max(int(d), 1) if d != 0 else 0
        sizes[name] = count * core.size_of_dtype(var.dtype)
    return sizes, unresolved


def footprint(program, feed_shapes: Mapping[str, Iterable[int]], held: Iterable[str] = ()) -> Footprint:
    """The per-sample `Footprint` of `program` at `feed_shapes` when the activations in `held` are kept to the end."""
    sizes, unresolved = inferred_bytes(program, feed_shapes)
    held = {name for name in held if name in sizes}
    block = program.global_block()
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, op in enumerate(block.ops):
        for name in list(op.input_arg_names) + list(op.output_arg_names):
            if name in sizes and name not in held:
                first.setdefault(name, index)
                last[name] = index
    events = [0] * (len(block.ops) + 1)
    for name, start in first.items():
        events[start] += sizes[name]
        events[last[name] + 1] -= sizes[name]
    live = peak = 0
    for change in events:
        live += change
        peak = max(peak, live)
    held_sizes = [sizes[name] for name in held]
    return Footprint(sum(held_sizes), peak, max(held_sizes, default=0), unresolved)


__all__ = ["Footprint", "footprint", "inferred_bytes"]
