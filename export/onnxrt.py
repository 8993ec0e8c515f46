"""The ONNX Runtime sessions the import checks run: CPU only, quiet, and the graph optimisations chosen by the check."""

from __future__ import annotations


def session(model, *, as_written: bool = False):
    """A CPU session on `model` (a path or serialised bytes).

    `as_written` turns every graph optimisation off (the legalisation check compares two
    graphs as they are written); otherwise only the basic, semantics-preserving rewrites run.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if as_written
                                        else ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), options,
                                providers=["CPUExecutionProvider"])
