"""PaddleSlim's pruners log INFO lines through their own handlers; keep them for -vv only."""

from __future__ import annotations

import contextlib
import io
import logging


@contextlib.contextmanager
def quiet_paddleslim():
    if logging.getLogger().isEnabledFor(logging.DEBUG):
        yield
        return
    names = [n for n in logging.root.manager.loggerDict if n.startswith("paddleslim")]
    levels = {n: logging.getLogger(n).level for n in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.ERROR)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink):   # lazy_apply prints; stderr stays for real failures
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
