"""Stage `lite`: `StaticModel` -> `LiteModel` (.nb) through paddle_lite_opt, plus the host runtime.

The names below load their module on first use: the x86 twin's child process (`_twin_child`) imports this package
for `runtime` alone and starts with every build's tier A, so it skips opt's and the artifacts' imports.
"""

from __future__ import annotations

import importlib

_WHERE = {"convert": "opt", "convert_safe": "safe", "nb_ops": "opt", "opt_version": "opt", "supported_ops": "opt",
          "unsupported_ops": "coverage", "UnsupportedOp": "coverage", "read_header": "nbfile", "NbHeader": "nbfile"}

__all__ = list(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
