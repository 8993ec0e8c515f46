"""PaddleSlim's pruners print through their own handlers: the shared quieting, stderr kept for real failures."""

import contextlib

from edgekit.core.quiet import quiet_toolchain


def quiet_paddleslim() -> contextlib.AbstractContextManager:
    return quiet_toolchain(stderr=False)
