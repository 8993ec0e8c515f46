import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgekit.cli import app


@pytest.fixture(scope="session")
def cli():
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True):
        result = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


def manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def leftovers(out: Path) -> list:
    """Anything a failed build left behind (there must be nothing)."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.exists() else []
