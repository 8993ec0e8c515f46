"""opt's own precisions on the bundled example: real sizes, simulated accuracy, and fp16 refused honestly."""

import pytest

from bundles import leftovers, manifest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def built(tmp_path_factory, cli):
    out = tmp_path_factory.mktemp("precisions")
    for q in ("fp32", "int8-weight", "int16-weight"):
        cli("build", "--quant", q, "--out", out, "--quiet")
    return out


def test_weight_only_sizes_and_accuracy(built):
    fp32 = manifest(built / "digits" / "arm64-fp32")["model"]
    for q, ratio in (("int8-weight", 0.3), ("int16-weight", 0.55)):
        m = manifest(built / "digits" / f"arm64-{q}")
        assert m["model"]["params_bytes"] < ratio * fp32["params_bytes"], q
        acc = m["parity"]["accuracy"]
        assert acc["fp32 reference"] - acc[f"{q} simulated"] <= 1.0
        assert m["quantization"]["tool"] == "paddle_lite_opt"
        assert "--quant_model=true" in m["commands"][0]["equivalent"]
    b16 = manifest(built / "digits" / "arm64-int16-weight")["parity"]["outputs"]["B"][0]
    b8 = manifest(built / "digits" / "arm64-int8-weight")["parity"]["outputs"]["B"][0]
    assert b16["snr_db"] > b8["snr_db"] + 30          # 8 more bits: ~48 dB in theory


def test_fp16_is_refused_when_opt_cannot_emit_it(tmp_path, cli):
    out = tmp_path / "out"
    result = cli("build", "--quant", "fp16", "--out", out, "--quiet", ok=False)
    assert result.exit_code == 8 and "without ARMv8.2 FP16 support" in result.output
    assert leftovers(out) == []


def test_quantised_precisions_are_refused_for_x86(tmp_path, cli):
    result = cli("build", "--quant", "int8-weight", "--target", "x86", "--out", tmp_path, ok=False)
    assert result.exit_code == 2 and "run only on ARM" in result.output
