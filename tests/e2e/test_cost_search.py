"""The INT8 search weighs counted instructions (quantize/cost.py) on the bundled digits example: every candidate within
the budget is counted on Lite's real ARM kernels under qemu, FP32 too, the cheapest is chosen, tier C reuses the
counts; without tier C the search says cost was not counted and chooses by accuracy. ~1 min on 2 cores."""

from __future__ import annotations

import pytest
from bundles import manifest

pytestmark = pytest.mark.e2e


def test_search_counts_candidates_and_keeps_the_cheapest_within_budget(tmp_path, lite_arm, cli):
    done = cli("build", "--target", "arm64", "--quant", "int8", "--cpu", "a55", "--search-algos", "avg,hist",
               "--out", tmp_path, "--lite-arm", lite_arm, "--no-cache")
    m = manifest(tmp_path / "digits" / "arm64-int8")
    search = m["quantization"]["search"]
    cost = search["cost"]
    assert cost["counted"] and cost["cpu"] == "a55" and cost["counted_candidates"] == 2
    within = [c for c in search["candidates"] if c["holds"]]
    assert [c["algo"] for c in within] == ["avg", "hist"]                  # both meet the 1-point budget (97.22 %)
    counts = [c["instructions"]["a55"] for c in within]
    assert cost["chosen"]["a55"] == min(counts)                            # the cheapest within the budget
    # the dot-product path: INT8 well under FP32 (measured 455,724 vs 999,936: 0.46x); plain NEON 0.78x
    assert 400_000 < cost["chosen"]["a55"] < 520_000 and 950_000 < cost["fp32"]["a55"] < 1_050_000
    assert cost["int8_vs_fp32"]["a55"] == pytest.approx(cost["chosen"]["a55"] / cost["fp32"]["a55"], abs=1e-4)
    assert cost["int8_vs_fp32"]["a55"] < 0.6 and 0.6 < cost["int8_vs_fp32"]["default"] < 0.95
    assert "no op type of depthwise_conv2d, conv2d_transpose in the model" in cost["op_types_note"]
    # tier C counted the bundle's model.nb from the search's cache (the same bytes), and its INT8-vs-FP32 verdict
    # is the search's FP32 count
    counted = m["emulation"]["instruction_counts"]
    assert counted["cached"] and counted["paths"]["a55"]["per_inference"]["total"] == cost["chosen"]["a55"]
    assert counted["int8_vs_fp32"] == cost["int8_vs_fp32"]
    assert "INT8 executes 0.46x FP32's instructions per inference on the a55 CPU profile" in done.output
    report = (tmp_path / "digits" / "arm64-int8" / "quant" / "quant_report.md").read_text()
    assert "| instructions (a55) | INT8/FP32 |" in report and f"{cost['chosen']['a55']:,}" in report


def test_without_tier_c_the_search_says_cost_was_not_counted(tmp_path, cli):
    cli("build", "--target", "arm64", "--quant", "int8", "--out", tmp_path, "--no-emulation", "--quiet")
    search = manifest(tmp_path / "digits" / "arm64-int8")["quantization"]["search"]
    assert search["cost"] == {"counted": False,
                              "reason": "tier C is off (--no-emulation / [emulation] enabled = false)"}
    assert all(c["instructions"] is None for c in search["candidates"]) and search["algo"] == "avg"
    text = (tmp_path / "digits" / "arm64-int8" / "quant" / "quant_report.md").read_text()
    assert "cost: not counted (tier C is off" in text and "instructions (" not in text
