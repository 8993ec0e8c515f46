"""The CLI's help must not import paddle (it takes seconds); it must be instant."""

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.mark.e2e    # the CLI in a fresh interpreter
def test_help_does_not_import_the_toolchain():
    out = _run(
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from edgekit.cli import app\n"
        "r = CliRunner()\n"
        "for args in (['--help'], ['build', '--help'], ['inspect', '--help'], ['parity', '--help']):\n"
        "    assert r.invoke(app, args).exit_code == 0, args\n"
        "print(sorted(m for m in ('paddle', 'paddleslim', 'paddlelite', 'cv2') if m in sys.modules))\n"
    )
    assert out.strip() == "[]"


@pytest.mark.e2e    # the CLI in a fresh interpreter
def test_build_help_explains_the_options():
    out = _run(
        "from typer.testing import CliRunner\n"
        "from edgekit.cli import app\n"
        "print(CliRunner().invoke(app, ['build', '--help'], env={'COLUMNS': '200'}).output)\n"
    )
    for needle in ("--target", "arm64", "--quant", "int8", "--calib", "--eval", "--input", "[preprocess]", "./build"):
        assert needle in out, needle
