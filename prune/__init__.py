"""Stage `prune` (edgekit.prune): structured filter pruning with PaddleSlim.

A factory model is pruned in dynamic graph (L1-norm or FPGM), fine-tuned through the
user's hook and exported (`stage.prune_factory_model`); an exported inference model is
pruned as a static program with per-layer ratios from a cached sensitivity analysis
(`static.prune_inference_model`). Both give a `PrunedModel`: the pruned `StaticModel`
the later stages take, and a `PruneReport`. `run.prune_to_folder` is `edgekit prune`.

This package's top level holds only what the configuration needs (no Paddle, no
`edgekit.build.config`), so `edgekit.build.config` can import it directly; the stages are
imported from their modules.
"""

from edgekit.contracts.prune import (CRITERIA, KNOWN_KEYS, Choice, Criterion, Goal, PruneConfig, merge_prune,
                                     parse_prune, prune_config)
from .errors import PruneError
from .report import LayerRow, PruneReport

__all__ = ["CRITERIA", "KNOWN_KEYS", "Choice", "Criterion", "Goal", "PruneConfig", "merge_prune", "parse_prune",
           "prune_config", "PruneError", "LayerRow", "PruneReport"]
