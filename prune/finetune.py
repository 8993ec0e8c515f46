"""Fine-tune a pruned model through the user's hook: `package.module:function(model, epochs)`.

The hook trains the model it is given, in place, and returns nothing or that model;
edgekit owns neither the data nor the optimiser. The pruned shapes must survive it:
a hook that rebuilds the model from its factory would silently undo the pruning.
"""

from __future__ import annotations

import logging
import time

from edgekit.core.errors import ConfigError
from edgekit.core.imports import import_callable

from .errors import PruneError

log = logging.getLogger(__name__)


def load_hook(spec: str):
    return import_callable(spec, "fine-tune hook", "name a function taking (model, epochs)", ConfigError)


def _shapes(layer) -> dict[str, tuple[int, ...]]:
    return {name: tuple(p.shape) for name, p in layer.named_parameters()}


def finetune(layer, spec: str, epochs: int) -> tuple[object, float]:
    """Run the hook; return (the trained layer in eval mode, seconds)."""
    import paddle

    hook = load_hook(spec)
    paddle.disable_static()
    before = _shapes(layer)
    layer.train()
    start = time.monotonic()
    try:
        returned = hook(layer, epochs)
    except Exception as exc:   # user code: its failure is theirs to see, in one line
        last = next((line.strip() for line in reversed(str(exc).splitlines()) if line.strip()), "")[:200]
        raise PruneError(f"fine-tune hook {spec} failed: {type(exc).__name__}: {last}",
                         "run the hook on the unpruned model first; EDGEKIT_DEBUG=1 shows the traceback") from exc
    seconds = time.monotonic() - start
    trained = layer if returned is None else returned
    if not isinstance(trained, paddle.nn.Layer):
        raise PruneError(f"fine-tune hook {spec} returned {type(returned).__name__}",
                         "train the model in place and return nothing (or the same model)")
    if _shapes(trained) != before:
        changed = [n for n, s in _shapes(trained).items() if before.get(n) != s][:3]
        raise PruneError(f"fine-tune hook {spec} changed the pruned model's shapes ({', '.join(changed) or 'parameters'})",
                         "train the model object it is given; do not rebuild it from the factory")
    trained.eval()
    log.info("fine-tuned %d epoch(s) with %s in %.1f s", epochs, spec, seconds)
    return trained, seconds
