"""Pure logic of the per-function profile: the plugin's block list (lite/icount.py), attribution of blocks to
functions, op kinds and precisions (edgekit/verify/profile.py)."""

from __future__ import annotations

import copy
import dataclasses
import struct
from pathlib import Path

import numpy as np
import pytest

from edgekit.verify import profile
from edgekit.core.errors import ToolError
from edgekit.lite.icount import parse_counts

RECORD = {"pass_ms": [1.0], "warmup_ms": [1.0], "iteration_ms": [1.0]}


def region(simd, ls, br, other, dot=0):
    return {"depth": 0, "total": simd + ls + br + other, "simd_fp": simd, "load_store": ls, "branch": br,
            "other": other, "dot_product": dot}


def document(blocks, timed):
    return {"schema": "edgekit.icount/1", "target": "aarch64", "classifier": "encoding", "vcpus": 1,
            "open_regions": 0, "unmatched_ends": 0, "dropped_regions": 0,
            "regions": [region(9, 9, 9, 9), region(1, 1, 1, 1), timed],
            "profile": {"region": 2, "complete": True, "lost_blocks": 0, "blocks": blocks}}


BLOCKS = [[0x1000, "sdlb", 10], [0x2000, "oo", 3], [0x2008, "s", 1]]     # simd 21 (dot 10), ls 10, br 10, other 6


def test_a_profile_whose_blocks_add_up_to_its_region_is_read():
    counts = parse_counts(document(BLOCKS, region(21, 10, 10, 6, dot=10)), RECORD)
    assert counts.profile.region == 2
    assert counts.profile.total() == counts.timed[0]["total"] == 47
    assert counts.profile.blocks[0] == (0x1000, "sdlb", 10)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["profile"]["blocks"][0].__setitem__(2, 11), "add up to 51 instructions, region 2 counted 47"),
    (lambda d: d["profile"].update(complete=False), "did not run to its end"),
    (lambda d: d["profile"].update(region=3), "did not run to its end"),
    (lambda d: d["profile"].update(lost_blocks=2), "could not record 2 blocks"),
    (lambda d: d["profile"]["blocks"].append([0x3000, "sx", 1]), "malformed"),
])
def test_a_profile_that_does_not_add_up_is_refused(change, message):
    doc = copy.deepcopy(document(BLOCKS, region(21, 10, 10, 6, dot=10)))
    change(doc)
    with pytest.raises(ToolError, match=message):
        parse_counts(doc, RECORD)


def symbols(*functions):
    """Symbols of (start, end, name) at file addresses; one executable segment at offset 0."""
    return profile.Symbols(tuple(f[0] for f in functions), tuple(f[1] for f in functions),
                           tuple(f[2] for f in functions), ((0, 0, 0x10000, 5),))


MAPS = [profile.Mapping_(0x550000, 0x560000, "libpaddle_light_api_shared.so", 0x550000,
                         symbols((0x100, 0x108, "gemm"), (0x108, 0x200, "fp32_to_int8"))),
        profile.Mapping_(0x570000, 0x580000, "libc.so.6", 0x570000, symbols((0x40, 0x80, "memcpy (resolved)")))]


def test_blocks_are_split_at_function_ends_and_every_instruction_is_attributed_once():
    blocks = [(0x550100, "sdlb", 5),      # two instructions in gemm, two in fp32_to_int8
              (0x570040, "ll", 7),        # memcpy
              (0x570000, "o", 2),         # libc, but no symbol there
              (0x990000, "b", 1)]         # outside every mapping
    found = profile.attribute(blocks, MAPS, total=5 * 4 + 14 + 2 + 1)
    lib = "libpaddle_light_api_shared.so"
    assert found[(lib, "gemm")] == {"simd_fp": 10, "dot_product": 5, "load_store": 0, "branch": 0, "other": 0,
                                    "total": 10}
    assert found[(lib, "fp32_to_int8")]["total"] == 10 and found[(lib, "fp32_to_int8")]["branch"] == 5
    assert found[("libc.so.6", "memcpy (resolved)")]["load_store"] == 14
    assert found[("libc.so.6", "(no symbol)")]["other"] == 2
    assert found[("(unmapped)", "(unmapped)")]["branch"] == 1
    with pytest.raises(ToolError, match="attributes 37 instructions, the region counted 38"):
        profile.attribute(blocks, MAPS, total=38)


def test_the_summary_rows_add_up_and_name_what_int8_adds():
    found = profile.attribute([(0x550100, "sdlb", 5), (0x570040, "ll", 7)], MAPS, total=34)
    summary = profile.summarize(found)
    assert summary["total"] == 34
    assert sum(k["total"] for k in summary["kinds"]) == sum(f["total"] for f in summary["functions"]) == 34
    assert {k["kind"]: k["total"] for k in summary["kinds"]} == {"conversion": 10, "fp32_gemm": 10, "memcpy": 14}
    assert summary["int8_adds"]["total"] == 10
    assert sum(p["total"] for p in summary["by_precision"].values()) == 34
    assert profile.table(dict(summary, cpu_profile="default"))[-1].startswith("gemm")


@pytest.mark.parametrize("library, function, kind, precision", [
    ("libpaddle_light_api_shared.so", "paddle::lite::arm::math::gemm_sdot_int8_kernel<float>", "int8_gemm", "int8"),
    ("libpaddle_light_api_shared.so", "paddle::lite::arm::math::sgemm_prepack_c8_int16_small", "int8_gemm", "int8"),
    ("libpaddle_light_api_shared.so", "paddle::lite::arm::math::im2col<float>", "fp32_gemm", "float"),
    ("libpaddle_light_api_shared.so", "paddle::lite::arm::math::conv_depthwise_5x5s1_int8<float>", "depthwise", "int8"),
    ("libpaddle_light_api_shared.so", "paddle::lite::arm::math::conv_depthwise_5x5s1_fp32", "depthwise", "float"),
    ("libpaddle_light_api_shared.so", "paddle::lite::arm::math::fp32_to_int8", "conversion", "conversion"),
    ("libpaddle_light_api_shared.so", "paddle::lite::arm::math::pooling2x2s2p0_max", "pool_norm", "float"),
    ("libpaddle_light_api_shared.so", "paddle::lite::OpLite::InferShape", "runtime", "runtime"),
    ("libpaddle_light_api_shared.so", "paddle::lite::arm::math::act_hard_swish<float>", "activation", "float"),
    ("libc.so.6", "memset (resolved)", "memcpy", "runtime"),
    ("libgomp.so.1.0.0", "(local function 0x1b020)", "runtime", "runtime"),
])
def test_functions_fall_into_op_kinds(library, function, kind, precision):
    assert profile.kind_of(library, function) == kind
    assert profile.precision_of(kind, function) == precision


def test_elf_function_symbols_are_read_with_their_extents():
    library = Path(np.core._multiarray_umath.__file__)       # a 64-bit ELF shared object of this host
    found = profile.read_symbols(library)
    assert len(found.names) > 100 and list(found.starts) == sorted(found.starts)
    at = found.names.index("PyInit__multiarray_umath")
    start, end = found.starts[at], found.ends[at]
    assert end > start and found.lookup(start) == found.lookup(end - 1) == "PyInit__multiarray_umath"
    assert any(s[3] & 1 for s in found.segments)                  # an executable PT_LOAD


# ----------------------------------------------------------------- per op

def split_document(runs, *, segments=3, entered=2, **changes):
    """BLOCKS profiled and split into ops: segment 0 and 1 two ops, segment 2 the tail."""
    doc = copy.deepcopy(document(BLOCKS, region(21, 10, 10, 6, dot=10)))
    doc["profile"]["ops"] = dict({"enter": 0x5000, "exits": [0x6004], "segments": segments, "entered": entered,
                                  "open": 0, "unmatched_exits": 0, "lost": 0, "runs": runs}, **changes)
    return doc


RUNS = [[0, 0, 4], [0, 1, 3], [1, 0, 6], [2, 2, 1]]     # block 0 runs 4 + 6, block 1 3, block 2 1: as BLOCKS


def test_an_op_split_that_divides_every_block_whole_is_read():
    split = parse_counts(split_document(RUNS), RECORD).profile.ops
    assert split.ops == 2 and split.runs == ((0, 0, 4), (0, 1, 3), (1, 0, 6), (2, 2, 1))
    assert split.blocks_of(0, tuple(map(tuple, BLOCKS))) == [(0x1000, "sdlb", 4), (0x2000, "oo", 3)]


@pytest.mark.parametrize("runs, changes, message", [
    ([[0, 0, 4], [0, 1, 3], [1, 0, 5], [2, 2, 1]], {}, "split block 0 into 9 executions, it ran 10"),
    ([[0, 0, 4], [0, 1, 3], [3, 0, 6], [2, 2, 1]], {}, "malformed"),
    ([[0, 0, 4], [0, 1, 3], [1, 5, 6], [2, 2, 1]], {}, "malformed"),
    (RUNS, {"open": 1}, "did not pair up"),
    (RUNS, {"unmatched_exits": 1}, "did not pair up"),
    (RUNS, {"entered": 3}, "did not pair up"),
    (RUNS, {"lost": 7}, "could not record 7"),
])
def test_an_op_split_that_does_not_add_up_is_refused(runs, changes, message):
    with pytest.raises(ToolError, match=message):
        parse_counts(split_document(runs, **changes), RECORD)


def test_each_op_run_is_named_after_the_programs_op_and_the_rows_add_up():
    from edgekit.lite.nbfile import ProgramOp

    blocks = ((0x550100, "sdlb", 5), (0x570040, "ll", 7), (0x550104, "o", 2))
    counts = parse_counts({**document([list(b) for b in blocks], region(10, 19, 5, 2, dot=5)),
                           "regions": [region(9, 9, 9, 9), region(1, 1, 1, 1), region(10, 19, 5, 2, dot=5)]},
                          RECORD)
    split_doc = {"segments": 3, "entered": 2, "open": 0, "unmatched_exits": 0, "lost": 0,
                 "runs": [[0, 0, 5], [1, 1, 7], [1, 2, 1], [2, 2, 1]]}
    from edgekit.lite.icount import _parse_ops

    with_ops = dataclasses.replace(counts.profile, ops=_parse_ops(split_doc, list(blocks), ValueError))
    program = [ProgramOp(0, "feed", (), (("Out", ("x",)),), None),
               ProgramOp(1, "conv2d", (("Input", ("x",)),), (("Output", ("c",)),), "conv2d/def/4/1/1"),
               ProgramOp(2, "relu", (("X", ("c",)),), (("Out", ("r",)),), "relu/def/4/1/1"),
               ProgramOp(3, "fetch", (("X", ("r",)),), (("Out", ("fetch",)),), None)]
    found = profile.per_op(with_ops, MAPS, program, {}, {}, total=36)
    assert found["named"] and found["program_ops"] == 2
    assert [(r["index"], r["type"], r["output"], r["total"]) for r in found["ops"]] == [
        (1, "conv2d", "c", 20), (2, "relu", "r", 14 + 1)]
    assert [(f["function"], f["total"]) for f in found["ops"][0]["functions"]] == [("fp32_to_int8", 10), ("gemm", 10)]
    assert found["ops"][1]["by_precision"]["runtime"] == 14             # memcpy
    assert found["tail"]["total"] == 1
    lines = profile.op_table(found, 36)
    assert "conv2d" in lines[2] and "INT8" not in lines[2] and lines[-1].split()[1] == "36"
    shortened = profile.op_table(found, 36, top=1)             # the largest op, the rest in one row
    assert len(shortened) == 6 and "conv2d" in shortened[2] and "(1 more ops)" in shortened[3]
    assert shortened[3].split()[3:5] == ["15", "41.67%"] and shortened[-1].split()[1] == "36"

    fewer = profile.per_op(with_ops, MAPS, program[:2], {}, {}, total=36)     # 2 ops ran, the program has 1
    assert not fewer["named"] and [r["type"] for r in fewer["ops"]] == [None, None]
    with pytest.raises(ToolError, match="per-op profile attributes 36 instructions, the region counted 37"):
        profile.per_op(with_ops, MAPS, program, {}, {}, total=37)


def flatbuffers_program(ops):
    """A Lite ProgramDesc with one block holding `ops` [(type, inputs, outputs, kernel)], written with the flatbuffers
    package (an independent writer of the format lite/nbfile.program_ops reads)."""
    flatbuffers = pytest.importorskip("flatbuffers")
    b = flatbuffers.Builder(256)

    def vector(offsets):
        b.StartVector(4, len(offsets), 4)
        for o in reversed(offsets):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    def table(slots):          # {slot: offset}
        b.StartObject(max(slots) + 1 if slots else 0)
        for slot, offset in slots.items():
            b.PrependUOffsetTRelativeSlot(slot, offset, 0)
        return b.EndObject()

    def variables(pairs):
        made = []
        for parameter, arguments in pairs:
            names = vector([b.CreateString(a) for a in arguments])
            made.append(table({0: b.CreateString(parameter), 1: names}))
        return vector(made)

    written = []
    for op_type, inputs, outputs, kernel in ops:
        attrs = []
        if kernel:
            value, name = b.CreateString(kernel), b.CreateString("__@kernel_type_attr@__")
            b.StartObject(5)
            b.PrependUOffsetTRelativeSlot(0, name, 0)
            b.PrependInt32Slot(1, 2, 0)                     # STRING
            b.PrependUOffsetTRelativeSlot(4, value, 0)
            attrs.append(b.EndObject())
        fields = {0: b.CreateString(op_type), 1: variables(inputs), 2: variables(outputs), 3: vector(attrs)}
        written.append(table(fields))
    block = table({3: vector(written)})
    program = table({0: vector([block])})
    b.Finish(program)
    return bytes(b.Output())


def test_the_programs_ops_are_read_in_order_with_their_outputs_and_kernels(tmp_path):
    from edgekit.core.errors import InputModelError
    from edgekit.lite.nbfile import program_ops

    program = flatbuffers_program([
        ("feed", [("X", ["feed"])], [("Out", ["x"])], "feed/def/1/4/1"),
        ("conv2d", [("Input", ["x"]), ("Filter", ["w"])], [("Output", ["conv_out"])], "conv2d/fp32_out/4/2/1"),
        ("batch_norm", [("X", ["conv_out"])], [("MeanOut", ["m"]), ("Y", ["bn_out"])], None),
        ("fetch", [("X", ["bn_out"])], [("Out", ["fetch"])], "fetch/def/1/4/1")])
    path = tmp_path / "m.nb"
    path.write_bytes(struct.pack("<H16sQ", 2, b"v2.13-rc", len(program)) + program + b"params")
    ops = program_ops(path)
    assert [(o.index, o.type, o.output, o.kernel, o.runs) for o in ops] == [
        (0, "feed", "x", "feed/def/1/4/1", False),
        (1, "conv2d", "conv_out", "conv2d/fp32_out/4/2/1", True),
        (2, "batch_norm", "bn_out", None, True),
        (3, "fetch", "fetch", "fetch/def/1/4/1", False)]
    assert ops[1].inputs == (("Input", ("x",)), ("Filter", ("w",)))

    broken = tmp_path / "broken.nb"
    cut = program[:len(program) // 2]
    broken.write_bytes(struct.pack("<H16sQ", 2, b"v2.13-rc", len(cut)) + cut + b"params")
    with pytest.raises(InputModelError, match="cannot be read as Lite's flatbuffers ProgramDesc"):
        program_ops(broken)
