"""Pure logic of the prune stage: flags, skip rules, ratio resolution, searches, cost model, cache."""

from pathlib import Path

import numpy as np
import pytest


from edgekit.core.errors import ConfigError
from edgekit.contracts.prune import Choice, Criterion, Goal, parse_prune, prune_config
from edgekit.prune.errors import PruneError
from edgekit.prune.plan import (Conv, Group, bisect, classify, explicit_ratios, filter_scores, kept_filters,
                        predicted_cost, pruned_mask, ratios_at)
from edgekit.prune.report import PruneReport, layer_rows
from edgekit.prune.sensitivity import cache_key, cached

# ---------------------------------------------------------------- flags and [prune]


def test_prune_flag_forms():
    assert parse_prune("0.3") == {"ratio": 0.3}
    assert parse_prune("30%") == {"ratio": pytest.approx(0.3)}
    assert parse_prune("flops:50%") == {"target": "flops", "reduction": pytest.approx(0.5)}
    assert parse_prune("PARAMS:0.4") == {"target": "params", "reduction": 0.4}
    assert parse_prune("features.0=0.5, features.4=25%") == {"layers": {"features.0": 0.5, "features.4": pytest.approx(0.25)}}


@pytest.mark.parametrize("text", ["1.5", "0", "flops:100%", "flops:", "features.0", "a=0.5,b", "half"])
def test_prune_flag_rejects(text):
    with pytest.raises(ConfigError):
        parse_prune(text)


def test_prune_config_needs_exactly_one_goal():
    with pytest.raises(ConfigError, match="exactly one"):
        prune_config({})
    with pytest.raises(ConfigError, match="exactly one"):
        prune_config({"ratio": 0.3, "target": "flops", "reduction": 0.5})
    with pytest.raises(ConfigError, match="needs a reduction"):
        prune_config({"target": "flops"})
    with pytest.raises(ConfigError, match="0.95"):
        prune_config({"target": "flops", "reduction": 0.97})


def test_prune_config_values():
    cfg = prune_config({**parse_prune("flops:50%"), "criterion": "fpgm", "finetune": "pkg.mod:tune", "epochs": 4,
                        "cache_dir": "cache"}, base=Path("/proj"))
    assert (cfg.goal, cfg.reduction, cfg.criterion, cfg.epochs) == (Goal.flops, 0.5, Criterion.fpgm, 4)
    assert cfg.cache_dir == Path("/proj/cache")
    assert cfg.choice(has_data=True) is Choice.uniform          # fine-tuned: one ratio for all
    assert prune_config(parse_prune("flops:50%")).choice(has_data=True) is Choice.sensitivity
    assert prune_config(parse_prune("flops:50%")).choice(has_data=False) is Choice.uniform
    for bad in ({"criterion": "l2"}, {"finetune": "not a spec"}, {"epochs": -1}, {"min_filters": 0}, {"budget": "1"},
                {"choose": "random"}, {"colour": 1}):
        with pytest.raises(ConfigError):
            prune_config({"ratio": 0.3, **bad})


# ---------------------------------------------------------------- kept filters, masks


def test_kept_filters_follows_paddleslims_rounding():
    assert kept_filters(16, 0.297) == 11          # round(4.75) = 5 go
    assert kept_filters(64, 0.297) == 45          # round(19.0) = 19 go
    assert kept_filters(8, 0.0625) == 8           # round(0.5) = 0 (banker's rounding): nothing goes
    assert kept_filters(8, 0.99) == 1             # at least one filter stays


def test_tied_scores_let_both_branches_decide():
    a = np.array([1.0, 1.0, 0.5, 1.0]).reshape(4, 1, 1, 1)         # branch a: filter 2 is weaker
    b = np.array([1.0, 100.0, 100.0, 100.0]).reshape(4, 1, 1, 1)   # branch b, 100x the scale: filter 0 is all but dead
    only_a = pruned_mask(filter_scores(Criterion.l1_norm, [a]), 0.25)
    both = pruned_mask(filter_scores(Criterion.l1_norm, [a, b]), 0.25)
    assert only_a.tolist() == [1, 1, 0, 1]
    # per-conv normalisation: 1.01 < 1.5 picks filter 0; raw sums (101 vs 100.5) would have picked filter 2
    assert both.tolist() == [0, 1, 1, 1]
    dup = np.stack([np.ones((2, 1, 1)), np.ones((2, 1, 1)), 5 * np.ones((2, 1, 1))])
    assert pruned_mask(filter_scores(Criterion.fpgm, [dup]), 0.34).tolist()[2] == 1   # the outlier is not replaceable


# ---------------------------------------------------------------- skip rules


def _convs():
    return {
        "w0": Conv("w0", "stem", 16, 1, 3),
        "w1": Conv("w1", "a", 16, 1, 16),
        "w2": Conv("w2", "b", 16, 1, 16),
        "w3": Conv("w3", "dw", 16, 16, 16),
        "w4": Conv("w4", "grouped", 32, 4, 16),
        "w5": Conv("w5", "tiny", 4, 1, 32),
        "w6": Conv("w6", "head", 10, 1, 4),
    }


def _analysis(min_filters=8):
    groups = [Group("w0", consumers=("w1", "w2")),
              Group("w1", tied=("w2",), depthwise=("w3",), consumers=("w4",), grouped_consumers=(("w4", 4),)),
              Group("w4", consumers=("w5",)),
              Group("w5", consumers=("w6",))]
    return classify(_convs(), groups, min_filters, {"w6": "its channels are a model output"})


def test_classify_gives_every_conv_a_status():
    a = _analysis()
    assert [g.master for g in a.groups] == ["w0"]
    reasons = {s.layer: s.reason for s in a.skipped}
    assert "feeds grouped convolution grouped (groups=4)" in reasons["a"]
    assert reasons["b"].startswith("tied to a by a residual add (pruned together or not at all)")
    assert "depthwise" in reasons["dw"] and "not pruned" in reasons["dw"]
    assert "grouped convolution (groups=4)" in reasons["grouped"]
    assert reasons["tiny"] == "only 4 filters (fewer than 8)"
    assert reasons["head"] == "its channels are a model output"
    assert set(reasons) | {"stem"} == {c.layer for c in _convs().values()}


def test_tied_group_is_one_prunable_unit():
    convs = {"w1": Conv("w1", "a", 16, 1, 16), "w2": Conv("w2", "b", 16, 1, 16), "w3": Conv("w3", "dw", 16, 16, 16)}
    a = classify(convs, [Group("w1", tied=("w2",), depthwise=("w3",))], 8)
    assert [g.master for g in a.groups] == ["w1"] and not a.skipped
    assert a.followers == {"w2": "w1", "w3": "w1"}
    rows = layer_rows(a, {"w1": 0.5}, {"w1": 16, "w2": 16, "w3": 16}, {"w1": 8, "w2": 8, "w3": 8})
    assert [(r.layer, r.filters_after, r.ratio) for r in rows] == [("a", 8, 0.5), ("b", 8, 0.5), ("dw", 8, 0.5)]
    assert rows[1].note.startswith("tied to a") and rows[2].note == "depthwise: follows a"


def test_explicit_ratios_map_every_name_to_the_master_parameter():
    convs = {"conv2d_7.w_0": Conv("conv2d_7.w_0", "block.a", 16, 1, 16),
             "conv2d_8.w_0": Conv("conv2d_8.w_0", "block.b", 16, 1, 16),
             "conv2d_9.w_0": Conv("conv2d_9.w_0", "small", 4, 1, 16)}
    a = classify(convs, [Group("conv2d_7.w_0", tied=("conv2d_8.w_0",)), Group("conv2d_9.w_0")], 8)
    for key in ("block.a", "block.a.weight", "conv2d_7.w_0", "block.b"):
        assert explicit_ratios(prune_config({"layers": {key: 0.5}}), a) == {"conv2d_7.w_0": 0.5}
    assert explicit_ratios(prune_config({"ratio": 0.3}), a) == {"conv2d_7.w_0": 0.3}
    with pytest.raises(ConfigError, match="tied by a residual add"):
        explicit_ratios(prune_config({"layers": {"block.a": 0.5, "block.b": 0.25}}), a)
    with pytest.raises(ConfigError, match="only 4 filters"):
        explicit_ratios(prune_config({"layers": {"small": 0.5}}), a)
    with pytest.raises(ConfigError, match="not a conv of this model") as info:
        explicit_ratios(prune_config({"layers": {"features.0": 0.5}}), a)
    assert info.value.hint == "prunable layers: block.a"


# ---------------------------------------------------------------- searches


def test_bisect_finds_the_smallest_ratio_reaching_the_target():
    steps = lambda r: np.floor(r * 16) / 16                      # noqa: E731  a step function, like kept filters
    ratio, reached = bisect(steps, 0.5, 0.8)
    assert reached >= 0.5 and steps(ratio - 0.002) < 0.5
    with pytest.raises(PruneError, match="at most 40.0 %"):
        bisect(lambda r: min(r, 0.4), 0.5, 0.8)


def test_ratios_at_interpolates_and_caps():
    curves = {"a": {0.1: 0.0, 0.2: 1.0, 0.3: 3.0}, "b": {0.1: 5.0, 0.2: 9.0}, "c": {0.1: 0.0, 0.2: 0.0, 0.3: 0.0}}
    got = ratios_at(curves, 2.0, max_ratio=0.25)
    assert got["a"] == pytest.approx(0.25)                        # 0.2 + (2-1)*(0.1)/(3-1) = 0.25, the cap
    assert got["b"] == pytest.approx(0.1 * 2.0 / 5.0)             # below the first point: from (0, 0)
    assert got["c"] == 0.25
    assert ratios_at(curves, 0.5, 0.8)["a"] == pytest.approx(0.15)
    assert "b" not in ratios_at(curves, 0.0, 0.8)


def test_predicted_cost_scales_each_cut_axis():
    # conv1 (8 filters) -> conv2 (16 filters) -> fc; conv1 is cut on its filters, conv2 on filters and inputs
    costs = {"c1": 100.0, "c2": 1000.0, "fc": 10.0}
    touches = {"c1": {0: "c1"}, "c2": {1: "c1", 0: "c2"}, "fc": {0: "c2"}}
    filters = {"c1": 8, "c2": 16}
    assert predicted_cost(costs, touches, filters, {}) == 1110.0
    assert predicted_cost(costs, touches, filters, {"c1": 0.5}) == pytest.approx(50 + 500 + 10)
    assert predicted_cost(costs, touches, filters, {"c1": 0.5, "c2": 0.25}, fixed=7) == pytest.approx(50 + 375 + 7.5 + 7)


# ---------------------------------------------------------------- sensitivity cache and report


def test_sensitivity_cache_reuses_only_identical_inputs(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return 90.0, {"a": {0.1: 0.5, 0.2: 2.0}}

    key = cache_key("model-sha", "samples-sha", "l1_norm", "top-1 %", ["a"])
    first = cached(tmp_path, key, 64, "top-1 %", compute)
    again = cached(tmp_path, key, 64, "top-1 %", compute)
    assert (first.cached, again.cached, len(calls)) == (False, True, 1)
    assert again.curves == {"a": {0.1: 0.5, 0.2: 2.0}} and again.baseline == 90.0
    other = cache_key("model-sha", "other-samples", "l1_norm", "top-1 %", ["a"])
    assert other != key and not cached(tmp_path, other, 64, "top-1 %", compute).cached and len(calls) == 2
    assert again.to_json()["samples"] == 64


def test_budget_check_fails_with_the_report():
    report = PruneReport("l1_norm", "test", metric_name="top-1 %", metric={"unpruned": 97.0, "pruned": 12.0, "fine-tuned": 96.5})
    report.check_budget(1.0)
    assert report.checks[0].passed and report.checks[0].value == pytest.approx(0.5)
    report.metric["fine-tuned"] = 95.0
    with pytest.raises(PruneError, match="over the budget") as info:
        report.check_budget(1.0)
    assert any("✗" in line for line in info.value.report_lines)


def test_flags_override_the_toml_goal_as_a_whole():
    from edgekit.contracts.prune import merge_prune

    table = {"ratio": 0.3, "criterion": "fpgm", "epochs": 2}
    merged = merge_prune(table, "flops:50%", epochs=5, finetune=None)
    assert merged == {"criterion": "fpgm", "epochs": 5, "target": "flops", "reduction": 0.5}
    assert prune_config(merged).goal is Goal.flops
    assert merge_prune(None, None, finetune=None) is None
    with pytest.raises(ConfigError, match="--finetune needs --prune"):
        merge_prune(None, None, finetune="pkg.mod:tune")


def test_verify_refuses_plans_that_did_not_happen():
    from edgekit.prune.plan import verify

    convs = {"w1": Conv("w1", "a", 16, 1, 3), "w2": Conv("w2", "b", 16, 1, 3), "w3": Conv("w3", "c", 32, 1, 16)}
    a = classify(convs, [Group("w1", tied=("w2",)), Group("w3")], 8)
    before = {"w1": 16, "w2": 16, "w3": 32}
    verify(a, {"w1": 0.5}, before, {"w1": 8, "w2": 8, "w3": 32})
    with pytest.raises(PruneError, match="b: 16 -> 16 filters, expected 8"):
        verify(a, {"w1": 0.5}, before, {"w1": 8, "w2": 16, "w3": 32})          # a tied conv left alone
    with pytest.raises(PruneError, match="c changed although no ratio was given"):
        verify(a, {"w1": 0.5}, before, {"w1": 8, "w2": 8, "w3": 30})
    with pytest.raises(PruneError, match="removes no filter"):
        verify(a, {"w1": 0.01}, before, dict(before))
