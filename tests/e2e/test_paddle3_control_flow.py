"""A tensor-dependent `if` (`if x.mean() > self.threshold`) built from Paddle 3 and from Paddle 2.6, each branch checked.

Paddle 3 exports the `if` as `pd_op.if` (PIR), which edgekit translates into the legacy form Paddle 2.6 writes
(`conditional_block` x2, `logical_not`, `cast`, `select_input`); Paddle 2.6 writes that form itself. Each build
gets evaluation data that takes one branch (the condition is on the whole batch's mean, so every sample of a
file takes the same branch) and is checked against the dynamic model and against that branch's own output.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bundles import manifest, run_paddle3

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
BRANCHES = {"high": "branch_a", "low": "branch_b"}    # data file -> the branch its mean takes


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Paddle 3's PIR export of the seed model, data for each branch and the dynamic model's outputs on it."""
    out = tmp_path_factory.mktemp("paddle3-control-flow")
    run_paddle3(HERE / "paddle3_control_flow.py", out, timeout=300)
    with np.load(out / "expected.npz") as data:
        expected = {k: data[k] for k in data.files}
    for data_file, branch in BRANCHES.items():   # the two branches differ, so an output tells which one ran
        other = expected[f"{data_file}_branch_{'b' if branch == 'branch_a' else 'a'}"]
        assert np.abs(expected[data_file] - expected[f"{data_file}_{branch}"]).max() == 0.0
        assert np.abs(expected[data_file] - other).max() > 0.1
    return out, expected


def _check_bundle(bundle: Path, data: Path, expected: np.ndarray) -> dict:
    """Tier A within 1e-4, the control-flow note, and the bundle's reference outputs = the branch the data takes."""
    m = manifest(bundle)
    tier_a = {c["metric"]: c["value"] for c in m["parity"]["checks"] if c["tier"] == "A"}
    assert tier_a["max_abs"] <= 1e-4, tier_a                   # measured <= 1.2e-7
    notes = [n for n in m["parity"]["notes"] if n.startswith("control flow:")]
    assert notes and "2 control-flow blocks (2 conditional_block)" in notes[0], m["parity"]["notes"]
    assert "only the branches the evaluation samples take" in notes[0]
    with np.load(data) as d:                                   # golden vectors: every evaluation sample, in order
        assert np.array_equal(np.load(bundle / "golden" / "input_0.npy"), d["x"])
    assert np.abs(np.load(bundle / "golden" / "output_0.npy") - expected).max() <= 1e-5
    return m


@pytest.mark.parametrize("data_file", sorted(BRANCHES))
def test_pir_if_builds_on_each_branch(exported, cli, tmp_path, data_file):
    """PIR route: `pd_op.if` translated; the translation vs Paddle 3 on the source, tier A vs that reference."""
    out, expected = exported
    data = out / f"{data_file}.npz"
    cli("build", "-m", out / "pir", "--eval", data, "--target", "arm64", "--quant", "fp32", "--no-emulation",
        "--out", tmp_path, "--quiet")
    m = _check_bundle(tmp_path / "pir" / "arm64-fp32", data, expected[f"{data_file}_{BRANCHES[data_file]}"])
    assert m["model"]["origin"] == "pir"
    assert m["paddle3"]["check"]["max_abs"] <= 1e-5            # measured 0.0 on both branches
    assert m["paddle3"]["control_flow_blocks"] == 2
    legacy = m["paddle3"]["legacy_ops"]
    assert (legacy["conditional_block"], legacy["logical_not"], legacy["select_input"]) == (2, 1, 1), legacy
    assert m["paddle3"]["translated_ops"]["pd_op.if"] == 1


@pytest.mark.parametrize("data_file", sorted(BRANCHES))
def test_paddle26_factory_route_on_each_branch(exported, cli, tmp_path, data_file, monkeypatch):
    """Paddle 2.6 exports the same model code (its own conditional_block, the float threshold as a 0-D
    fill_constant, which Lite aborts on until `lite_safe` makes it [1]); checked against its dynamic graph."""
    out, expected = exported
    monkeypatch.chdir(HERE)
    data = out / f"{data_file}.npz"
    cli("build", "-m", "paddle3_control_flow:mean_gate", "--input", "x:-1x3x16x16", "--eval", data,
        "--target", "arm64", "--quant", "fp32", "--no-emulation", "--out", tmp_path, "--quiet")
    m = _check_bundle(tmp_path / "mean_gate" / "arm64-fp32", data,
                      expected[f"{data_file}_{BRANCHES[data_file]}"])
    assert m["model"]["origin"] == "dygraph"
    assert m["model"]["reference_check"]["max_abs"] <= 1e-5   # static vs Paddle 2.6's dynamic graph
    assert "conditional_block" in m["model"]["source_ops"]


@pytest.mark.parametrize("data_file", sorted(BRANCHES))
def test_paddle3_factory_route_on_each_branch(exported, cli, tmp_path, data_file, monkeypatch):
    """`--paddle 3`: Paddle 3 exports the seed model (float threshold) as PIR, checked there against the dynamic
    graph; edgekit translates the `if`."""
    out, expected = exported
    monkeypatch.chdir(HERE)
    data = out / f"{data_file}.npz"
    cli("build", "-m", "paddle3_control_flow:mean_gate", "--paddle", "3", "--input", "x:-1x3x16x16", "--eval", data,
        "--target", "arm64", "--quant", "fp32", "--no-emulation", "--out", tmp_path, "--quiet")
    m = _check_bundle(tmp_path / "mean_gate" / "arm64-fp32", data, expected[f"{data_file}_{BRANCHES[data_file]}"])
    assert m["model"]["origin"] == "paddle3-dygraph"
    assert m["paddle3"]["export_check"]["max_abs"] <= 1e-5
    assert m["paddle3"]["check"]["max_abs"] <= 1e-5


def test_pir_if_on_arm_kernels(exported, cli, tmp_path, lite_arm):
    """Tier C: the ARM .nb of the translated `if` under emulation. Lite 2.13's ARM reduce_mean over every element
    returned a wrong mean (0.0013 for 0.93) and took the wrong branch until `lite_safe` flattened the reduction."""
    out, expected = exported
    data = out / "high.npz"
    cli("build", "-m", out / "pir", "--eval", data, "--target", "arm64", "--quant", "fp32", "--lite-arm", lite_arm,
        "--out", tmp_path, "--quiet")
    m = _check_bundle(tmp_path / "pir" / "arm64-fp32", data, expected["high_branch_a"])
    tier_c = {c["metric"]: c["value"] for c in m["parity"]["checks"] if c["tier"] == "C"}
    assert tier_c["max_abs"] <= 1e-4, tier_c
