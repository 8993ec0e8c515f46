"""PaddleSlim and Paddle log INFO lines and draw progress bars through their own handlers.

One context manager keeps them off the console unless -vv (DEBUG) was asked for.
"""

from __future__ import annotations

import contextlib
import io
import logging
from typing import Iterator


@contextlib.contextmanager
def quiet_toolchain(stderr: bool = True) -> Iterator[None]:
    """Silence paddle/paddleslim loggers and captured stdout (and stderr unless `stderr=False`)."""
    if logging.getLogger().isEnabledFor(logging.DEBUG):
        yield
        return
    names = [n for n in logging.root.manager.loggerDict if n.startswith(("paddleslim", "paddle"))]
    levels = {n: logging.getLogger(n).level for n in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.ERROR)
    sink = io.StringIO()
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(contextlib.redirect_stdout(sink))
            if stderr:
                stack.enter_context(contextlib.redirect_stderr(sink))
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
