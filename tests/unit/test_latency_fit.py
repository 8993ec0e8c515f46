"""The latency estimate's fit (edgekit/verify/latency.py): non-negative least squares, leave-one-model-out validation
and the choice of cost model on fixed counts; and the shipped coefficients refitted from the counts bench_costs.py
measured (tests/data/costs/bench_costs_counts.json), against ESTIMATES and docs/costs.md's table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgekit.verify import latency

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "tests" / "data" / "costs" / "bench_costs_counts.json"


def counts(dot=0, simd=0, ls=0, br=0, other=0):
    """One path's per-inference counts (`simd` excludes the dot products, as `simd_fp` does not)."""
    return {"total": dot + simd + ls + br + other, "simd_fp": dot + simd, "load_store": ls, "branch": br,
            "other": other, "dot_product": dot}


def synthetic(costs_ns: dict[str, float], shapes: dict[str, tuple[dict, dict]], label="test core"):
    """Counts of FP32 (default path) and INT8 (a55 path) per model, and a core whose published latencies are exactly
    sum(class count x cost)."""
    table = {m: {"fp32": {"default": f}, "int8": {"a55": i}} for m, (f, i) in shapes.items()}
    ms = {m: tuple(sum(latency.base_counts(c)[k] * costs_ns.get(k, 0.0) for k in latency.BASE_CLASSES) / 1e6
                   for c in (f, i)) for m, (f, i) in shapes.items()}
    return table, latency.Core(label, {"fp32": "default", "int8": "a55"}, ms)


SHAPES = {  # five models with different class mixes (millions of instructions)
    "a": (counts(simd=60e6, ls=30e6, br=10e6, other=20e6), counts(dot=10e6, simd=20e6, ls=20e6, br=8e6, other=15e6)),
    "b": (counts(simd=30e6, ls=25e6, br=9e6, other=18e6), counts(dot=4e6, simd=15e6, ls=22e6, br=9e6, other=16e6)),
    "c": (counts(simd=10e6, ls=8e6, br=5e6, other=6e6), counts(dot=1e6, simd=6e6, ls=7e6, br=5e6, other=6e6)),
    "d": (counts(simd=400e6, ls=120e6, br=30e6, other=60e6), counts(dot=90e6, simd=80e6, ls=70e6, br=20e6, other=40e6)),
    "e": (counts(simd=50e6, ls=40e6, br=20e6, other=10e6), counts(dot=5e6, simd=30e6, ls=35e6, br=18e6, other=9e6)),
}


def test_nnls_is_the_constrained_optimum():
    rng = np.random.default_rng(0)
    for _ in range(30):
        a, b = rng.standard_normal((10, 4)), rng.standard_normal(10)
        x = latency.nnls(a, b)
        gradient = a.T @ (a @ x - b)
        # Karush-Kuhn-Tucker, sufficient for this convex problem: x >= 0, no descent along a free coordinate, none
        # into the orthant along a coordinate held at 0
        assert np.all(x >= 0)
        assert np.allclose(gradient[x > 0], 0, atol=1e-9)
        assert np.all(gradient[x == 0] >= -1e-9)
    # a column that only hurts gets cost 0 instead of a negative one
    a = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]])
    assert latency.nnls(a, np.array([1.0, 2.0, 3.0]) - 0.5)[1] == 0.0
    assert np.allclose(np.linalg.lstsq(a, np.array([0.5, 1.5, 2.5]), rcond=None)[0][1], -0.5)


def test_nnls_agrees_with_scipy():
    nnls = pytest.importorskip("scipy.optimize").nnls
    rng = np.random.default_rng(1)
    for _ in range(30):
        a, b = rng.random((10, 5)), rng.standard_normal(10) + 1
        assert np.allclose(latency.nnls(a, b), nnls(a, b)[0], atol=1e-8)


def test_the_fit_recovers_per_class_costs_and_the_choice_takes_the_simplest_exact_model():
    truth = {"dot_product": 0.05, "simd_rest": 0.2, "load_store": 1.5, "branch": 0.8, "other": 0.8}
    table, core = synthetic(truth, SHAPES)
    found = latency.evaluate(table, core, list(SHAPES))
    assert found["dot+simd+load_store+scalar"]["ns_per_instruction"] == {
        "dot_product": 0.05, "simd_rest": 0.2, "load_store": 1.5, "branch+other": 0.8}
    assert found["dot+simd+load_store+scalar"]["loo_error_pct"] == {"median": 0.0, "max": 0.0}
    assert found["per_class"]["loo_error_pct"]["max"] == 0.0                 # exact too, but one parameter more
    assert found["total"]["loo_error_pct"]["max"] > 5
    assert latency.choose(found) == "dot+simd+load_store+scalar"
    rows = found["dot+simd+load_store+scalar"]["loo"]
    assert rows["d"]["speedup_published"] == rows["d"]["speedup_predicted"]


def test_one_cost_per_instruction_is_chosen_when_it_explains_the_data():
    table, core = synthetic({k: 0.3 for k in latency.BASE_CLASSES}, SHAPES)
    found = latency.evaluate(table, core, list(SHAPES))
    assert latency.choose(found) == "total"
    assert found["total"]["ns_per_instruction"] == {"total": 0.3}


def test_leave_one_model_out_keeps_both_precisions_of_the_model_out():
    truth = {"dot_product": 0.1, "simd_rest": 0.2, "load_store": 1.0, "branch": 0.5, "other": 0.5}
    table, core = synthetic(truth, SHAPES)
    wrong = dict(core.published, c=(core.published["c"][0] * 2, core.published["c"][1] * 2))   # one outlier model
    core = latency.Core(core.label, core.paths, wrong)
    rows = latency.leave_one_model_out(table, core, list(SHAPES), latency.CANDIDATES["dot+simd+load_store+scalar"])
    assert rows["c"]["error_pct"] == [-50.0, -50.0]       # predicted from the four others: the true costs
    assert rows["c"]["speedup_predicted"] == rows["c"]["speedup_published"]
    assert all(abs(e) > 0 for m in "abde" for e in rows[m]["error_pct"])   # the outlier is in their fits


def test_the_estimate_uses_each_core_s_path_and_cost_model():
    paths = {"default": {"per_inference": counts(simd=60e6, ls=25e6, br=10e6, other=5e6)},
             "a55": {"per_inference": counts(dot=8e6, simd=12e6, ls=12e6, br=5e6, other=3e6)}}
    int8 = latency.estimate(paths, "int8")
    assert "not a measurement" in int8["label"] and "leave-one-model-out" in int8["source"]
    for key, shipped in latency.ESTIMATES.items():
        core = latency.CORES[key]
        entry = int8["cores"][core.label]
        assert entry["kernel_path"] == core.paths["int8"] and entry["cost_model"] == shipped["model"]
        assert entry["loo_error_pct"] == shipped["loo_error_pct"]
        groups = latency.CANDIDATES[shipped["model"]]
        expected = sum(latency.features(paths[core.paths["int8"]]["per_inference"], groups)
                       * [shipped["ns_per_instruction"][latency.group_name(g)] for g in groups]) / 1e6
        assert entry["ms"] == round(expected, 2)
    sd865 = latency.CORES["snapdragon865"].label
    assert latency.estimate(paths, "int8-weight")["cores"][sd865]["kernel_path"] == "default"
    assert latency.estimate({"default": paths["default"]}, "int8") is None      # armv7-style counts: no a55 path


def test_an_estimate_outside_the_fitted_class_mix_says_so():
    fitted = {"simd_rest": [60.0, 90.0], "load_store": [5.0, 20.0], "branch": [1.0, 5.0], "other": [2.0, 8.0],
              "dot_product": [0.0, 0.0]}
    inside = counts(simd=70, ls=15, br=5, other=10)               # other 10 %: outside 2-8
    assert latency.outside_fit(inside, "per_class", fitted) == [
        "other 10.0 % of the instructions (fitted on 2-8 %)"]
    assert latency.outside_fit(counts(simd=75, ls=15, br=3, other=7), "per_class", fitted) == []
    # the measured models themselves are inside the shipped fits' mix; PP-OCRv4 det FP32 as built (docs/costs.md:
    # branch + other 61 % of 917 M) is not, on either core
    table, models = _measured()
    for key, shipped in latency.ESTIMATES.items():
        core = latency.CORES[key]
        for m in models:
            for p in latency.PRECISIONS:
                assert latency.outside_fit(table[m][p][core.paths[p]], shipped["model"],
                                           shipped["fitted_shares_pct"]) == [], (key, m, p)
    det = counts(simd=246_723_251, ls=107_310_856, br=163_259_252, other=399_893_449)
    estimate = latency.estimate({"default": {"per_inference": det}}, "fp32")["cores"]
    assert estimate["Snapdragon 865 (Cortex-A77)"]["outside_fit"] == [
        "load_store 11.7 % of the instructions (fitted on 15.1-23.4 %)",
        "branch+other 61.4 % of the instructions (fitted on 3.5-17.7 %)"]
    assert [x.split()[:2] for x in estimate["RK3399 (Cortex-A72)"]["outside_fit"]] == [
        ["simd_rest", "26.9"], ["branch", "17.8"], ["other", "43.6"]]


def _measured():
    data = json.loads(MEASURED.read_text(encoding="utf-8"))
    return data["counts"], data["models"]


def test_the_shipped_fit_is_the_one_the_measured_counts_give():
    table, models = _measured()
    for key, core in latency.CORES.items():
        found = latency.evaluate(table, core, models)
        chosen = latency.choose(found)
        shipped = latency.ESTIMATES[key]
        assert shipped["model"] == chosen, key
        assert shipped["ns_per_instruction"] == found[chosen]["ns_per_instruction"], key
        assert shipped["loo_error_pct"] == found[chosen]["loo_error_pct"], key
        assert shipped["fitted_shares_pct"] == latency.share_ranges(table, core, models, latency.CANDIDATES[chosen])


def test_the_docs_show_the_shipped_fit_s_leave_one_model_out_errors():
    table, models = _measured()
    doc = (ROOT / "docs" / "costs.md").read_text(encoding="utf-8")
    for key, core in latency.CORES.items():
        found = latency.evaluate(table, core, models)
        for line in latency.markdown_rows(core, found[latency.choose(found)]["loo"]):
            assert line in doc, line
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    maxima = [latency.ESTIMATES[key]["loo_error_pct"]["max"] for key in ("snapdragon865", "rk3399")]
    assert f"max error: Snapdragon 865 {maxima[0]:.1f} %, RK3399 {maxima[1]:.1f} %" in readme


def test_inspect_shows_the_estimate_with_its_leave_one_model_out_errors(tmp_path):
    from untrusted_bundles import make_bundle

    from edgekit.consumers import inspection

    per_path = {p: {"kernel_path": k, "first_inference": 2 * 10**8,
                    "per_inference": counts(simd=60e6, ls=15e6, br=10e6, other=5e6)}
                for p, k in (("default", "neon"), ("a55", "dotprod"))}
    for entry in per_path.values():
        entry["per_inference"] = {k: int(v) for k, v in entry["per_inference"].items()}
    found = {"ran": True, "paths": per_path, "latency_estimate": latency.estimate(per_path, "fp32")}

    def edit(m):
        m["emulation"] = {"ran": True, "samples": 1, "abi": "aarch64", "runtime_version": "v2.13-rc",
                          "int8_kernels": "neon", "ms_per_sample_median": 1.0, "instruction_counts": found}

    text = "\n".join(inspection.describe(make_bundle(tmp_path, edit=edit))["text"])
    line = next(t for t in text.splitlines() if "latency estimate" in t)
    assert "not a measurement" in line and "leave-one-model-out" in line
    for key, shipped in latency.ESTIMATES.items():
        core = latency.CORES[key]
        ms = found["latency_estimate"]["cores"][core.label]["ms"]
        errors = shipped["loo_error_pct"]
        assert f"{core.label} ~{ms:g} ms (median ±{errors['median']:g} %, max ±{errors['max']:g} %)" in line
    # branch 11.1 % of the instructions (and SIMD 66.7 %): outside what RK3399's costs were fitted on
    extrapolated = next(t for t in text.splitlines() if t.startswith("    RK3399 (Cortex-A72): extrapolated"))
    assert "branch 11.1 % of the instructions (fitted on 1.3-4.7 %)" in extrapolated
