"""Tool versions recorded in every manifest (the opt/runtime version lock starts here)."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

PACKAGES = ("paddlepaddle", "paddleslim", "paddlelite", "numpy", "opencv-python", "typer", "edgekit")


def collect() -> dict:
    found = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    try:
        import cv2  # the module actually loaded decides resizing, so record it, not only the distribution

        found["cv2"] = cv2.__version__
    except ImportError:
        found["cv2"] = None
    return found
