"""A latency estimate per published core from instruction counts: per-class costs fitted to Paddle-Lite's published
one-thread table, the cost model chosen per core by leave-one-model-out error.

The counts say how many instructions of each class one inference executes (edgekit/verify/counts.py): `dot_product`,
the rest of `simd_fp`, `load_store`, `branch`, `other`. A core's latency is modelled as a sum over class groups of
instructions x cost; the groups are one of CANDIDATES, from one cost for every instruction to one per class. The fit
minimises relative error (each published latency weighs the same) under non-negative costs: an instruction cannot
take negative time, and the class counts of the models move together (MobileNets are all depthwise + pointwise
convs), so an unconstrained fit trades a large cost on one class against a negative one on another and extrapolates
badly. Validation leaves one model out (its FP32 and INT8 figures both), fits the rest and predicts it.

The plugin does not split SIMD into integer and float: `dot_product` is the only integer-only SIMD class it knows.

`bench/bench_costs.py` measures the counts and prints the fit; tests/data/costs/ holds the counts it measured, and a
test refits them and checks ESTIMATES (what `estimate` uses) and docs/costs.md's table.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np

BASE_CLASSES = ("dot_product", "simd_rest", "load_store", "branch", "other")   # disjoint; they sum to the total
PRECISIONS = ("fp32", "int8")



@dataclass(frozen=True)
class Core:
    """A core with published one-thread latencies, and which kernel path's counts stand for it per precision."""

    label: str
    paths: Mapping[str, str]                               # precision -> kernel path (edgekit/core/tables.py)
    published: Mapping[str, tuple[float, float]]           # model -> (FP32 ms, INT8 ms)


# Paddle-Lite release/v2.11 docs/performance/benchmark.md, 1 thread, ms, models at 1x3x224x224. The A77 has dot
# product (Lite's a55 INT8 kernels count for it), the A72 has not (the plain NEON path).
CORES = {
    "snapdragon865": Core("Snapdragon 865 (Cortex-A77)", {"fp32": "default", "int8": "a55"},
                          {"mobilenet_v1": (28.38, 11.18), "mobilenet_v2": (18.52, 10.37),
                           "mobilenet_v3_large": (14.46, 8.03), "mobilenet_v3_small": (4.73, 2.89),
                           "resnet50": (160.97, 64.50)}),
    "rk3399": Core("RK3399 (Cortex-A72)", {"fp32": "default", "int8": "default"},
                   {"mobilenet_v1": (103.39, 77.60), "mobilenet_v2": (73.37, 56.66),
                    "mobilenet_v3_large": (63.34, 46.66), "mobilenet_v3_small": (21.67, 15.83),
                    "resnet50": (616.68, 473.00)}),
}

MODEL_NAMES = {"mobilenet_v1": "MobileNetV1", "mobilenet_v2": "MobileNetV2", "mobilenet_v3_large": "MobileNetV3-Large",
               "mobilenet_v3_small": "MobileNetV3-Small", "resnet50": "ResNet50"}

# cost models: each group's instructions share one cost; simpler first (ties in LOO error go to the simpler one)
CANDIDATES = {
    "total": (("dot_product", "simd_rest", "load_store", "branch", "other"),),
    "simd+scalar": (("dot_product", "simd_rest"), ("load_store", "branch", "other")),
    "simd+load_store+scalar": (("dot_product", "simd_rest"), ("load_store",), ("branch", "other")),
    "dot+simd+load_store+scalar": (("dot_product",), ("simd_rest",), ("load_store",), ("branch", "other")),
    "per_class": (("dot_product",), ("simd_rest",), ("load_store",), ("branch",), ("other",)),
}


def group_name(group: Sequence[str]) -> str:
    return "total" if len(group) == len(BASE_CLASSES) else "+".join(group)


def base_counts(per_inference: Mapping[str, int]) -> dict[str, int]:
    """The disjoint classes of one path's counts (`simd_fp` includes `dot_product`; `simd_rest` is the rest)."""
    found = {k: int(per_inference[k]) for k in ("dot_product", "load_store", "branch", "other")}
    found["simd_rest"] = int(per_inference["simd_fp"]) - found["dot_product"]
    return found


def features(per_inference: Mapping[str, int], groups: Sequence[Sequence[str]]) -> np.ndarray:
    counted = base_counts(per_inference)
    return np.array([sum(counted[k] for k in group) for group in groups], dtype=float)


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin |a x - b| subject to x >= 0, exactly, for a few columns: the optimum is the least-squares solution on
    its own support, so the best non-negative least-squares solution over all supports is it."""
    best, best_residual = np.zeros(a.shape[1]), float(np.sum(b ** 2))
    for size in range(1, a.shape[1] + 1):
        for support in combinations(range(a.shape[1]), size):
            cols = list(support)
            x, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
            if np.any(x < 0):
                continue
            residual = float(np.sum((a[:, cols] @ x - b) ** 2))
            if residual < best_residual - 1e-15 * max(1.0, best_residual):
                best, best_residual = np.zeros(a.shape[1]), residual
                best[cols] = x
    return best


def fit(points: Sequence[tuple[Mapping[str, int], float]], groups: Sequence[Sequence[str]]) -> np.ndarray:
    """ms per instruction of each group, from (counts, published ms) points: non-negative least squares on relative
    error (each point's row divided by its latency, so every latency weighs the same)."""
    rows = np.array([features(c, groups) / ms for c, ms in points])
    scale = rows.max(axis=0)
    scale[scale == 0] = 1.0                              # a class no point executes gets cost 0
    return nnls(rows / scale, np.ones(len(points))) / scale


def points_of(counts: Mapping[str, Mapping], core: Core, models: Sequence[str]) -> list[tuple[Mapping, float]]:
    """(counts, published ms) of `models` on `core`, FP32 and INT8, each on the kernel path the core runs.
    `counts`: model -> precision -> kernel path -> per-inference counts (bench_costs.py's JSON)."""
    return [(counts[m][p][core.paths[p]], core.published[m][i]) for m in models for i, p in enumerate(PRECISIONS)]


def leave_one_model_out(counts: Mapping[str, Mapping], core: Core, models: Sequence[str],
                        groups: Sequence[Sequence[str]]) -> dict[str, dict]:
    """Each model predicted by the fit on the others (both its precisions left out): model -> published ms, predicted
    ms, error % (FP32, INT8) and INT8 speed-up published vs predicted."""
    out = {}
    for model in models:
        coef = fit(points_of(counts, core, [m for m in models if m != model]), groups)
        pub = core.published[model]
        pred = [float(features(counts[model][p][core.paths[p]], groups) @ coef) for p in PRECISIONS]
        out[model] = {"published_ms": list(pub), "predicted_ms": [round(v, 2) for v in pred],
                      "error_pct": [round(100 * (p - q) / q, 1) for p, q in zip(pred, pub)],
                      "speedup_published": round(pub[0] / pub[1], 2),
                      "speedup_predicted": round(pred[0] / pred[1], 2) if pred[1] else None}
    return out


def summary(rows: Mapping[str, dict]) -> dict[str, float]:
    errors = [abs(e) for r in rows.values() for e in r["error_pct"]]
    return {"median": round(float(np.median(errors)), 1), "max": round(max(errors), 1)}


def evaluate(counts: Mapping[str, Mapping], core: Core, models: Sequence[str]) -> dict[str, dict]:
    """Every candidate cost model on `core`: the costs fitted on all models (ns per instruction of each group), the
    leave-one-model-out rows and their median and max |error| in %."""
    out = {}
    for name, groups in CANDIDATES.items():
        coef = fit(points_of(counts, core, models), groups)
        rows = leave_one_model_out(counts, core, models, groups)
        out[name] = {"ns_per_instruction": {group_name(g): round(float(c) * 1e6, 4) for g, c in zip(groups, coef)},
                     "loo": rows, "loo_error_pct": summary(rows)}
    return out


def choose(evaluated: Mapping[str, dict]) -> str:
    """The candidate with the smallest leave-one-model-out max |error|, then median; the simpler one on a tie."""
    order = list(CANDIDATES)
    return min(evaluated, key=lambda n: (evaluated[n]["loo_error_pct"]["max"], evaluated[n]["loo_error_pct"]["median"],
                                         order.index(n)))


def chosen_out_of_sample(counts: Mapping[str, Mapping], core: Core, models: Sequence[str]) -> dict[str, dict]:
    """The choice itself validated: each model predicted by the candidate that `choose` picks on the other models
    alone (by their own leave-one-model-out error), fitted on them. Picking the best of several candidates on the
    same ten points flatters its error; this does not."""
    out = {}
    for model in models:
        others = [m for m in models if m != model]
        picked = choose(evaluate(counts, core, others))
        coef = fit(points_of(counts, core, others), CANDIDATES[picked])
        pub = core.published[model]
        pred = [float(features(counts[model][p][core.paths[p]], CANDIDATES[picked]) @ coef) for p in PRECISIONS]
        out[model] = {"picked": picked, "published_ms": list(pub), "predicted_ms": [round(v, 2) for v in pred],
                      "error_pct": [round(100 * (p - q) / q, 1) for p, q in zip(pred, pub)]}
    return out


def share_ranges(counts: Mapping[str, Mapping], core: Core, models: Sequence[str],
                 groups: Sequence[Sequence[str]]) -> dict[str, list[float]]:
    """The smallest and largest share (%) of each group's instructions over the points the costs were fitted on: the
    class mix the fit has seen. A bundle outside it is an extrapolation the LOO error says nothing about."""
    shares = {group_name(g): [] for g in groups}
    for per_inference, _ in points_of(counts, core, models):
        for g, value in zip(groups, features(per_inference, groups)):
            shares[group_name(g)].append(100 * value / per_inference["total"])
    return {name: [round(min(v), 1), round(max(v), 1)] for name, v in shares.items()}


def outside_fit(per_inference: Mapping[str, int], model: str, fitted: Mapping[str, Sequence[float]]) -> list[str]:
    """The groups whose share of `per_inference` lies outside the shares the costs were fitted on, one phrase each."""
    total = per_inference["total"] or 1
    found = []
    for g, value in zip(CANDIDATES[model], features(per_inference, CANDIDATES[model])):
        low, high = fitted[group_name(g)]
        share = 100 * value / total
        if round(share, 1) < low or round(share, 1) > high:
            found.append(f"{group_name(g)} {share:.1f} % of the instructions (fitted on {low:g}-{high:g} %)")
    return found


def markdown_rows(core: Core, rows: Mapping[str, dict]) -> list[str]:
    """docs/costs.md's leave-one-model-out table rows of one core (model, published, predicted, error, speed-ups)."""
    def pct(v: float) -> str:
        return f"{v or 0.0:+.1f}".replace("-", "\u2212")      # -0.0 shows as +0.0
    lines = []
    for i, (model, r) in enumerate(rows.items()):
        pub, pred, err = r["published_ms"], r["predicted_ms"], r["error_pct"]
        lines.append(f"| {core.label if i == 0 else ''} | {MODEL_NAMES.get(model, model)} | "
                     f"{pub[0]:.2f} / {pub[1]:.2f} | {pred[0]:.2f} / {pred[1]:.2f} | {pct(err[0])} / {pct(err[1])} % | "
                     f"{r['speedup_published']:.2f} | {r['speedup_predicted']:.2f} |")
    return lines


# ----------------------------------------------------------------- the shipped fit

# What `evaluate` + `choose` give on the counts bench_costs.py measured (tests/data/costs/bench_costs_counts.json;
# tests/unit/test_latency_fit.py refits them and checks these figures and docs/costs.md's table), with the class mix
# the costs were fitted on (`share_ranges`): an estimate outside it says so (`outside_fit`).
ESTIMATE_SOURCE = ("Paddle-Lite v2.11 benchmark.md (1 thread, 5 models x FP32/INT8); cost model per core chosen by "
                   "leave-one-model-out error: bench/bench_costs.py, docs/costs.md")
ESTIMATES = {
    "snapdragon865": {"model": "dot+simd+load_store+scalar",
                      "ns_per_instruction": {"dot_product": 0.1168, "simd_rest": 0.1452, "load_store": 0.2942,
                                             "branch+other": 0.1101},
                      "loo_error_pct": {"median": 5.8, "max": 11.8},
                      "fitted_shares_pct": {"dot_product": [0.0, 61.9], "simd_rest": [9.4, 81.4],
                                            "load_store": [15.1, 23.4], "branch+other": [3.5, 17.7]}},
    "rk3399": {"model": "per_class",
               "ns_per_instruction": {"dot_product": 0.0, "simd_rest": 0.262, "load_store": 2.3101, "branch": 0.0,
                                      "other": 2.0732},
               "loo_error_pct": {"median": 8.1, "max": 13.0},
               "fitted_shares_pct": {"dot_product": [0.0, 0.0], "simd_rest": [68.8, 88.0], "load_store": [6.9, 19.4],
                                     "branch": [1.3, 4.7], "other": [2.1, 7.5]}},
}


def predict_ms(per_inference: Mapping[str, int], model: str, ns_per_instruction: Mapping[str, float]) -> float:
    groups = CANDIDATES[model]
    coef = np.array([ns_per_instruction[group_name(g)] for g in groups])
    return float(features(per_inference, groups) @ coef) / 1e6


def estimate(paths: Mapping[str, Mapping], precision: str) -> dict | None:
    """An estimate (not a measurement) of one-thread latency per published core, from an arm64 bundle's counts
    (`paths`: kernel path -> {"per_inference": counts by class}); None when the counts lack the paths the fit used."""
    kind = "int8" if precision == "int8" else "fp32"      # weight-only precisions compute in float
    cores = {}
    for key, shipped in ESTIMATES.items():
        core = CORES[key]
        counted = paths.get(core.paths[kind])
        if not counted:
            return None
        cores[core.label] = {"ms": round(predict_ms(counted["per_inference"], shipped["model"],
                                                    shipped["ns_per_instruction"]), 2),
                             "kernel_path": core.paths[kind], "cost_model": shipped["model"],
                             "ns_per_instruction": dict(shipped["ns_per_instruction"]),
                             "loo_error_pct": dict(shipped["loo_error_pct"]),
                             "outside_fit": outside_fit(counted["per_inference"], shipped["model"],
                                                        shipped["fitted_shares_pct"])}
    return {"label": "estimate from instruction counts, not a measurement", "source": ESTIMATE_SOURCE,
            "cannot_know": "memory bandwidth and caches, big.LITTLE scheduling, thermal limits, other threads",
            "cores": cores}
