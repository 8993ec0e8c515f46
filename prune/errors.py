"""Pruning errors are part of edgekit's one hierarchy."""

from edgekit.core.errors import PruneError

__all__ = ["PruneError"]
