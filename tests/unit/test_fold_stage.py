"""The fold stage's decision: a folded graph is used only when its check passes (pure logic, fakes)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from edgekit.build import stages
from edgekit.export import fold


@dataclass(frozen=True)
class _Samples:
    def head(self, n):
        return type("H", (), {"inputs": {"x": np.zeros((n, 1), np.float32)}})()


@dataclass(frozen=True)
class _Eval:
    samples: _Samples = _Samples()


@dataclass(frozen=True)
class _Rec:
    static: str = "unfolded"
    work: Path = Path("/nonexistent")
    evaluation: _Eval = _Eval()
    folding: dict | None = None

    def with_(self, **changes):
        return replace(self, **changes)


def _check(passed: bool):
    return {"samples": 8, "passed": passed,
            "outputs": [{"output": "y", "max_abs": 0.0 if passed else 0.5, "cosine": 1.0 if passed else 0.9,
                         "max_abs_limit": 1e-4, "passed": passed}]}


def _report():
    return {"conv_chains_folded": 2, "activations": {"hard_swish": 1}, "ops": {"before": 10, "after": 6}}


def test_a_folded_graph_that_computes_the_same_replaces_the_model(monkeypatch):
    monkeypatch.setattr(fold, "fold_program", lambda model, out: ("folded", _report()))
    monkeypatch.setattr(fold, "check", lambda model, folded, samples: _check(True))
    rec = stages.fold_graph(_Rec())
    assert rec.static == "folded" and rec.folding["applied"] is True and rec.folding["check"]["passed"]


def test_a_folded_graph_that_differs_is_not_used_and_the_record_says_why(monkeypatch):
    monkeypatch.setattr(fold, "fold_program", lambda model, out: ("folded", _report()))
    monkeypatch.setattr(fold, "check", lambda model, folded, samples: _check(False))
    rec = stages.fold_graph(_Rec())
    assert rec.static == "unfolded" and rec.folding["applied"] is False and "check failed on y" in rec.folding["reason"]


def test_nothing_to_fold(monkeypatch):
    monkeypatch.setattr(fold, "fold_program", lambda model, out: None)
    rec = stages.fold_graph(_Rec())
    assert rec.static == "unfolded" and rec.folding == {"applied": False, "reason": "nothing to fold"}
