"""Pure logic of instruction counts: the plugin file's reader (lite/icount.py) and bench's comparison (edgekit/verify/counts.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from untrusted_bundles import document as manifest_document

from edgekit.consumers import costs
from edgekit.contracts.manifest import Manifest
from edgekit.verify import counts
from edgekit.core.errors import ConfigError, InputModelError, ToolError
from edgekit.lite.icount import parse_counts


def region(total_simd=100, ls=40, br=10, other=20, dot=0):
    return {"depth": 0, "total": total_simd + ls + br + other, "simd_fp": total_simd, "load_store": ls, "branch": br,
            "other": other, "dot_product": dot}


def document(regions):
    return {"schema": "edgekit.icount/1", "target": "aarch64", "classifier": "encoding", "vcpus": 1, "open_regions": 0,
            "unmatched_ends": 0, "dropped_regions": 0, "regions": regions}


RECORD = {"pass_ms": [1.0, 1.0], "warmup_ms": [1.0], "iteration_ms": [1.0, 1.0]}


def test_regions_map_to_the_runner_s_runs_in_order():
    regions = [region(500), region(101), region(102), region(103, dot=50), region(104)]
    counts = parse_counts(document(regions), RECORD)
    assert [r["simd_fp"] for r in counts.passes] == [500, 101]
    assert [r["simd_fp"] for r in counts.warmups] == [102]
    assert [r["simd_fp"] for r in counts.timed] == [103, 104]
    assert counts.timed[0] == {"total": 173, "simd_fp": 103, "load_store": 40, "branch": 10, "other": 20, "dot_product": 50}
    assert (counts.target, counts.classifier) == ("aarch64", "encoding")


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(schema="other/1"), "not an edgekit.icount/1"),
    (lambda d: d.update(open_regions=1), "unbalanced markers"),
    (lambda d: d.update(unmatched_ends=2), "unbalanced markers"),
    (lambda d: d.update(vcpus=2), "2 threads"),
    (lambda d: d["regions"].pop(), "4 counted regions for 5 runs"),
    (lambda d: d["regions"][0].update(depth=1), "nested"),
    (lambda d: d["regions"][1].update(total=1), "do not add up"),
    (lambda d: d["regions"][1].update(dot_product=10**6), "do not add up"),
    (lambda d: d["regions"][2].update(branch=-1), "lacks a class count"),
    (lambda d: d["regions"][2].update(branch=1.5), "lacks a class count"),
    (lambda d: d.update(regions="none"), "no region list"),
])
def test_inconsistent_files_are_refused(change, message):
    data = document([region() for _ in range(5)])
    broken = copy.deepcopy(data)
    change(broken)
    with pytest.raises(ToolError, match=message):
        parse_counts(broken, RECORD)


def test_a_non_object_is_refused():
    with pytest.raises(ToolError):
        parse_counts([1, 2], RECORD)


def manifest(name, precision, target="arm64", paths=None, pruned=False, folded=True, emulation=None):
    counts = {"ran": True, "paths": {p: {"per_inference": c, "kernel_path": k, "first_inference": 1}
                                     for p, (k, c) in (paths or {}).items()}}
    m = manifest_document(name, target=target, precision=precision)
    m.update({"pruning": {"x": 1} if pruned else None, "config": {"fold": folded},
              "folding": {"applied": False, "reason": "nothing to fold"},
              "emulation": emulation or {"ran": True, "instruction_counts": counts}})
    return Manifest.of(m, Path("manifest.json"))


def path_counts(total, simd, dot=0):
    return {"total": total, "simd_fp": simd, "load_store": total - simd, "branch": 0, "other": 0, "dot_product": dot}


def test_compare_puts_bundles_side_by_side_against_the_first():
    fp32 = costs.row("b/fp32", manifest("digits", "fp32", paths={"default": ("neon", path_counts(1000, 400)),
                                                                 "a55": ("dotprod", path_counts(1000, 400))}))
    int8 = costs.row("b/int8", manifest("digits", "int8", pruned=True, folded=False,
                                        paths={"default": ("neon", path_counts(780, 440)),
                                               "a55": ("dotprod", path_counts(450, 250, dot=160))}))
    v7 = costs.row("b/v7", manifest("digits", "int8", target="armv7", paths={"default": ("neon", path_counts(1200, 500))}))
    assert costs.row("b/f", manifest("digits", "fp32", paths={"default": ("neon", path_counts(1, 1))})).variant == "-"
    result = costs.compare([fp32, int8, v7])
    assert result["baseline"] == "b/fp32" and result["paths"] == ["default", "a55"]
    first, second, third = result["bundles"]
    assert first["paths"]["default"]["vs_first"] == 1.0
    assert second["paths"]["a55"]["vs_first"] == 0.45 and second["variant"] == "pruned+no-fold"
    assert list(third["paths"]) == ["default"] and third["paths"]["default"]["vs_first"] == 1.2
    lines = costs.table(result)
    assert lines[0].endswith("(baseline: b/fp32)")
    row = next(line for line in lines if line.startswith("digits arm64-int8 pruned+no-fold") and " a55 " in line)
    assert "450" in row and "0.450" in row and "35.6%" in row           # dot products: 160 of 450
    assert sum(1 for line in lines if line.startswith("digits")) == 5


def test_a_bundle_without_counts_says_how_to_get_them():
    m = manifest("digits", "int8", emulation={"ran": False, "reason": "skipped on request (--no-emulation)"})
    with pytest.raises(InputModelError, match="--no-emulation"):
        costs.row("b", m)
    with pytest.raises(ConfigError):
        costs.compare([])


def test_regressions_flag_growth_only():
    base = {"default": 782_307, "a55": 455_713}
    assert counts.regressions(base, dict(base)) == []
    assert counts.regressions(base, {"default": 700_000, "a55": 455_713}) == []
    (line,) = counts.regressions(base, {"default": 782_308, "a55": 455_713})
    assert line.startswith("default: 782,308 instructions") and "+0.00%" in line
    assert counts.regressions(base, {"default": 790_000}, tolerance=0.01) == []
    assert len(counts.regressions(base, {"default": 800_000}, tolerance=0.01)) == 1



def test_regressions_name_every_class_that_moved():
    before = {"default": {"total": 100, "simd_fp": 40, "load_store": 30, "branch": 20, "other": 10, "dot_product": 0}}
    after = {"default": {"total": 130, "simd_fp": 60, "load_store": 35, "branch": 20, "other": 15, "dot_product": 0}}
    assert counts.regressions(before, after) == [
        "default: 130 instructions per inference, baseline 100 (+30.00%; simd_fp +20, load_store +5, other +5)"]
    assert counts.regressions(after, before) == []
    assert counts.regressions(before, {"a55": after["default"]}) == []        # no common path: nothing to judge


def test_every_emulation_abi_has_its_kernel_paths():
    assert counts.profiles_for("aarch64") == ["default", "a53", "a55"]
    assert counts.profiles_for("armhf") == ["default"]


def test_tier_c_counts_one_profile_per_kernel_family_plus_the_chosen_one():
    assert counts.kernel_paths("aarch64") == ["default", "a55"]
    assert counts.kernel_paths("aarch64", "a53") == ["default", "a53", "a55"]
    assert counts.kernel_paths("aarch64", "a55") == ["default", "a55"]
    assert counts.kernel_paths("armhf") == ["default"]


def test_build_says_plainly_when_int8_is_not_faster_than_fp32():
    from edgekit.verify.tier_c import int8_verdict

    def paths(**totals):
        return {p: {"per_inference": {"total": t}} for p, t in totals.items()}

    # PP-OCRv4 det as built before the per-channel rewrite (docs/costs.md): INT8 904.7 M / 826.2 M, FP32 917.2 M
    flat = int8_verdict(paths(default=904_696_799, a55=826_215_308), paths(default=917_194_932, a55=917_196_352),
                        "default")
    assert flat["ratios"] == {"default": 0.9864, "a55": 0.9008}
    assert flat["note"].startswith("INT8 is not faster than FP32 on the default CPU profile: it executes 0.99x")
    assert "edgekit inspect BUNDLE --profile --cpu default" in flat["note"]
    faster = int8_verdict(paths(default=782_355, a55=457_986), paths(default=999_258, a55=999_258), "a55")
    assert faster["note"].startswith("INT8 executes 0.46x FP32's instructions per inference on the a55 CPU profile")
    assert int8_verdict(paths(default=1), paths(a55=1), "default") is None          # no FP32 count on that path
