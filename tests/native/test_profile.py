"""The per-function profile on the real runner, plugin and Lite's unstripped ARM runtime (digits INT8 bundle only:
CI keeps it lean): rows add up to the counted total, and a second run (through the CLI) gives the same profile."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgekit.verify import profile
from edgekit.cli import app
from edgekit.contracts.settings import EmulationConfig
from edgekit.core.errors import EmulationUnavailable

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def settings(emulation):
    emulation("aarch64")                                   # skips (or fails when required) without the tools
    root = os.environ.get("EDGEKIT_LITE_ARM")
    try:
        profile.symbols_runtime(Path(root) if root else None)
    except EmulationUnavailable as exc:
        if os.environ.get("EDGEKIT_REQUIRE_EMULATION", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail(f"EDGEKIT_REQUIRE_EMULATION=1 but {exc.message}")
        pytest.skip(exc.message)
    return EmulationConfig(runtime=Path(root))


def test_digits_int8_profile_adds_up_and_is_identical_across_runs(settings, digits_int8):
    first = profile.profile_bundle(digits_int8, settings, cpu="default", cache=False)
    total = first["total"]
    assert total == first["counted"]["total"]              # the region the plugin counted, whole
    assert sum(k["total"] for k in first["kinds"]) == total
    assert sum(f["total"] for f in first["functions"]) == total
    assert sum(p["total"] for p in first["by_precision"].values()) == total
    # measured 782,355 (winograd INT8: int16 GEMM 369,712; fp32_to_int8 12,488)
    assert 700_000 < total < 900_000
    kinds = {k["kind"]: k for k in first["kinds"]}
    assert kinds["int8_gemm"]["share"] > 0.6
    assert first["int8_adds"]["total"] == kinds["conversion"]["total"] > 10_000
    assert any(f["function"].endswith("fp32_to_int8") for f in first["functions"])

    done = CliRunner().invoke(app, ["inspect", str(digits_int8), "--profile", "--cpu", "default", "--json"],
                              env={"EDGEKIT_LITE_ARM": str(settings.runtime)})
    assert done.exit_code == 0, done.output
    second = json.loads(done.output)
    assert first.pop("cached") is False and second.pop("cached") is False     # two runs, no cache
    assert second == first                                 # every function, every class: equal
