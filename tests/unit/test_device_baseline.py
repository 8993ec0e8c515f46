"""edgekit.device.baseline: every rule of the regression decision, on numbers chosen to isolate each one."""

import json

import pytest

from edgekit.device import baseline as b
from edgekit.device.baseline import Measurement, Policy
from edgekit.core.errors import ConfigError

POLICY = Policy(slowdown_pct=10.0, slowdown_ms=0.5, noise_k=3.0, max_cv=0.25, max_thermal_rise_c=5.0)


def entry(median, launch_medians, history=(), **extra):
    return {"latency_ms": {"median": median, "cv": 0.01}, "launch_medians_ms": list(launch_medians),
            "settings": {"threads": 1, "batch": 1}, "nb_sha256": "nb", "output_sha256": "out",
            "history": [{"median_ms": m, "launch_medians_ms": [], "cv": 0.01} for m in history], **extra}


def run(median, launch_medians=None, cv=0.02, rise=None, threads=1):
    return Measurement(median, tuple(launch_medians or (median,) * 3), cv, rise, {"threads": threads, "batch": 1})


def test_all_three_margins_make_a_regression():
    base = entry(10.0, [9.9, 10.0, 10.1])               # noise: 1.4826 * 0.1 = 0.148 ms
    verdict = b.judge(run(12.0), base, POLICY)            # +2 ms, +20 %, > 3 x 0.148
    assert verdict.kind == "regression" and verdict.confirmed is None
    assert verdict.delta_ms == pytest.approx(2.0) and verdict.delta_pct == pytest.approx(20.0)
    assert verdict.noise_ms == pytest.approx(0.14826)
    assert verdict.threshold_ms == pytest.approx(1.0)    # the largest margin: 10 % of 10 ms


def test_percentage_alone_is_not_enough():
    # 0.3 ms slower on a 1 ms model is +30 % but under the 0.5 ms absolute margin
    verdict = b.judge(run(1.3), entry(1.0, [1.0, 1.0, 1.0]), POLICY)
    assert verdict.kind == "ok" and verdict.delta_pct == pytest.approx(30.0)


def test_absolute_margin_alone_is_not_enough():
    # 5 ms slower on a 100 ms model is > 0.5 ms but only +5 %
    assert b.judge(run(105.0), entry(100.0, [100.0, 100.0, 100.0]), POLICY).kind == "ok"


def test_a_noisy_history_absorbs_a_slowdown_within_its_noise():
    # +2 ms, +20 %, but the history's medians scatter: robust sigma 1.4826 * 1.0 -> 3 sigma = 4.4 ms
    noisy = entry(10.0, [10.0, 10.0, 10.0], history=[8.0, 9.0, 11.0, 12.0])
    assert b.noise_ms(noisy) == pytest.approx(1.4826)
    verdict = b.judge(run(12.0), noisy, POLICY)
    assert verdict.kind == "ok" and verdict.threshold_ms == pytest.approx(3 * 1.4826)
    assert b.judge(run(15.0), noisy, POLICY).kind == "regression"   # beyond 3 sigma: +5 ms


def test_short_history_uses_the_launch_spread():
    short = entry(10.0, [9.0, 10.0, 11.0], history=[10.0])        # 2 medians < MIN_HISTORY
    assert b.noise_ms(short) == pytest.approx(1.4826)               # MAD of the launch medians
    # long history: the larger of the two noises
    long = entry(10.0, [9.0, 10.0, 11.0], history=[10.0, 10.0, 10.0])
    assert b.noise_ms(long) == pytest.approx(1.4826)
    quiet = entry(10.0, [10.0, 10.0, 10.0], history=[6.0, 10.0, 14.0, 10.0])
    assert b.noise_ms(quiet) == pytest.approx(0.0)                  # median 10, MAD 0 over 5 medians


def test_faster_and_unstable_and_incomparable_and_missing_baselines():
    base = entry(10.0, [10.0, 10.0, 10.0])
    assert b.judge(run(8.0), base, POLICY).kind == "faster"
    unstable = b.judge(run(20.0, cv=0.4), base, POLICY)
    assert unstable.kind == "unstable" and "robust CV 0.400 > 0.25" in unstable.reason
    hot = b.judge(run(20.0, rise=7.5), base, POLICY)
    assert hot.kind == "unstable" and "temperature rose 7.5 °C" in hot.reason
    assert b.judge(run(20.0, rise=4.0), base, POLICY).kind == "regression"
    assert b.judge(run(20.0, threads=4), base, POLICY).kind == "incomparable"
    assert b.judge(run(20.0), None, POLICY).kind == "no-baseline"


def test_a_regression_stands_only_when_the_rerun_agrees():
    base = entry(10.0, [10.0, 10.0, 10.0])
    first = b.judge(run(13.0), base, POLICY)
    confirmed = b.confirm(first, b.judge(run(13.5), base, POLICY))
    assert confirmed.kind == "regression" and confirmed.confirmed is True and confirmed.is_regression
    assert "confirmed by a re-run (median 13.500 ms)" in confirmed.reason
    dismissed = b.confirm(first, b.judge(run(10.1), base, POLICY))
    assert dismissed.kind == "ok" and dismissed.confirmed is False and not dismissed.is_regression
    shaky = b.confirm(first, b.judge(run(13.0, cv=0.5), base, POLICY))
    assert shaky.kind == "unstable" and not shaky.is_regression
    fine = b.judge(run(10.0), base, POLICY)
    assert b.confirm(fine, first) is fine                             # only regressions are re-run


def test_accuracy_has_no_noise_allowance():
    base = entry(10.0, [10.0], eval={"metric": "top1", "value": 97.5, "samples": 40, "data_sha256": "d"})
    now = {"metric": "top1", "value": 97.49, "samples": 40, "data_sha256": "d"}
    assert b.accuracy_drop(now, base)[0] == "failed"                  # 0.01 points below: fails
    assert b.accuracy_drop(dict(now, value=97.5), base)[0] == "passed"
    assert b.accuracy_drop(dict(now, value=99.0), base)[0] == "passed"
    assert b.accuracy_drop(dict(now, data_sha256="other"), base)[0] == "skipped"
    assert b.accuracy_drop(now, entry(10.0, [10.0]))[0] == "skipped"
    assert b.accuracy_drop(None, base)[0] == "skipped"


def test_same_model_same_device_must_give_the_same_outputs():
    base = entry(10.0, [10.0])
    assert b.outputs_changed("nb", "out", base)[0] == "passed"
    assert b.outputs_changed("nb", "other", base)[0] == "failed"
    assert b.outputs_changed("new-nb", "other", base)[0] == "skipped"
    assert b.outputs_changed("nb", "out", None)[0] == "skipped"


def test_updating_keeps_the_history_and_leaves_the_input_alone(tmp_path):
    device = {"id": "pi4", "spec": "ssh:pi@board", "facts": None}
    doc = b.updated(None, device, "digits/arm64-int8", entry(10.0, [10.0], recorded_utc="t1"))
    assert doc["schema"] == b.SCHEMA and doc["entries"]["digits/arm64-int8"]["history"] == []
    snapshot = json.dumps(doc, sort_keys=True)
    newer = b.updated(doc, device, "digits/arm64-int8", entry(11.0, [11.0], recorded_utc="t2"))
    assert json.dumps(doc, sort_keys=True) == snapshot
    current = newer["entries"]["digits/arm64-int8"]
    assert current["latency_ms"]["median"] == 11.0
    assert [(h["recorded_utc"], h["median_ms"]) for h in current["history"]] == [("t1", 10.0)]
    for i in range(b.HISTORY_KEEP + 5):
        newer = b.updated(newer, device, "digits/arm64-int8", entry(12.0 + i, [12.0]))
    assert len(newer["entries"]["digits/arm64-int8"]["history"]) == b.HISTORY_KEEP

    path = tmp_path / "pi4.json"
    assert b.load(path) is None
    b.save(path, newer)
    assert b.load(path) == newer
    path.write_text('{"schema": "something/1", "entries": {}}')
    with pytest.raises(ConfigError, match="is not a device baseline"):
        b.load(path)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not readable JSON"):
        b.load(path)


# ----------------------------------------------------------------- instruction counts (qemu devices)

def counts(total_default, simd=None, shapes=None, **provenance):
    """A count_record as the suite stores it: one kernel path, the classes summing to the total."""
    simd = total_default // 2 if simd is None else simd
    rest = total_default - simd
    per = {"total": total_default, "simd_fp": simd, "load_store": rest // 2, "branch": rest - rest // 2,
           "other": 0, "dot_product": 0}
    found = {"unit": "guest instructions per inference", "input": "golden input 0",
             "input_shapes": shapes or {"x": [1, 3, 16, 16]}, "plugin": "p", "seconds": 1.0,
             "paths": {"default": {"kernel_path": "neon", "per_inference": per}}}
    record = b.count_record(found, provenance.get("runtime_version", "v2.13-rc"), provenance.get("runner_build", "r"))
    assert set(record) == set(b.COUNT_KEYS)
    return record


def test_any_growth_of_the_count_is_a_regression_reported_per_class():
    base = entry(10.0, [10.0], instruction_counts=counts(83_329, simd=19_472))
    same = b.judge_counts(counts(83_329, simd=19_472), base, POLICY)
    assert same.kind == "ok" and "identical to the baseline" in same.reason and not same.is_regression
    grown = b.judge_counts(counts(83_330, simd=19_473), base, POLICY)       # one instruction more
    assert grown.is_regression and grown.totals == {"default": 83_330} and grown.baseline_totals == {"default": 83_329}
    (line,) = grown.regressions
    assert line == "default: 83,330 instructions per inference, baseline 83,329 (+0.00%; simd_fp +1)"
    fewer = b.judge_counts(counts(80_000), base, POLICY)
    assert fewer.kind == "fewer" and "--update-baseline" in fewer.reason


def test_the_count_tolerance_is_a_percentage_and_never_negative():
    base = entry(10.0, [10.0], instruction_counts=counts(100_000))
    loose = Policy(count_tolerance_pct=1.0)
    assert b.judge_counts(counts(101_000), base, loose).kind == "ok"
    assert "within --count-tolerance 1 %" in b.judge_counts(counts(101_000), base, loose).reason
    over = b.judge_counts(counts(101_001), base, loose)
    assert over.is_regression and over.reason.startswith("more than 1 % more instructions than the baseline")
    with pytest.raises(ConfigError, match="--count-tolerance -1 is negative"):
        Policy(count_tolerance_pct=-1.0)


def test_counts_without_a_comparable_baseline_are_not_judged():
    assert b.judge_counts(counts(1000), None, POLICY).kind == "no-baseline"
    assert b.judge_counts(counts(1000), entry(10.0, [10.0]), POLICY).kind == "no-baseline"   # a pre-count baseline
    base = entry(10.0, [10.0], instruction_counts=counts(1000))
    other_shape = b.judge_counts(counts(4000, shapes={"x": [1, 3, 32, 32]}), base, POLICY)
    assert other_shape.kind == "incomparable" and "counts scale with them" in other_shape.reason
    elsewhere = counts(1000)
    elsewhere["paths"] = {"a55": elsewhere["paths"]["default"]}
    assert b.judge_counts(elsewhere, base, POLICY).kind == "incomparable"
    broken = entry(10.0, [10.0], instruction_counts={"paths": {"default": {"per_inference": {"total": "many"}}}})
    verdict = b.judge_counts(counts(1000), broken, POLICY)
    assert verdict.kind == "incomparable" and "malformed" in verdict.reason


def test_a_changed_runtime_or_runner_is_named_but_still_gated():
    base = entry(10.0, [10.0], instruction_counts=counts(1000))
    verdict = b.judge_counts(counts(1001, runner_build="r2"), base, POLICY)
    assert verdict.is_regression and "(the runner build differs from the baseline's)" in verdict.reason
    same = b.judge_counts(counts(1000, runtime_version="v2.14", runner_build="r2"), base, POLICY)
    assert same.kind == "ok" and "(the runtime, runner build differ from the baseline's)" in same.reason


def test_the_count_check_fails_only_a_regression_and_exits_17():
    from edgekit.device import checks
    from edgekit.device.results import EXIT_COUNT_REGRESSION, EXIT_REGRESSION, CellResult, CheckResult, SuiteResult

    base = entry(10.0, [10.0], instruction_counts=counts(1000))
    failed = checks.count_check(b.judge_counts(counts(1200), base, POLICY), updating=False)
    assert failed.status == "failed" and failed.kind == "count" and failed.message.startswith("count regression: ")
    assert (failed.value, failed.limit) == (1200.0, 1000.0)
    assert checks.count_check(b.judge_counts(counts(1200), base, POLICY), updating=True).status == "skipped"
    assert checks.count_check(b.judge_counts(counts(1000), base, POLICY), updating=False).status == "passed"
    assert checks.count_check(b.judge_counts(counts(1000), None, POLICY), updating=False).status == "skipped"

    info = {"key": "m/arm64-fp32"}
    qemu = {"id": "qemu-default"}
    latency = CheckResult("latency median", "failed", "regression", "latency")
    golden = CheckResult("golden cosine [y]", "failed", "0.5")
    cells = [CellResult(info, qemu, (failed,)), CellResult(info, qemu, (latency,)), CellResult(info, qemu, (golden,))]
    assert [c.exit_code for c in cells] == [EXIT_COUNT_REGRESSION, EXIT_REGRESSION, 9] and EXIT_COUNT_REGRESSION == 17
    assert CellResult(info, qemu, (failed, latency)).exit_code == EXIT_REGRESSION
    assert CellResult(info, qemu, (failed, golden)).exit_code == 9

    def suite(cs):
        return SuiteResult(tuple(cs), "t", {}).exit_code
    assert (suite(cells[:1]), suite(cells[:2]), suite(cells)) == (17, 15, 9)


def test_the_history_keeps_each_entry_s_totals():
    device = {"id": "qemu-default", "spec": "qemu", "facts": None}
    doc = b.updated(None, device, "m/arm64-fp32", entry(1.0, [1.0], instruction_counts=counts(1000)))
    doc = b.updated(doc, device, "m/arm64-fp32", entry(1.0, [1.0], instruction_counts=counts(1200)))
    doc = b.updated(doc, device, "m/arm64-fp32", entry(1.0, [1.0]))
    history = doc["entries"]["m/arm64-fp32"]["history"]
    assert [h["instructions"] for h in history] == [{"default": 1000}, {"default": 1200}]
