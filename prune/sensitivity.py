"""Per-layer pruning sensitivity: prune one layer alone at each ratio, measure the task metric.

The result (layer -> {ratio: metric loss}) is cached as JSON in a caller-given folder,
keyed by the model's digest, the digest of the exact evaluation tensors, the criterion,
the ratio grid and the metric, so a second run with the same inputs reuses it and a
run with anything different recomputes it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence


from edgekit.core import atomic

log = logging.getLogger(__name__)

GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
FORMAT = 1


@dataclass(frozen=True)
class Sensitivity:
    curves: dict[str, dict[float, float]]     # layer -> {ratio: loss}
    baseline: float
    metric: str
    samples: int
    cache_file: str | None
    cached: bool

    def to_json(self) -> dict:
        return {"metric": self.metric, "baseline": self.baseline, "samples": self.samples, "cache_file": self.cache_file,
                "cached": self.cached,
                "curves": {k: {f"{r:g}": round(l, 4) for r, l in v.items()} for k, v in self.curves.items()}}


def measure(layers: Sequence[str], prune_one: Callable[[str, float], Callable[[], None]], evaluate: Callable[[], float],
            grid: Sequence[float] = GRID) -> tuple[float, dict[str, dict[float, float]]]:
    """`prune_one(layer, ratio)` prunes that layer alone and returns how to undo it."""
    baseline = evaluate()
    curves: dict[str, dict[float, float]] = {}
    for layer in layers:
        curves[layer] = {}
        for ratio in grid:
            restore = prune_one(layer, ratio)
            try:
                curves[layer][float(ratio)] = float(baseline - evaluate())
            finally:
                restore()
        log.info("sensitivity %s: %s", layer, {f"{r:g}": round(v, 3) for r, v in curves[layer].items()})
    return baseline, curves


def samples_digest(evaluation) -> str:
    """What an analysis' key records of its samples (an EvalSet): their digest, and for text lines that they run in
    width groups (since 2026-12-07; an analysis of lines padded to the widest has another key)."""
    return evaluation.digest() + ("|width-groups" if evaluation.samples.lines is not None else "")


def cache_key(model_digest: str, samples_digest: str, criterion: str, metric: str, layers: Sequence[str],
              grid: Sequence[float] = GRID) -> str:
    payload = json.dumps({"format": FORMAT, "model": model_digest, "samples": samples_digest, "criterion": criterion,
                          "metric": metric, "layers": list(layers), "grid": [float(g) for g in grid]}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def cached(folder: Path | None, key: str, samples: int, metric: str,
           compute: Callable[[], tuple[float, dict[str, dict[float, float]]]]) -> Sensitivity:
    """Read the analysis for `key` from `folder`, or compute and store it (atomically)."""
    path = folder / f"sensitivity-{key[:24]}.json" if folder is not None else None
    if path is not None and path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("key") == key:
                curves = {k: {float(r): float(l) for r, l in v.items()} for k, v in data["curves"].items()}
                return Sensitivity(curves, float(data["baseline"]), metric, samples, str(path), True)
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("ignoring unreadable sensitivity cache %s", path)
    baseline, curves = compute()
    if path is not None:
        atomic.write_json(path, {"key": key, "metric": metric, "samples": samples, "baseline": baseline,
                                 "curves": {k: {repr(r): l for r, l in v.items()} for k, v in curves.items()}}, indent=1)
    return Sensitivity(curves, baseline, metric, samples, str(path) if path else None, False)
