"""The INT8 search with its independent calibrations on a process pool chooses what the serial search chooses.

The model is test_quant_fallback's OutlierNet (one layer that int8 ruins), so the search
runs all three kinds of candidate: two algorithms, the per-layer sensitivity runs and the
fallback loop.
"""

import numpy as np
import pytest

from test_quant_fallback import BUDGET, QUANT, setup  # noqa: F401  (the module-scoped fixture)

from edgekit.core import executors
from edgekit.export import StaticRunner
from edgekit.quantize.search import SearchPlan, quantize_to_budget

pytestmark = pytest.mark.e2e


def _search(setup, name, executor):  # noqa: F811
    root, static, calibration, evaluation = setup
    plan = SearchPlan(BUDGET, algos=("avg", "abs_max"))
    return quantize_to_budget(static, calibration, evaluation, QUANT, plan, root / name, None, executor=executor)


def _candidates(result):
    return [(c.algo, c.skip, c.purpose, c.holds, c.samples, c.score.to_json()) for c in result.candidates]


def test_pool_and_serial_choose_the_same_candidate(setup):  # noqa: F811
    serial = _search(setup, "serial", executors.SerialExecutor())
    with executors.PoolExecutor(workers=2) as pool:
        pooled = _search(setup, "pool", pool)
    assert serial.chosen.skip and serial.holds          # the fallback kept the outlier layer in float
    assert (pooled.chosen.algo, pooled.chosen.skip) == (serial.chosen.algo, serial.chosen.skip)
    assert _candidates(pooled) == _candidates(serial)   # same candidates, same order, same scores
    assert [s.layer.key for s in pooled.sensitivity] == [s.layer.key for s in serial.sensitivity]
    assert pooled.calibrations == serial.calibrations
    # PaddleSlim's files differ byte-wise even between two serial runs (measured); the quantised programs agree
    evaluation = setup[3]
    outputs = [StaticRunner(r.quantized.model).run(evaluation.inputs) for r in (serial, pooled)]
    for a, b in zip(*outputs):
        assert np.array_equal(a, b)
