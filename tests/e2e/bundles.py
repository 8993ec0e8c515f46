"""Helpers the e2e tests share (a module of its own: `conftest` names several modules in this tree)."""

from __future__ import annotations

import json
from pathlib import Path


def manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def leftovers(out: Path) -> list:
    """Anything a failed build left behind (there must be nothing)."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.exists() else []
