"""Tool versions recorded in every manifest (the opt/runtime version lock starts here)."""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = ("paddlepaddle", "paddleslim", "paddlelite", "numpy", "opencv-python", "typer", "x2paddle", "onnx",
            "onnxruntime", "edgekit")


def source_revision() -> dict | None:
    """The git commit of the edgekit checkout that ran (None when installed from a wheel)."""
    from edgekit.core import proc

    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        head = proc.run(["git", "-C", str(root), "rev-parse", "HEAD"], timeout=10, what="git rev-parse")
        status = proc.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], timeout=10, what="git status")
    except Exception:  # git missing or broken: the revision is informative, never required
        return None
    if head.returncode != 0:
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


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
