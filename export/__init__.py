"""Stage `export`: a model source -> `StaticModel` (legacy .pdmodel + .pdiparams), checked."""

from .dygraph import export_dygraph
from .inference import cross_check, load_inference
from .runner import StaticRunner

__all__ = ["export_dygraph", "load_inference", "cross_check", "StaticRunner"]
