"""The lean CI share of bench/bench_mutations.py (issue 32): seeded mutations of a bundle's manifest, task.json,
preprocess.json and golden index, a PIR program and an inference.yml give a one-line refusal or work, never a
traceback. The bench runs 10,000 of each, in child processes that also count deaths by signal."""

from __future__ import annotations

import pytest

import file_mutations

from edgekit.consumers import inspection

LEAN = 100      # mutations per kind here; the bench's figure is 10,000


@pytest.fixture(autouse=True)
def _no_runtime_child(monkeypatch):
    monkeypatch.setattr(inspection, "_host_runtime_version", lambda: None)   # no paddle_lite_opt child process


@pytest.mark.parametrize("kind", sorted(file_mutations.kinds()))
def test_seeded_mutations_give_a_refusal_or_work_never_a_traceback(kind, tmp_path):
    case = file_mutations.kinds()[kind](tmp_path)
    case.read()                                   # the unmutated file passes every reader
    result = file_mutations.run(case, seed=32, start=0, count=LEAN)
    assert result["tracebacks"] == [], result
    refused = sum(n for name, n in result["outcomes"].items() if name.endswith("Error"))
    assert refused > LEAN // 10, result["outcomes"]          # the mutations do reach the readers' checks
    case.read()                                   # restored
