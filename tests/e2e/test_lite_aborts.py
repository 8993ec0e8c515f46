"""Paddle-Lite 2.13's runtime aborts on a reshape to 0-D (issue 30: the public PP-OCRv6_rec_small.onnx).

`tinymodels.ZeroDReshapeNet` holds the op as X2Paddle writes it for ONNX `Reshape(x, [])`: opt converts it, Paddle
runs it, and Lite's predictor stops the process (`reshape_op.cc:135 InferShapeImpl: Input shape error`, SIGABRT).

- the `zero-d-reshapes` rewrite (lite/rewrite.py) makes it a reshape to [1]: the build passes tier A at 0, and
  tier C on Lite's ARM runtime (which throws on the same check);
- without that rewrite, the build's x86 twin runs in a child process (verify/tiers.py: twin_process): the build
  fails in one line naming the stage and Lite's check, exit 8, and leaves nothing in --out. Before, the whole CLI
  died from SIGABRT with no edgekit message and left its staging folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bundles import leftovers

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


def test_the_rewritten_reshape_runs_on_arm_under_qemu(cli, tmp_path, monkeypatch, lite_arm):
    """Lite's ARM runtime throws on the same check (the runner: `Paddle-Lite failed while running`); rewritten, tier C
    gives Paddle's outputs."""
    monkeypatch.chdir(HERE)
    cli(*(a for a in BUILD if a != "--no-emulation"), "--out", tmp_path)
    manifest = json.loads((tmp_path / "zero_d_reshape_net" / "arm64-fp32" / "manifest.json").read_text())
    tier_c = {c["metric"]: c["value"] for c in manifest["parity"]["checks"] if c["tier"] == "C"}
    assert tier_c["max_abs"] <= 1e-6, tier_c                      # measured 6e-8


# the CLI in a process of its own (a crash must not take the test run down), with the rewrite taken out
WITHOUT_REWRITE = ("import sys\n"
                   "from edgekit.lite import rewrite\n"
                   "rewrite.REWRITES = tuple(r for r in rewrite.REWRITES if r[0] != 'zero-d-reshapes')\n"
                   "from edgekit.cli import main\n"
                   "sys.argv[0] = 'edgekit'\n"
                   "main()\n")


def test_lite_abort_in_tier_a_is_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", WITHOUT_REWRITE, *BUILD, "--out", str(out)], cwd=HERE,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 8, (done.returncode, done.stderr[-2000:])         # ConversionError, not -6 (SIGABRT)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: tier-a: Paddle-Lite's x86 runtime crashed running the x86 twin model_x86.nb (died from "
                      "SIGABRT: reshape_op.cc:135 InferShapeImpl: Input shape error)"], done.stderr[-2000:]
    assert "  fix: opt converted an op" in done.stderr
    assert leftovers(out) == []
