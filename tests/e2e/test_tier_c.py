"""Tier C for real: the bundled example's ARM model.nb on Paddle-Lite's ARM runtime under qemu (EDGEKIT_LITE_ARM),
through `edgekit build` and `edgekit parity --emulate`."""

from __future__ import annotations

import json
import shutil
import struct

import numpy as np
import pytest
from bundles import leftovers, manifest

from edgekit.model.artifacts import sha256_file
from edgekit.lite import native

pytestmark = pytest.mark.e2e

EMULATED = "arm64 .nb (emulated ARM)"


@pytest.fixture(scope="module")
def int8_bundle(tmp_path_factory, lite_arm, cli):
    out = tmp_path_factory.mktemp("tier-c-int8")
    cli("build", "--target", "arm64", "--quant", "int8", "--out", out, "--lite-arm", lite_arm, "--quiet")
    return out / "digits" / "arm64-int8"


def test_int8_arm_kernels_follow_the_simulation(int8_bundle, lite_arm):
    m = manifest(int8_bundle)
    accuracy, emulation = m["parity"]["accuracy"], m["emulation"]
    assert emulation["ran"] and emulation["samples"] == emulation["of"] == 360
    assert abs(accuracy[EMULATED] - accuracy["int8 simulated"]) <= 0.5          # measured: both 97.22
    assert emulation["agreement_with_b"]["cosine"] >= 0.9999                     # measured 0.99999999
    assert emulation["agreement_with_b"]["top1_agreement"] >= 99.0               # measured 100
    (check,) = [c for c in m["parity"]["checks"] if c["tier"] == "C"]
    assert check["metric"] == "top1_drop_points" and check["passed"] and check["limit"] == 1.0
    assert check["value"] == pytest.approx(accuracy["fp32 reference"] - accuracy[EMULATED])
    # what reproduces the run: the runtime (version = the .nb's opt version, sha256), qemu, the kernel path
    runtime = native.find_runtime(lite_arm, "aarch64")
    assert emulation["runtime_version"] == m["model"]["opt_version"] == "v2.13-rc"
    assert emulation["runtime_sha256"] == runtime.sha256
    assert emulation["qemu"].startswith("qemu-aarch64 version") and emulation["int8_kernels"] == "neon"
    assert emulation["ms_per_sample_median"] > 0 and emulation["processes"] >= 1
    # one process ran one sample alone first; its peak RSS left every core usable. The peak of a process grows
    # with the samples it runs (measured 501 MB with 180 samples a process; 1.09 GB in one CI run), so it is
    # judged against the memory the probe saw, not against a fixed figure
    probe = emulation["memory_probe"]
    assert emulation["processes"] == 1 + probe["processes_after_probe"]
    assert probe["limited_by"] in ("cores", "samples")
    assert 0 < emulation["peak_rss_kb"] * probe["processes_after_probe"] < probe["available_mb"] * 1024
    assert "tier C arm64 .nb (emulated ARM) vs fp32" in (int8_bundle / "parity.txt").read_text()


def test_fp32_arm_kernels_match_the_reference(tmp_path, lite_arm, cli):
    cli("build", "--target", "arm64", "--quant", "fp32", "--out", tmp_path, "--lite-arm", lite_arm, "--quiet")
    m = manifest(tmp_path / "digits" / "arm64-fp32")
    (stats,) = m["parity"]["outputs"]["C"]
    assert stats["max_abs"] <= 1e-4 and stats["cosine"] >= 0.99999                # measured 9.5e-6
    checks = [c for c in m["parity"]["checks"] if c["tier"] == "C"]
    assert {c["metric"] for c in checks} == {"max_abs", "cosine"} and all(c["passed"] for c in checks)
    assert m["parity"]["accuracy"][EMULATED] == m["parity"]["accuracy"]["fp32 reference"]


def test_dot_product_kernels_give_the_same_outputs(tmp_path, int8_bundle, lite_arm, cli):
    cli("build", "--target", "arm64", "--quant", "int8", "--out", tmp_path, "--lite-arm", lite_arm, "--cpu", "a55",
        "--quiet")
    a55, neon = manifest(tmp_path / "digits" / "arm64-int8"), manifest(int8_bundle)
    assert a55["emulation"]["int8_kernels"] == "dotprod" and a55["emulation"]["cpu_profile"] == "a55"
    assert a55["parity"]["outputs"]["C"] == neon["parity"]["outputs"]["C"]          # bit-identical figures
    assert a55["parity"]["accuracy"][EMULATED] == neon["parity"]["accuracy"][EMULATED]


def test_armv7_runs_on_the_armhf_runtime(tmp_path, lite_arm, cli):
    try:
        native.find_runtime(lite_arm, "armhf")
        native.check_tools("armhf")
    except Exception as exc:   # the armhf runtime is optional in a user's runtime folder
        pytest.skip(f"no armhf runtime or tools: {exc}")
    cli("build", "--target", "armv7", "--quant", "int8", "--out", tmp_path, "--lite-arm", lite_arm, "--quiet")
    m = manifest(tmp_path / "digits" / "armv7-int8")
    assert m["emulation"]["abi"] == "armhf" and m["emulation"]["int8_kernels"] == "neon"
    accuracy = m["parity"]["accuracy"]
    assert abs(accuracy["armv7 .nb (emulated ARM)"] - accuracy["int8 simulated"]) <= 0.5
    assert m["emulation"]["agreement_with_b"]["cosine"] >= 0.9999


def test_tier_c_records_instruction_counts_per_kernel_path(int8_bundle, lite_arm, cli):
    from edgekit.verify import counts
    from edgekit.contracts.settings import EmulationConfig
    from edgekit.verify.emulator import Emulator

    m = manifest(int8_bundle)
    recorded = m["emulation"]["instruction_counts"]
    assert recorded["ran"] and set(recorded["paths"]) == {"default", "a55"}      # one per kernel family (a53: on request)
    neon, dot = recorded["paths"]["default"], recorded["paths"]["a55"]
    assert (neon["kernel_path"], dot["kernel_path"]) == ("neon", "dotprod")
    # measured: 782,527 plain NEON, 456,431 with 159,808 SDOT/UDOT; the first run ~3.0 M (Lite's one-time work)
    assert 300_000 < neon["per_inference"]["total"] < 3_000_000 and neon["per_inference"]["dot_product"] == 0
    assert dot["per_inference"]["total"] < 0.7 * neon["per_inference"]["total"]
    assert dot["per_inference"]["dot_product"] > 0.2 * dot["per_inference"]["simd_fp"]
    assert neon["first_inference"] > neon["per_inference"]["total"] and neon["timed_totals"][0] == neon["per_inference"]["total"]
    # the same figure from a fresh process outside the build (no cache): equal, not approximately equal. Golden
    # input 0 is evaluation sample 0 (both spread from index 0), the sample tier C counted.
    emulator = Emulator.prepare("aarch64", EmulationConfig(runtime=lite_arm), 600)
    sample = {i["name"]: np.load(int8_bundle / i["file"])[:1] for i in m["golden"]["inputs"]}
    again = counts.measure(emulator, int8_bundle / "model.nb", sample, profiles=["default"])
    assert not again["cached"] and again["paths"]["default"]["per_inference"] == neon["per_inference"]

    shown = cli("inspect", int8_bundle).output
    assert f"default (neon kernels): {neon['per_inference']['total']:,}" in shown and "dot-product" in shown
    bench = json.loads(cli("bench", int8_bundle, int8_bundle, "--json").output)
    assert bench["bundles"][1]["paths"]["a55"]["vs_first"] == 1.0
    assert bench["bundles"][0]["paths"]["a55"]["total"] == dot["per_inference"]["total"]


def test_parity_emulate_replays_the_golden_vectors_on_model_nb(int8_bundle, lite_arm, cli):
    result = cli("parity", int8_bundle, "--emulate", "--lite-arm", lite_arm)
    assert "on model.nb under qemu (aarch64, runtime v2.13-rc, neon INT8 kernels)" in result.output
    assert "✓ tier C arm64 model.nb (emulated ARM) vs golden" in result.output


def test_a_model_from_another_opt_version_is_refused(tmp_path, int8_bundle, lite_arm, cli):
    """A bundle whose .nb another opt wrote (header v2.12; checksums consistent): the runner refuses it."""
    bundle = tmp_path / "bundle"
    shutil.copytree(int8_bundle, bundle)
    nb = bundle / "model.nb"
    data = bytearray(nb.read_bytes())
    data[2:18] = struct.pack("16s", b"v2.12")
    nb.write_bytes(bytes(data))
    m = manifest(bundle)
    m["files"]["model.nb"] = {"sha256": sha256_file(nb), "bytes": nb.stat().st_size}
    (bundle / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    result = cli("parity", bundle, "--emulate", "--lite-arm", lite_arm, ok=False)
    assert result.exit_code == 3
    assert "v2.12" in result.output and "v2.13-rc" in result.output


def test_without_a_runtime_the_report_says_why_tier_c_did_not_run(tmp_path, cli, monkeypatch):
    monkeypatch.delenv("EDGEKIT_LITE_ARM", raising=False)
    monkeypatch.delenv("EDGEKIT_REQUIRE_EMULATION", raising=False)
    cli("build", "--target", "arm64", "--quant", "fp32", "--out", tmp_path / "a", "--quiet")
    bundle = tmp_path / "a" / "digits" / "arm64-fp32"
    assert manifest(bundle)["emulation"]["ran"] is False
    text = (bundle / "parity.txt").read_text()
    assert "tier C (the ARM .nb under emulation) not run: no Paddle-Lite ARM Linux runtime is configured" in text
    assert "tier C" not in "".join(line for line in text.splitlines() if "✓" in line)   # no tier-C check passed

    monkeypatch.setenv("EDGEKIT_REQUIRE_EMULATION", "1")          # CI: a missing runtime is a failure
    result = cli("build", "--target", "arm64", "--quant", "fp32", "--out", tmp_path / "b", "--quiet", ok=False)
    assert result.exit_code == 13 and "no Paddle-Lite ARM Linux runtime is configured" in result.output
    assert leftovers(tmp_path / "b") == []


def test_a_runtime_of_the_wrong_architecture_is_refused(tmp_path, lite_arm, cli):
    arm64_only = lite_arm / "inference_lite_lib.armlinux.armv8"     # its cxx/ holds the AArch64 library
    result = cli("build", "--target", "armv7", "--quant", "fp32", "--out", tmp_path, "--lite-arm", arm64_only,
                 "--quiet", ok=False)
    assert result.exit_code == 2
    assert "is a AArch64 library, not armhf" in result.output
    assert leftovers(tmp_path) == []
