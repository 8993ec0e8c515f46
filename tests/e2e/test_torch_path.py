"""The PyTorch user's path: torch -> ONNX (in a PyTorch environment) -> edgekit build, checked against PyTorch.

PyTorch's releases need a newer Python than Paddle-Lite's 3.8-3.10, so the export runs
in a separate interpreter: EDGEKIT_TORCH_PYTHON (`./run tests` sets it to .venv-torch
when it could create that environment), else this interpreter when it has torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgekit.examples import torch_to_onnx
from edgekit.lite.runtime import LiteRunner

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _torch_python() -> str:
    given = os.environ.get("EDGEKIT_TORCH_PYTHON")
    if given:
        return given
    try:
        import torch  # noqa: F401
    except ImportError:
        marker = ROOT / ".venv-torch" / ".edgekit-unavailable"
        why = marker.read_text().strip().split("\t")[-1] if marker.is_file() else "not set up"
        pytest.skip(f"no Python with PyTorch: EDGEKIT_TORCH_PYTHON is unset and .venv-torch is {why} "
                    "(./run tests creates it where a CPU torch wheel is reachable)")
    return sys.executable


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("torch-export")
    done = subprocess.run([_torch_python(), torch_to_onnx.__file__, str(out), "--samples", "64"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_torch_model_builds_to_int8_and_the_twin_matches_pytorch(cli, exported, tmp_path):
    out = tmp_path / "out"
    cli("build", "-m", exported / "model.onnx", "--calib", exported / "calib.npz", "--eval", exported / "eval.npz",
        "--quant", "int8", "--out", out, "--quiet")
    bundle = next(out.glob("*/arm64-int8"))
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["parity"]["passed"] and manifest["onnx_import"]["feeds"] and "onnx" in manifest["source"]
    assert manifest["quantization"]["calibration_samples"] == 64

    # the bundle's FP32 x86 twin against PyTorch's own outputs, not only against ONNX Runtime
    with np.load(exported / "eval.npz") as loaded:
        x = loaded["x"]
    with np.load(exported / "eval_torch.npz") as loaded:
        torch_scores = loaded["scores"]
    feeds = [i["name"] for i in manifest["model"]["inputs"]]
    twin = LiteRunner(bundle / manifest["host_twin"]["file"], feeds).run({feeds[0]: x})[0]
    assert twin.shape == torch_scores.shape == (64, 10)
    assert np.max(np.abs(twin - torch_scores)) < 1e-4                        # measured 3.7e-8
    assert (twin.argmax(1) == torch_scores.argmax(1)).all()
