"""Stage `prune` (edgekit.prune): structured filter pruning with PaddleSlim.

A factory model is pruned in dynamic graph (L1-norm or FPGM), fine-tuned through the
user's hook and exported; an exported inference model is pruned as a static program
with per-layer ratios from a cached sensitivity analysis. Both give a `PrunedModel`:
the pruned `StaticModel` the later stages take, and a `PruneReport`. Paddle and
PaddleSlim are imported inside the functions, so importing this package is cheap.
"""

from .config import CRITERIA, Choice, Criterion, Goal, PruneConfig, parse_prune, prune_config
from .errors import PruneError
from .report import LayerRow, PruneReport
from .run import measure_nb, prune_model, prune_to_folder
from .stage import PrunedModel, prune_factory_model
from .static import prune_inference_model

__all__ = ["CRITERIA", "Choice", "Criterion", "Goal", "PruneConfig", "parse_prune", "prune_config", "PruneError",
           "LayerRow", "PruneReport", "PrunedModel", "prune_factory_model", "prune_inference_model", "prune_model",
           "prune_to_folder", "measure_nb"]
