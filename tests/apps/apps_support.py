"""What the apps' host tests share: the repository root and the skip-or-fail policy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a fresh Debian 12 machine needs for tests/apps (CI installs them).
DEBIAN_PACKAGES = "openjdk-17-jdk-headless junit4 cmake ninja-build g++ libstb-dev"


def required() -> bool:
    return os.environ.get("EDGEKIT_REQUIRE_EMULATION", "").strip().lower() in ("1", "true", "yes")


def unavailable(reason: str, *, packages: bool = True) -> None:
    """Skip, or fail when the environment must be complete (EDGEKIT_REQUIRE_EMULATION=1): never a silent pass."""
    if packages:
        reason = f"{reason} (Debian: apt-get install {DEBIAN_PACKAGES})"
    if required():
        pytest.fail(f"EDGEKIT_REQUIRE_EMULATION=1 but {reason}")
    pytest.skip(reason)
