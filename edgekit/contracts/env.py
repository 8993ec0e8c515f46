"""The settings edgekit reads from the environment, each named here once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

LITE_ARM_ENV = "EDGEKIT_LITE_ARM"


def lite_arm_root(explicit: Path | None = None, environ: Mapping[str, str] | None = None) -> Path | None:
    """Paddle-Lite's ARM Linux runtime: `--lite-arm` when given, else EDGEKIT_LITE_ARM, else None; absolute."""
    environ = os.environ if environ is None else environ
    root = explicit or (Path(environ[LITE_ARM_ENV]) if environ.get(LITE_ARM_ENV) else None)
    return root.expanduser().absolute() if root is not None else None
