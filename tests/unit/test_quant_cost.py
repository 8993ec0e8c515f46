"""The cost step of the INT8 search (quantize/cost.py): which candidates are counted, which one wins, which op types
get a float candidate; and the search with a counter that stands in for qemu (pure logic: the real counts are in
tests/e2e/test_cost_search.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgekit.contracts.settings import QuantConfig
from edgekit.core.errors import EmulationUnavailable
from edgekit.model.artifacts import QuantizedModel, StaticModel
from edgekit.model.data import Samples
from edgekit.model.evalset import EvalSet
from edgekit.quantize.cost import CostRecord, cheapest, cost_pool, float_op_types, ratios
from edgekit.quantize.report import render_markdown
from edgekit.quantize.search import Candidate, SearchPlan, quantize_to_budget
from edgekit.quantize.sensitivity import Budget, Evaluator, QuantLayer, Score
from edgekit.tasks import make_task
from edgekit.verify.tier_c import int8_verdict, searched_fp32
from test_quant_search import _model              # the same stand-in program files

TOP1 = Budget.for_data(1.0, "top1")


def _candidate(algo: str, drop: float, counts: dict | None = None, *, holds: bool | None = None,
               purpose: str = "algorithm", float_ops: tuple = (), samples: int = 100) -> Candidate:
    return Candidate(algo, (), Score(0.99, 20.0, 90.0 - drop, drop), drop <= 1.0 if holds is None else holds, purpose,
                     samples, False, 0.1, "", float_ops, tuple(sorted((counts or {}).items())))


def test_cheapest_within_the_budget_wins_ties_keep_the_accuracy_choice():
    accurate = _candidate("hist", 0.0, {"a55": 1000})
    cheap = _candidate("avg", 0.8, {"a55": 900})
    cheaper_but_over = _candidate("mse", 1.5, {"a55": 500})
    assert cheapest([accurate, cheap, cheaper_but_over], TOP1, "a55", prefer=accurate) is cheap
    same = _candidate("avg", 0.5, {"a55": 1000})
    assert cheapest([same, accurate], TOP1, "a55", prefer=accurate) is accurate      # a tie: the accuracy choice
    assert cheapest([same, accurate], TOP1, "a55") is accurate                        # else the accuracy order
    assert cheapest([accurate], TOP1, "default") is None                              # not counted on that profile
    assert cheapest([cheaper_but_over], TOP1, "a55") is None


def test_cost_pool_counts_the_accuracy_choice_first_then_op_float_then_by_accuracy_up_to_the_cap():
    first = _candidate("hist", 0.5)
    others = [_candidate("avg", 0.9), _candidate("KL", 0.1), _candidate("mse", 2.0),             # mse misses
              _candidate("abs_max", 0.0, samples=20),                                         # a ranking subset
              _candidate("hist", 0.2, purpose="op-float", float_ops=("depthwise_conv2d",)),
              _candidate("hist", 0.5)]                                                        # same key as first
    pool = cost_pool([first] + others, TOP1, first, 10, 100)
    assert [(c.algo, c.float_ops) for c in pool] == [("hist", ()), ("hist", ("depthwise_conv2d",)), ("KL", ()),
                                                     ("avg", ())]
    assert [c.algo for c in cost_pool([first] + others, TOP1, first, 2, 100)] == ["hist", "hist"]
    assert cost_pool([first], TOP1, first, 0, 100) == []


def test_op_types_whose_int8_kernels_cost_no_less_get_float_candidates():
    costs = {"depthwise_conv2d": {"int8": 2_000_000, "fp32": 1_900_000},
             "conv2d_transpose": {"int8": 18_800_000, "fp32": 17_300_000}}
    assert float_op_types(costs, ["conv2d", "conv2d_transpose", "depthwise_conv2d"]) == [
        ("depthwise_conv2d",), ("conv2d_transpose",), ("depthwise_conv2d", "conv2d_transpose")]
    assert float_op_types(costs, ["depthwise_conv2d"]) == [("depthwise_conv2d",)]        # only types in the model
    cheaper = {"depthwise_conv2d": {"int8": 19_900_000, "fp32": 23_900_000}}
    assert float_op_types(cheaper, ["depthwise_conv2d"]) == []
    assert float_op_types({"depthwise_conv2d": {"int8": 0, "fp32": 0}}, ["depthwise_conv2d"]) == []   # not seen
    assert ratios({"a55": 750, "default": 960, "a53": 1}, {"a55": 1000, "default": 1000}) == {"a55": 0.75,
                                                                                               "default": 0.96}


def test_tier_c_takes_fp32_counts_from_the_search_instead_of_counting_again():
    class Search:
        cost = CostRecord(True, fp32={"default": 1000, "a55": 1000})

    int8 = {"default": {"per_inference": {"total": 990}}, "a55": {"per_inference": {"total": 750}}}
    fp32 = searched_fp32(Search(), int8)
    assert int8_verdict(int8, fp32, "default")["note"].startswith("INT8 is not faster than FP32 on the default")
    assert int8_verdict(int8, fp32, "a55")["ratios"] == {"default": 0.99, "a55": 0.75}
    assert searched_fp32(Search(), dict(int8, a53={})) is None               # a path the search did not count
    Search.cost = CostRecord(False, "no runtime")
    assert searched_fp32(Search(), int8) is None and searched_fp32(None, int8) is None


# ---------------------------------------------------------------- the search with a stand-in counter

LAYERS = (QuantLayer(0, "conv2d", "conv2d_0.w_0", "c0.out", 100), QuantLayer(1, "depthwise_conv2d", "dw_0.w_0",
                                                                              "d0.out", 9))


def _quantize(runs: list):
    def quantize(model, samples, cfg, out_dir, skip=(), float_ops=()):
        runs.append((cfg.algo, tuple(skip), tuple(float_ops)))
        (out_dir / "model.pdmodel").write_bytes(f"{cfg.algo}|{','.join(skip)}|{','.join(float_ops)}".encode())
        (out_dir / "model.pdiparams").write_bytes(b"q")
        static = StaticModel(out_dir / "model.pdmodel", out_dir / "model.pdiparams", model.feeds, model.fetches,
                             "paddleslim-ptq", ("conv2d",))
        return QuantizedModel(static, cfg.algo, len(samples), 0.1)
    return quantize


class Counter:
    """Instructions by candidate: hist is the most accurate but dearer than avg; KL is cheapest and misses the
    budget; keeping depthwise float saves more. The profile says depthwise INT8 costs more than float."""

    cpu = "a55"
    INT8 = {"avg": 800, "hist": 900, "KL": 500}

    def __init__(self, profile_error: bool = False):
        self.counted: list[str] = []
        self.profile_error = profile_error

    def count(self, model, precision):
        name = model.model_file.read_bytes().decode()
        self.counted.append(precision if precision == "fp32" else name)
        if precision == "fp32":
            return {"a55": 1000, "default": 1000}
        algo, _, float_ops = name.split("|")
        n = self.INT8[algo] - (150 if float_ops else 0)
        return {"a55": n, "default": n + 150}

    def op_costs(self, int8, fp32, op_types):
        if self.profile_error:
            raise EmulationUnavailable("no symbols", "set EDGEKIT_LITE_ARM_SYMBOLS")
        return {"depthwise_conv2d": {"int8": 120, "fp32": 100, "ratio": 1.2}}


def _search(tmp_path, monkeypatch, counter, cap, algos=("hist", "avg", "KL")):
    reference = np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 2.0], [2.0, 1.9, 0.0]])
    labels = np.array([0, 1, 2, 0])
    flip = reference.copy()
    flip[0] = [0.0, 2.0, 1.0]                                               # one of four wrong: 25 points
    outputs = {"hist": reference, "avg": reference * 0.9, "KL": flip}

    class Runner:
        def __init__(self, model):
            self.algo = model.model_file.read_bytes().decode().split("|")[0]

        def run(self, inputs):
            return [outputs[self.algo]]

    monkeypatch.setattr("edgekit.quantize.search.quantizable_layers", lambda model: LAYERS)
    samples = Samples({"x": np.zeros((4, 4), np.float32)}, labels)
    judge = Evaluator([reference], EvalSet(samples, make_task("classification"), tuple(labels)), Runner)
    runs: list = []
    plan = SearchPlan(TOP1, algos, fallback=False, cost_candidates=cap)
    result = quantize_to_budget(_model(tmp_path), samples, samples, QuantConfig(), plan, tmp_path / "work",
                                quantize=_quantize(runs), evaluator=judge, coster=counter,
                                no_cost="" if counter else "tier C cannot run here: no runtime")
    return result, runs


def test_the_search_counts_within_the_budget_and_keeps_the_cheapest(tmp_path, monkeypatch):
    counter = Counter()
    result, runs = _search(tmp_path, monkeypatch, counter, cap=3)
    assert ("hist", (), ("depthwise_conv2d",)) in runs                       # the profile asked for it
    by = {(c.algo, c.float_ops): c for c in result.candidates}
    assert not by[("KL", ())].holds and not by[("KL", ())].instructions      # over the budget: never counted
    assert counter.counted == ["fp32", "hist||", "hist||depthwise_conv2d", "avg||"]     # cap 3, accuracy choice first
    assert result.chosen.float_ops == ("depthwise_conv2d",) and result.chosen.counts == {"a55": 750, "default": 900}
    cost = result.to_json()["cost"]
    assert cost["chosen_by"] == "instructions" and cost["accuracy_choice"]["instructions"] == 900
    assert cost["int8_vs_fp32"] == {"a55": 0.75, "default": 0.9} and cost["fp32"] == {"a55": 1000, "default": 1000}
    assert cost["op_types"]["depthwise_conv2d"] == {"int8": 120, "fp32": 100, "ratio": 1.2, "tried_float": True}
    assert result.to_json()["float_op_types"] == ["depthwise_conv2d"]
    assert [layer.key for layer in result.float_layers] == ["dw_0.w_0"]
    text = "\n".join(result.lines())
    assert "chosen INT8 750 instructions per inference, FP32 1,000 (INT8/FP32 a55 0.75x, default 0.90x)" in text
    assert "chose the cheapest within the budget over the accuracy choice (900 instructions on a55)" in text
    report = render_markdown(result)
    assert "| instructions (a55) | INT8/FP32 |" in report and "| 750 | 0.750 |" in report


def test_a_cap_of_one_counts_only_the_accuracy_choice(tmp_path, monkeypatch):
    counter = Counter()
    result, runs = _search(tmp_path, monkeypatch, counter, cap=1)
    assert counter.counted == ["fp32", "hist||"] and result.chosen.algo == "hist" and not result.chosen.float_ops
    assert all(not r[2] for r in runs)                                        # no room to count an op-float one
    assert result.cost.chosen_by == "accuracy" and not result.cost.op_types            # not even profiled
    assert result.cost.op_types_note.startswith("op types not profiled: [quantize] cost_candidates = 1")


def test_without_a_counter_the_search_chooses_by_accuracy_and_says_why(tmp_path, monkeypatch):
    result, runs = _search(tmp_path, monkeypatch, None, cap=3)
    assert result.chosen.algo == "hist" and result.to_json()["cost"] == {
        "counted": False, "reason": "tier C cannot run here: no runtime"}
    assert "cost: not counted (tier C cannot run here: no runtime); chosen by accuracy alone" in "\n".join(
        result.lines())
    assert all(not r[2] for r in runs)


def test_no_profile_still_counts_and_says_why(tmp_path, monkeypatch):
    counter = Counter(profile_error=True)
    result, _ = _search(tmp_path, monkeypatch, counter, cap=3)
    assert result.chosen.algo == "avg" and result.chosen.counts["a55"] == 800     # the cheapest within the budget
    assert "op types not profiled (no symbols)" in result.cost.op_types_note


def test_cost_candidates_must_not_be_negative():
    from edgekit.core.errors import ConfigError

    with pytest.raises(ConfigError, match="cost_candidates"):
        SearchPlan(TOP1, cost_candidates=-1)


def test_a_count_that_fails_leaves_the_accuracy_choice_and_says_why(tmp_path, monkeypatch):
    from edgekit.core.errors import ToolError

    class Failing(Counter):
        def count(self, model, precision):
            if precision == "int8":
                raise ToolError("edgekit-lite-run (aarch64, model.nb): exit 1", "rerun")
            return super().count(model, precision)

    result, _ = _search(tmp_path, monkeypatch, Failing(), cap=3)
    assert result.chosen.algo == "hist" and not result.cost.counted
    assert result.cost.reason == ("the accuracy choice could not be counted (algorithm hist: "
                                     "edgekit-lite-run (aarch64, model.nb): exit 1)")
