"""Tool versions recorded in every manifest (the opt/runtime version lock starts here)."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

PACKAGES = ("paddlepaddle", "paddleslim", "paddlelite", "numpy", "opencv-python-headless", "typer", "edgekit")


def collect() -> dict:
    found = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found
