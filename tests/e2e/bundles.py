"""Helpers the e2e tests share (a module of its own: `conftest` names several modules in this tree)."""

from __future__ import annotations

import json
from pathlib import Path


def manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def leftovers(out: Path) -> list:
    """Anything a failed build left behind (there must be nothing)."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.exists() else []


def paddle3_python() -> str:
    """The Paddle 3 interpreter (`./run tests` makes .venv-paddle3); skip without it, except in CI, where it fails."""
    import os

    import pytest

    python = os.environ.get("EDGEKIT_PADDLE3_PYTHON")
    if not python:
        if os.environ.get("CI") == "true":
            pytest.fail(f"EDGEKIT_PADDLE3_PYTHON is unset in CI ({os.environ.get('EDGEKIT_PADDLE3_UNAVAILABLE', '')})")
        pytest.skip("no Paddle 3 interpreter: EDGEKIT_PADDLE3_PYTHON is unset (./run tests makes .venv-paddle3)")
    return python


def run_paddle3(*args: str, env: dict | None = None, timeout: float = 600) -> None:
    """Run `args` with Paddle 3's interpreter in tests/e2e (where the Paddle 3 model files are); it must succeed."""
    import subprocess

    done = subprocess.run([paddle3_python(), *map(str, args)], cwd=Path(__file__).resolve().parent, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
