"""The ONNX Runtime sessions the import checks run: CPU only, quiet, and the graph optimisations chosen by the check."""

from __future__ import annotations

import contextlib


# ONNX Runtime logs a failing node in red on stderr (severity ERROR) before it raises; the import checks catch the
# exception and say in their own words what it means (a simplification dropped, a model refused), so only FATAL
# messages may print.
QUIET = 4


def options(*, as_written: bool = False, basic: bool = True):
    """SessionOptions for the import checks: quiet (QUIET); `as_written` turns every graph optimisation off,
    otherwise `basic` keeps only the semantics-preserving rewrites (False: ONNX Runtime's default, all)."""
    import onnxruntime as ort

    found = ort.SessionOptions()
    found.log_severity_level = QUIET
    if as_written:
        found.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    elif basic:
        found.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return found


def session(model, *, as_written: bool = False):
    """A CPU session on `model` (a path or serialised bytes).

    `as_written` turns every graph optimisation off (the legalisation check compares two
    graphs as they are written); otherwise only the basic, semantics-preserving rewrites run.
    """
    import onnxruntime as ort

    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), options(as_written=as_written),
                                providers=["CPUExecutionProvider"])


@contextlib.contextmanager
def answers(what: str, hint: str):
    """ONNX Runtime's (and onnx's) own errors inside the block as one InputModelError line, "`what`: <the error's
    first line>" (they raise Fail/InvalidArgument/RuntimeException/ValueError types of their own)."""
    from edgekit.core.errors import EdgekitError, InputModelError

    try:
        yield
    except EdgekitError:
        raise
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        raise InputModelError(f"{what}: {(lines[0] if lines else type(exc).__name__)[:200]}",
                              hint) from exc
