"""Pruned models leave the prune stage through the one export path (edgekit.export.dygraph)."""

from edgekit.export.dygraph import export_layer

__all__ = ["export_layer"]
