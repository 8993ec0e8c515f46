"""Paddle-Lite 2.13's runtime aborts on a reshape to 0-D (issue 30: the public PP-OCRv6_rec_small.onnx).

`tinymodels.ZeroDReshapeNet` holds the op as X2Paddle writes it for ONNX `Reshape(x, [])`: opt converts it, Paddle
runs it, and Lite's predictor stops the process (`reshape_op.cc:135 InferShapeImpl: Input shape error`, SIGABRT).

- the `zero-d-reshapes` rewrite (lite/rewrite.py) makes it a reshape to [1]: the build passes tier A at 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
BUILD = ("build", "-m", "tinymodels:zero_d_reshape_net", "--input", "x:-1x2x8", "--target", "arm64", "--quant", "fp32",
         "--no-emulation", "--quiet")


def test_reshape_to_zero_d_is_rewritten_and_builds(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(HERE)
    cli(*BUILD, "--out", tmp_path)
    manifest = json.loads((tmp_path / "zero_d_reshape_net" / "arm64-fp32" / "manifest.json").read_text())
    tier_a = {c["metric"]: c["value"] for c in manifest["parity"]["checks"] if c["tier"] == "A"}
    assert tier_a["max_abs"] <= 1e-6, tier_a                      # measured 0
    rewrites = json.dumps(manifest)
    assert rewrites.count('"rewrite": "reshape2 shape [] -> [1]"') == 2, "the target's and the twin's conversion"
