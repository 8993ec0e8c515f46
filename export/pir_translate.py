"""A PIR program (Paddle 3's `.json`), described by `_paddle3_child.py`, rewritten as a legacy ProgramDesc.

No converter exists from PIR back to the ProgramDesc that Paddle-Lite's opt and PaddleSlim
read. This module builds one, op by op, with Paddle 2.6's own static-graph API, so every op
is checked against Paddle 2.6's op definitions (slot names, attribute types, shape
inference) as it is appended. The op table is `pir_ops.py`; an op it does not know is refused
naming the op, its position and its output shape, before anything is written.

The result is verified by the caller against Paddle 3's own inference of the source program.
"""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from edgekit.core.errors import InputModelError

from . import pir_ops

log = logging.getLogger(__name__)

CONSTANT_OPS = ("pd_op.full", "pd_op.full_int_array", "pd_op.assign_value", "pd_op.assign_value_")
YIELD = "cf.yield"            # ends each block of a control-flow op: its operands are the block's results
NOT_TRANSLATED_HINT = ("export that part of the model differently (edgekit translates the ops CV and OCR models use), "
                       "or convert the model to ONNX with paddle2onnx and build the .onnx")


class UntranslatableOp(InputModelError):
    """A PIR op that edgekit's translation to the legacy program does not cover."""


@dataclass(frozen=True)
class Gap:
    """One op the translation refused, found by `survey`."""
    position: str                 # "5", or "5/1/3" inside a control-flow block
    op: str
    reason: str
    shapes: tuple

    def line(self) -> str:
        return self.reason    # the refusal names the position, the op and its output shape


class Emitter:
    """Appends legacy ops for PIR ops; tracks which legacy variable holds each PIR value."""

    def __init__(self, paddle, block, graph: dict, params: dict[str, np.ndarray]) -> None:
        self.paddle = paddle
        self.block = block
        self.graph = graph
        self.params = params
        self.values: dict[str, str] = {}          # PIR value id -> legacy variable name
        self.consts: dict[str, object] = {}       # PIR value id -> constant (full, full_int_array)
        self.const_meta: dict[str, tuple] = {}    # PIR value id -> (shape, dtype) of a constant
        self.lists: dict[str, list[str]] = {}     # builtin.combine: vector value -> its elements
        self.vectors: dict[str, Callable] = {}    # pending split: vector value -> emits once the elements are known
        self.dtypes: dict[str, str] = {}
        self.shape_of: dict[str, str] = {}        # pd_op.shape result -> the value whose shape it is
        self.dims: dict[str, tuple[str, int]] = {}   # shape(x)[i] -> (x, i)
        self.counter = 0
        self.position = "0"                       # where the op being translated is ("5", or "5/1/3" in a block)
        self.feeds: list[str] = []
        self.fetches: list[str] = []
        self.translated: dict[str, int] = {}      # PIR op -> how many were translated
        self.gaps: list[Gap] | None = None        # survey mode: refusals recorded here, and translation goes on

    # -------------------------------------------------------------- operands
    def _operand(self, op: dict, name: str) -> str | None:
        for arg, vid in op["inputs"]:
            if arg == name:
                return vid
        raise self._refuse(op, f"no operand named {name!r} (this Paddle version's op differs from what edgekit knows)")

    def has(self, op: dict, name: str) -> bool:
        return any(arg == name and vid is not None for arg, vid in op["inputs"])

    def inp(self, op: dict, name: str) -> str:
        vid = self._operand(op, name)
        if vid is None:
            raise self._refuse(op, f"operand {name!r} is missing")
        return self._var(op, vid)

    def inp_list(self, op: dict, name: str) -> list[str]:
        vid = self._operand(op, name)
        if vid not in self.lists:
            raise self._refuse(op, f"operand {name!r} is not a list built in the program")
        return [self._var(op, v) for v in self.lists[vid]]

    def is_list(self, op: dict, name: str) -> bool:
        return self._operand(op, name) in self.lists

    def list_of(self, op: dict, name: str) -> list[str]:
        return list(self.lists[self._operand(op, name)])

    def is_const(self, vid: str) -> bool:
        return vid in self.consts

    def const_value(self, vid: str):
        value = self.consts[vid]
        return value[0] if isinstance(value, list) else value

    def tensor_of(self, op: dict, vid: str, dtype: str, rank: int | None = None) -> str:
        """A list element as a variable of `dtype` (constants become fill_constant; others are cast if need be);
        with rank=1, a 0-d element is made a [1] tensor (unsqueeze2), as a concat of scalars needs."""
        if vid in self.consts and vid not in self.values:
            self.const_meta[vid] = ((1,), dtype)
        name = self._var(op, vid)
        if rank == 1 and self.rank_of(vid) == 0 and vid not in self.consts:
            one = self._name("unsqueeze")
            self.block.create_var(name=one, shape=[1], dtype=self.dtypes[vid])
            self.emit("unsqueeze2", {"X": [name]}, {"Out": [one], "XShape": [self.xshape(op)]}, {"axes": [0]})
            name = one
        if self.dtypes.get(vid, dtype) == dtype:
            return name
        cast = self._name("cast")
        self.block.create_var(name=cast, shape=[1], dtype=dtype)
        self.emit("cast", {"X": [name]}, {"Out": [cast]},
                  {"in_dtype": self.var_dtype(self.dtypes[vid]), "out_dtype": self.var_dtype(dtype)})
        return cast

    def rank_of(self, vid: str) -> int | None:
        """The PIR rank of a value (0 for a scalar), None when the program does not say."""
        if vid in self.const_meta:
            return len(self.const_meta[vid][0])
        if vid in self.values:
            return len(self.block._var_recursive(self.values[vid]).shape)
        return None

    def const(self, op: dict, name: str):
        vid = self._operand(op, name)
        if vid in self.lists:   # a list of scalars (e.g. reshape's shape given as [0, n, -1])
            return [self._scalar_of(op, v, name) for v in self.lists[vid]]
        if vid not in self.consts:
            raise self._refuse(op, f"operand {name!r} is computed at run time, where edgekit needs a constant")
        return self.consts[vid]

    def const_or_none(self, op: dict, name: str):
        return self.const(op, name) if self.has(op, name) else None

    def scalar(self, op: dict, name: str):
        value = self.const(op, name)
        return value[0] if isinstance(value, list) else value

    def _scalar_of(self, op: dict, vid: str, name: str):
        if vid not in self.consts:
            raise self._refuse(op, f"an element of operand {name!r} is computed at run time, where edgekit needs a constant")
        value = self.consts[vid]
        return value[0] if isinstance(value, list) else value

    def dtype_of(self, op: dict, name: str) -> str:
        return self.dtypes[self._operand(op, name)]

    def _var(self, op: dict, vid: str) -> str:
        if vid in self.values:
            return self.values[vid]
        if vid in self.consts:
            return self._materialise(vid)
        raise self._refuse(op, f"an operand (value {vid}) is produced by no translated op")

    def _materialise(self, vid: str) -> str:
        """A constant used as a tensor: fill_constant / assign_value, as Paddle 2.6 writes them."""
        value = self.consts[vid]
        shape, dtype = self.const_meta[vid]
        name = self._name("const")
        self.block.create_var(name=name, shape=shape, dtype=dtype)
        if isinstance(value, list):
            key = {"int32": "int32_values", "int64": "int64_values", "bool": "bool_values"}.get(dtype, "fp32_values")
            cast = float if key == "fp32_values" else int
            self.emit("assign_value", {}, {"Out": [name]}, {"shape": list(shape), "dtype": self.var_dtype(dtype),
                                                            key: [cast(v) for v in value]})
        else:
            self.emit("fill_constant", {}, {"Out": [name]}, {"shape": list(shape) or [1], "value": float(value),
                                                             "dtype": self.var_dtype(dtype), "str_value": ""})
        self.values[vid] = name
        self.dtypes[vid] = dtype
        return name

    # -------------------------------------------------------------- results
    def _name(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}_{self.counter}.tmp"

    def out(self, op: dict, index: int) -> str:
        _, vid, shape, dtype = op["outputs"][index]
        legacy = op["op"].split(".", 1)[-1].rstrip("_")
        name = self._name(legacy)
        self.block.create_var(name=name, shape=shape, dtype=dtype)
        self.values[vid] = name
        self.dtypes[vid] = dtype
        return name

    def temp(self, op: dict, label: str, index: int | None = None) -> str:
        shape, dtype = ([1], "float32")
        if index is not None and index < len(op["outputs"]) and op["outputs"][index][2] is not None:
            shape, dtype = op["outputs"][index][2], op["outputs"][index][3]
        name = self._name(label)
        self.block.create_var(name=name, shape=shape, dtype=dtype)
        return name

    def new_var(self, label: str, shape, dtype: str) -> str:
        name = self._name(label)
        self.block.create_var(name=name, shape=list(shape), dtype=dtype)
        return name

    def xshape(self, op: dict) -> str:
        name = self._name("xshape")
        self.block.create_var(name=name, shape=[0], dtype="float32")
        return name

    def alias(self, op: dict, index: int, operand: str) -> None:
        vid = op["outputs"][index][1]
        self.values[vid] = self.inp(op, operand)
        self.dtypes[vid] = op["outputs"][index][3]

    def defer_vector(self, op: dict, emit_with: Callable[[list[str]], None]) -> None:
        self.vectors[op["outputs"][0][1]] = emit_with

    def var_dtype(self, name: str):
        from paddle.base.framework import convert_np_dtype_to_dtype_

        return convert_np_dtype_to_dtype_(np.dtype(name))

    def emit(self, op_type: str, inputs: dict, outputs: dict, attrs: dict) -> None:
        var = self.block._var_recursive   # inside a control-flow block, operands may live in an enclosing block
        op = self.block.append_op(type=op_type, inputs={k: [var(n) for n in v] for k, v in inputs.items()},
                                  outputs={k: [var(n) for n in v] for k, v in outputs.items()}, attrs=attrs)
        dropped = [name for name in attrs if not op.desc.has_attr(name)]
        if dropped:   # Paddle 2.6 drops attributes its op definition lacks (and every later save would again)
            raise UntranslatableOp(f"the legacy {op_type} op has no attribute {', '.join(dropped)} in Paddle 2.6",
                                   "report the model: edgekit's translation table writes an attribute Paddle 2.6 drops")

    # -------------------------------------------------------------- blocks
    def run(self, ops: list[dict], where: str = "") -> None:
        """Translate a list of PIR ops (a program's, or one block's up to its `cf.yield`) into the current block."""
        for index, op in enumerate(ops):
            self.position = f"{where}/{index}" if where else str(index)
            try:
                if op["op"] == YIELD or _bookkeeping(self, op):
                    continue
                translator = pir_ops.lookup(op["op"])
                if translator is None:
                    raise self._refuse(op, "no translation for this op")
                try:
                    translator(self, op)
                except InputModelError:
                    raise
                except Exception as exc:   # Paddle 2.6 refused the op as built: a gap in the table, named
                    reason = next((line.strip() for line in reversed(str(exc).splitlines()) if line.strip()), repr(exc))
                    raise self._refuse(op, f"Paddle 2.6 refused its legacy form ({type(exc).__name__}: {reason[:200]})") from exc
            except InputModelError as exc:
                if self.gaps is None:
                    raise
                self._record_gap(op, exc)
                continue
            self.translated[op["op"]] = self.translated.get(op["op"], 0) + 1

    def _record_gap(self, op: dict, exc: InputModelError) -> None:
        """Survey mode: the refusal is kept and the op's results become bare variables of their PIR shape, so the
        ops after it are translated too (the program is not runnable, only a list of what is missing)."""
        self.gaps.append(Gap(self.position, op["op"], exc.message, tuple(o[2] for o in op["outputs"] if o[2] is not None)))
        for index, (_, vid, shape, _dtype) in enumerate(op["outputs"]):
            if vid is not None and vid not in self.values:
                if shape is None:   # a vector (split): its elements come from the builtin.split, stubbed in turn
                    self.vectors[vid] = lambda names: None
                else:
                    self.out(op, index)

    @contextmanager
    def sub_block(self) -> Iterator:
        """A legacy sub-block (`Program._create_block`) for a control-flow op's region, as Paddle 2.6 builds one.

        PIR values defined inside a region are not visible after it (only the op's results are): they are
        forgotten on leaving, so a constant first used in the block is written again where it is used next.
        """
        program = self.block.program
        parent, values, dtypes = self.block, dict(self.values), dict(self.dtypes)
        self.block = program._create_block()
        try:
            yield self.block
        finally:
            program._rollback()
            self.block, self.values, self.dtypes = parent, values, dtypes

    def block_result(self, op: dict, vid: str, into: str) -> None:
        """A value a block yields, copied into the enclosing block's variable (Paddle 2.6 writes an `assign`)."""
        self.emit("assign", {"X": [self._var(op, vid)]}, {"Out": [into]}, {})

    def step_scopes(self) -> str:
        from paddle.base import core

        name = self._name("scope")
        self.block.create_var(name=name, type=core.VarDesc.VarType.STEP_SCOPES)
        return name

    # -------------------------------------------------------------- errors
    def describe(self, op: dict) -> str:
        shapes = [o[2] for o in op["outputs"] if o[2] is not None]
        where = f" (created at {op['source']})" if op.get("source") else ""
        return f"{position_words(self.position)} {op['op']}" + (f" -> {shapes[0]}" if shapes else "") + where

    def _refuse(self, op: dict, reason: str) -> UntranslatableOp:
        return UntranslatableOp(f"cannot translate {self.describe(op)} of the PIR program: {reason}", NOT_TRANSLATED_HINT)

    def unsupported(self, op: dict, reason: str) -> None:
        raise self._refuse(op, reason)


def position_words(position: str) -> str:
    """"5/1/3" -> "op #3 of block 1 of op #5": where an op sits, nested blocks included."""
    parts = position.split("/")
    words = f"op #{parts[-1]}"
    for index in range(len(parts) - 2, 0, -2):
        words += f" of block {parts[index]} of op #{parts[index - 1]}"
    return words


def untranslatable(graph: dict) -> list[tuple[str, dict]]:
    """Ops no table entry covers, with their position ("5", or "5/1/3": op 3 of block 1 of op 5), inside
    control-flow blocks too: reported all at once, before anything is built."""
    found: list[tuple[str, dict]] = []

    def walk(ops: list[dict], where: str) -> None:
        for index, op in enumerate(ops):
            position = f"{where}/{index}" if where else str(index)
            name = op["op"]
            if name in CONSTANT_OPS or name.startswith("builtin.") or name in ("pd_op.data", "pd_op.fetch"):
                continue
            if name == YIELD and where and index == len(ops) - 1:
                continue
            blocks = op.get("blocks")
            if pir_ops.lookup(name) is None or (blocks and name not in pir_ops.CONTROL_FLOW):
                found.append((position, op))
            for number, block in enumerate(blocks or ()):
                walk(block, f"{position}/{number}")

    walk(graph["ops"], "")
    return found


def control_flow_ops(graph: dict) -> dict[str, int]:
    """How many control-flow ops (ops with blocks) a described PIR program holds, nested ones included."""
    counts: dict[str, int] = {}

    def walk(ops: list[dict]) -> None:
        for op in ops:
            if op.get("blocks"):
                counts[op["op"]] = counts.get(op["op"], 0) + 1
                for block in op["blocks"]:
                    walk(block)

    walk(graph["ops"])
    return counts


def _bookkeeping(e: Emitter, op: dict) -> bool:
    """Ops that add no legacy op: constants, lists, inputs and outputs. True when handled."""
    name = op["op"]
    if name in CONSTANT_OPS:
        _, vid, shape, dtype = op["outputs"][0]
        attrs = op["attrs"]
        value = attrs.get("value", attrs.get("values"))
        if isinstance(value, dict):
            raise e._refuse(op, "a constant whose value cannot be read")
        e.consts[vid] = value
        e.const_meta[vid] = (tuple(shape) if shape is not None else (), dtype or "float32")
        return True
    if name == "builtin.combine":
        e.lists[op["outputs"][0][1]] = [vid for _, vid in op["inputs"]]
        return True
    if name == "builtin.split":
        vector = op["inputs"][0][1]
        if vector not in e.vectors:
            raise e._refuse(op, "splits a list edgekit did not see being built")
        names = [e.out(op, i) for i in range(len(op["outputs"]))]
        e.vectors.pop(vector)(names)
        return True
    if name == "pd_op.data":
        _, vid, shape, dtype = op["outputs"][0]
        feed = op["attrs"]["name"]
        e.block.create_var(name=feed, shape=shape, dtype=dtype, need_check_feed=True)
        e.values[vid] = feed
        e.dtypes[vid] = dtype
        e.feeds.append(feed)
        return True
    if name == "pd_op.fetch":
        e.fetches.append(e.inp(op, op["inputs"][0][0]))
        return True
    return False


def survey(graph_file: Path, params_file: Path) -> tuple[list[Gap], dict[str, int]]:
    """Every op of a described PIR program the translation refuses, all at once: each refusal is recorded and
    the translation goes on past it (its results stand in as bare variables). Returns the gaps and the counts of
    what did translate. Nothing is written; for finding what a model needs, not for building it."""
    import paddle

    graph = json.loads(graph_file.read_text(encoding="utf-8"))
    with np.load(params_file) as data:
        params = {k: data[k] for k in data.files}
    paddle.enable_static()
    program = paddle.static.Program()
    with paddle.static.program_guard(program, paddle.static.Program()):
        e = _emitter(paddle, program.global_block(), graph, params, None)
        e.gaps = []
        e.run(graph["ops"])
    return e.gaps, e.translated


def _emitter(paddle, block, graph: dict, params: dict, scope) -> Emitter:
    """An emitter over `block` with the program's parameters declared (and set in `scope` when one is given)."""
    e = Emitter(paddle, block, graph, params)
    for vid, pname in graph["params"].items():
        array = params[pname]
        block.create_var(name=pname, shape=array.shape, dtype=str(array.dtype), persistable=True)
        if scope is not None:
            scope.var(pname).get_tensor().set(array, paddle.CPUPlace())
        e.values[vid] = pname
        e.dtypes[vid] = str(array.dtype)
    return e


def translate(graph_file: Path, params_file: Path, out_prefix: Path) -> dict:
    """Write `<out_prefix>.pdmodel` + `.pdiparams` from a described PIR program; returns what was translated."""
    import paddle

    graph = json.loads(graph_file.read_text(encoding="utf-8"))
    missing = untranslatable(graph)
    if missing:
        kinds = sorted({op["op"] + (" (control flow edgekit does not translate)" if op.get("blocks") else "")
                        for _, op in missing})
        first_pos, first = missing[0]
        shapes = [o[2] for o in first["outputs"] if o[2] is not None]
        raise UntranslatableOp(
            f"the PIR program holds op(s) edgekit cannot translate yet: {', '.join(kinds)} (first: {position_words(first_pos)} "
            f"{first['op']}{' -> ' + str(shapes[0]) if shapes else ''}{' at ' + first['source'] if first.get('source') else ''}; "
            f"{len(missing)} in all)", NOT_TRANSLATED_HINT)
    with np.load(params_file) as data:
        params = {k: data[k] for k in data.files}
    paddle.enable_static()
    program = paddle.static.Program()
    scope = paddle.static.Scope()
    place = paddle.CPUPlace()
    with paddle.static.program_guard(program, paddle.static.Program()):
        block = program.global_block()
        e = _emitter(paddle, block, graph, params, scope)
        e.run(graph["ops"])
        feeds, fetches = e.feeds, e.fetches
        if not feeds or not fetches:
            raise InputModelError("the PIR program has no inputs (pd_op.data) or no outputs (pd_op.fetch)",
                                  "save the model with paddle.jit.save or paddle.static.save_inference_model")
        exe = paddle.static.Executor(place)
        with paddle.static.scope_guard(scope):
            paddle.static.save_inference_model(str(out_prefix), [block.var(n) for n in feeds],
                                               [block.var(n) for n in fetches], exe, program=program)
    info = out_prefix.with_suffix(".pdiparams.info")
    if info.exists():
        info.unlink()
    if not out_prefix.with_suffix(".pdiparams").exists():   # a program without parameters
        out_prefix.with_suffix(".pdiparams").write_bytes(b"")
    log.info("translated %d PIR ops into a legacy program of %d blocks", sum(e.translated.values()), len(program.blocks))
    return {"pir_ops": e.translated, "paddle": graph.get("paddle", ""), "control_flow": control_flow_ops(graph)}

