"""The fold pass's decision: a folded graph is used only when its check passes (pure logic, fakes)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgekit.build import optimise
from edgekit.export import fold
from edgekit.model.parity import OutputCheck, SameCheck
from edgekit.model.passes import run_passes
from edgekit.model.reports import Folding


@dataclass(frozen=True)
class _Samples:
    def head(self, n):
        return type("H", (), {"inputs": {"x": np.zeros((n, 1), np.float32)}})()


@dataclass(frozen=True)
class _Eval:
    samples: _Samples = _Samples()


def _state():
    return optimise.Prepared("unfolded", _Eval(), None)


def _check(passed: bool) -> SameCheck:
    return SameCheck("folded vs unfolded", 8, (OutputCheck("y", 0.0 if passed else 0.5, 1.0 if passed else 0.9, 1e-4,
                                                           passed),))


def _report():
    return {"conv_chains_folded": 2, "activations": {"hard_swish": 1}, "ops": {"before": 10, "after": 6}}


def _fold(monkeypatch, found, passed=True):
    monkeypatch.setattr(fold, "fold_program", lambda model, out: found)
    monkeypatch.setattr(fold, "check", lambda model, folded, samples: _check(passed))
    state, (record,) = run_passes(_state(), [optimise.fold_pass(Path("/nonexistent"))])
    return state, optimise.folding_entry(record)


def test_a_folded_graph_that_computes_the_same_replaces_the_model(monkeypatch):
    state, entry = _fold(monkeypatch, ("folded", _report()))
    assert state.static == "folded" and entry["applied"] is True and entry["check"]["passed"]
    assert entry["conv_chains_folded"] == 2
    folding = Folding.of(entry)             # what the record holds: typed reads, the same entry for the manifest
    assert folding.applied and folding.check["passed"] and folding.to_json() == entry


def test_a_folded_graph_that_differs_is_not_used_and_the_record_says_why(monkeypatch):
    state, entry = _fold(monkeypatch, ("folded", _report()), passed=False)
    assert state.static == "unfolded" and entry["applied"] is False and "check failed on y" in entry["reason"]
    assert entry["check"]["outputs"][0]["max_abs"] == 0.5


def test_nothing_to_fold(monkeypatch):
    state, entry = _fold(monkeypatch, None)
    assert state.static == "unfolded" and entry == {"applied": False, "reason": "nothing to fold"}


def test_folding_off_records_nothing():
    assert optimise.folding_entry(None) is None
