"""The device suite's instruction-count gate on the qemu device (edgekit/verify/counts.py, edgekit/device/baseline.py).

Two bundles of one key (`convstack/arm64-fp32`): one 3x3 conv, then the same model with one more
conv. The baseline records the first; an unchanged rerun counts the same instructions (no
regression); the rebuilt `.nb` with the extra conv is a count regression: exit 17 and one line
naming the kernel path, both totals and the classes that grew. Emulated latency is never gated.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

FAST = ("--launches", "1", "--warmup", "0", "--iterations", "3", "--max-cv", "10")   # latency is not what is tested


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, lite_arm, cli):
    """The same model name built twice, FP32 arm64 (no data, no tier C: the suite counts on its own)."""
    out = tmp_path_factory.mktemp("count-bundles")
    for convs in (1, 2):
        cli("build", "--model", f"tinymodels:conv_stack_{convs}", "--name", "convstack", "--input", "x:-1x3x16x16",
            "--target", "arm64", "--quant", "fp32", "--no-emulation", "--out", out / f"convs{convs}", "--quiet")
    return [out / f"convs{c}" / "convstack" / "arm64-fp32" for c in (1, 2)]


def run(tmp_path, name, cli, bundle, lite_arm, *extra, ok=True):
    result = cli("device", "test", bundle, "--device", "qemu", *FAST, "--baseline", tmp_path / "qemu.json",
                 "--lite-arm", lite_arm, "--json", tmp_path / f"{name}.json", *extra, ok=ok)
    return result, json.loads((tmp_path / f"{name}.json").read_text())["runs"][0]


def check(run_json, name="instruction count"):
    return next(c for c in run_json["checks"] if c["name"] == name)


def test_one_more_conv_is_a_count_regression_and_an_unchanged_rerun_is_not(tmp_path, bundles, lite_arm, cli):
    one, two = bundles
    _, recorded = run(tmp_path, "record", cli, one, lite_arm, "--update-baseline")
    stored = json.loads((tmp_path / "qemu.json").read_text())["entries"]["convstack/arm64-fp32"]
    counts = stored["instruction_counts"]
    assert list(counts["paths"]) == ["default"] and counts["input_shapes"] == {"x": [1, 3, 16, 16]}
    base = counts["paths"]["default"]["per_inference"]
    assert base["total"] > 10_000 and base["total"] == sum(base[k] for k in ("simd_fp", "load_store", "branch", "other"))
    assert stored["nb_sha256"] == recorded["bundle"]["nb_sha256"]

    _, same = run(tmp_path, "same", cli, one, lite_arm)
    assert same["status"] == "passed" and same["exit_code"] == 0
    assert check(same)["status"] == "passed" and "identical to the baseline" in check(same)["message"]
    assert same["instruction_counts"]["paths"]["default"]["per_inference"] == base     # equal, not within a tolerance
    assert check(same, "latency median")["status"] == "skipped"                         # emulated: never gated

    before = (tmp_path / "qemu.json").read_bytes()
    result, grown = run(tmp_path, "grown", cli, two, lite_arm, ok=False)
    assert result.exit_code == 17, result.output
    assert grown["bundle"]["key"] == "convstack/arm64-fp32" and grown["bundle"]["nb_sha256"] != stored["nb_sha256"]
    now = grown["instruction_counts"]["paths"]["default"]["per_inference"]
    assert now["total"] > base["total"] and now["simd_fp"] > base["simd_fp"]
    failed = check(grown)
    assert failed["status"] == "failed" and failed["kind"] == "count"
    line = (f"count regression: more instructions than the baseline: default: {now['total']:,} instructions per "
            f"inference, baseline {base['total']:,} (+{(now['total'] - base['total']) / base['total']:.2%}; simd_fp "
            f"{now['simd_fp'] - base['simd_fp']:+,}")
    assert failed["message"].startswith(line), failed["message"]
    assert f"error: convstack/arm64-fp32 on qemu-default: {line}" in result.output
    assert grown["instruction_counts"]["verdict"]["kind"] == "regression"
    assert (tmp_path / "qemu.json").read_bytes() == before                  # only --update-baseline writes it

    # a tolerance above the growth accepts it
    growth = 100.0 * (now["total"] - base["total"]) / base["total"]
    _, tolerated = run(tmp_path, "tolerated", cli, two, lite_arm, "--count-tolerance", f"{growth * 1.01 + 0.01:.2f}")
    assert tolerated["exit_code"] == 0 and "within --count-tolerance" in check(tolerated)["message"]
