"""Pure logic of the per-function profile: the plugin's block list (lite/icount.py), attribution of blocks to
functions, op kinds and precisions (edgekit/verify/profile.py)."""

from __future__ import annotations

import copy
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
