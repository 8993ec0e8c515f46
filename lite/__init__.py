"""Stage `lite`: `StaticModel` -> `LiteModel` (.nb) through paddle_lite_opt, plus the host runtime."""

from .coverage import UnsupportedOp, unsupported_ops
from .nbfile import NbHeader, read_header
from .opt import convert, nb_ops, opt_version, supported_ops

__all__ = ["convert", "nb_ops", "opt_version", "supported_ops", "unsupported_ops", "UnsupportedOp", "read_header", "NbHeader"]
