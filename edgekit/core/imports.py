"""Import user code named `package.module:callable` (model factories, fine-tune hooks)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Callable

from edgekit.core.errors import EdgekitError


def import_callable(spec: str, what: str, expect: str, error: type[EdgekitError]) -> Callable:
    """Like `python -m`, the working directory is importable (after installed packages, so it cannot shadow them)."""
    module_name, _, attr = spec.partition(":")
    cwd = str(Path.cwd())
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or anything the module raises while importing
        raise error(f"cannot import {module_name!r} for {what} {spec!r}: {exc}",
                    "run from the folder that holds it, install it, or add its folder to PYTHONPATH") from exc
    found = getattr(module, attr, None)
    if not callable(found):
        raise error(f"{module_name} has no callable {attr!r}", expect)
    return found
