
import pytest
from typer.testing import CliRunner

from edgekit.cli import app


@pytest.fixture(scope="session", autouse=True)
def calibration_cache(tmp_path_factory):
    """CLI builds cache calibrations; keep that cache out of the user's ~/.cache."""
    import os

    folder = tmp_path_factory.mktemp("calibration-cache")
    previous = os.environ.get("EDGEKIT_CACHE_DIR")
    os.environ["EDGEKIT_CACHE_DIR"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("EDGEKIT_CACHE_DIR", None)
    else:
        os.environ["EDGEKIT_CACHE_DIR"] = previous


@pytest.fixture(scope="session")
def cli():
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True):
        result = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


