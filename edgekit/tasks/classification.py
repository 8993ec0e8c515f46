"""Classification: logits or probabilities [N, classes] against integer labels (top-1, edgekit's original metric)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from edgekit.core.errors import ConfigError, DataError

from .base import Task, TaskKind, check_count, check_options, percent


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def as_probabilities(scores: np.ndarray) -> np.ndarray:
    """Rows that already are distributions (a softmax in the model) stay; logits go through a softmax."""
    scores = scores.astype(np.float64)
    if scores.size and scores.min() >= 0.0 and np.allclose(scores.sum(axis=-1), 1.0, atol=1e-3):
        return scores
    return softmax(scores)


@dataclass(frozen=True)
class Classification(Task):
    labels: tuple[str, ...] = ()          # class names for readable results; indices when empty

    kind = TaskKind.classification
    primary = "top1"

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "Classification":
        check_options(cls.kind, options, ("labels",))
        labels = options.get("labels", ())
        if not isinstance(labels, (list, tuple)) or not all(isinstance(n, str) for n in labels):
            raise ConfigError("task classification option labels is not a list of class names",
                              'write labels = ["cat", "dog", ...] or leave it out')
        return cls(tuple(labels))

    def options(self) -> dict:
        return {"labels": list(self.labels)} if self.labels else {}

    def _scores(self, outputs: Sequence[np.ndarray]) -> np.ndarray:
        if not outputs:
            raise DataError("task classification got no model outputs", "the model must return its class scores")
        out = np.asarray(outputs[0])
        return out.reshape(len(out), -1)

    def evaluate(self, outputs: Sequence[np.ndarray], truth: Sequence) -> dict[str, float]:
        predicted = np.asarray(self.predictions(outputs), np.int64)
        check_count(self.kind, len(predicted), truth)
        labels = np.asarray(truth, np.int64)
        return {"top1": percent(np.mean(predicted == labels)) if len(labels) else 0.0}

    def predictions(self, outputs: Sequence[np.ndarray]) -> list[int]:
        return [int(i) for i in np.argmax(self._scores(outputs), axis=1)]

    def postprocess(self, outputs: Sequence[np.ndarray]) -> list[dict]:
        probs = as_probabilities(self._scores(outputs))
        results = []
        for row in probs:
            index = int(np.argmax(row))
            name = self.labels[index] if index < len(self.labels) else str(index)
            results.append({"class": index, "label": name, "score": round(float(row[index]), 6)})
        return results

    def truth_from_json(self, raw: Any) -> list[int]:
        if not isinstance(raw, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in raw):
            raise DataError("classification truth is not a list of class indices", "write one integer label per sample")
        return list(raw)
