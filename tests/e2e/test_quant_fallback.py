"""INT8 within a budget on a model with one deliberately sensitive layer, through the real toolchain.

`OutlierNet.sensitive` is a conv whose every output channel holds one weight of
40 among weights of ~0.1. The outlier multiplies an input channel the stem's ReLU
always zeroes, so FP32 never sees it; per-channel int8 scales to it and rounds
the useful weights to zero. Measured (avg calibration, 64 random samples): the
whole model in int8 reaches output cosine 0.953; that layer alone in int8 costs
0.19 of cosine, the next worst layer 0.0007; with it in float the cosine is 0.9994.
"""

from dataclasses import replace

import numpy as np
import paddle
import pytest
from paddle import nn

from edgekit.contracts.settings import InputSpec, ModelConfig, QuantConfig
from edgekit.model.data import Samples
from edgekit.export import StaticRunner, export_dygraph
from edgekit.export import program as prog
from edgekit.model import parity
from edgekit.quantize import count_quantized_ops
from edgekit.quantize.report import write_report
from edgekit.quantize.search import SearchPlan, quantize_to_budget
from edgekit.quantize.sensitivity import Budget

pytestmark = pytest.mark.e2e

BUDGET = Budget.for_data(0.01, None)        # output cosine >= 0.99: the tier-B gate without labels
QUANT = QuantConfig(algo="avg", batch_size=16, batch_nums=4)


class OutlierNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2D(3, 8, 3, padding=1)
        self.sensitive = nn.Conv2D(8, 8, 3, padding=1)
        self.tail = nn.Conv2D(8, 8, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2D(1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        x = nn.functional.relu(self.stem(x))
        x = nn.functional.relu(self.sensitive(x))
        x = nn.functional.relu(self.tail(x))
        return self.head(paddle.flatten(self.pool(x), 1))


def outlier_net():
    """The factory export_dygraph imports as `test_quant_fallback:outlier_net`."""
    paddle.seed(7)
    net = OutlierNet()
    rng = np.random.default_rng(7)
    stem_w, stem_b = rng.normal(0, 0.3, (8, 3, 3, 3)), rng.normal(0, 0.1, 8)
    stem_w[7], stem_b[7] = 0.0, -1.0              # channel 7 is always 0 after the ReLU
    sensitive_w = rng.normal(0, 0.1, (8, 8, 3, 3))
    sensitive_w[:, 7, 1, 1] = 40.0                # one outlier per output channel, on the dead channel
    values = {net.stem.weight: stem_w, net.stem.bias: stem_b,
              net.sensitive.weight: sensitive_w, net.sensitive.bias: rng.normal(0, 0.05, 8),
              net.tail.weight: rng.normal(0, 0.15, (8, 8, 3, 3)), net.tail.bias: rng.normal(0, 0.05, 8),
              net.head.weight: rng.normal(0, 0.5, (8, 4)), net.head.bias: np.zeros(4)}
    for param, value in values.items():
        param.set_value(value.astype(np.float32))
    return net


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("outlier")
    rng = np.random.default_rng(0)
    calibration = Samples({"x": rng.standard_normal((64, 3, 8, 8)).astype(np.float32)}, source="calib")
    evaluation = Samples({"x": rng.standard_normal((64, 3, 8, 8)).astype(np.float32)}, source="eval")
    cfg = ModelConfig(name="outlier", factory="test_quant_fallback:outlier_net", inputs=(InputSpec("x", (-1, 3, 8, 8)),))
    (root / "export").mkdir()
    static = export_dygraph(cfg, root / "export", dict(evaluation.head(8).inputs))
    return root, static, calibration, evaluation


def _search(setup, name, cache=None, **plan):
    root, static, calibration, evaluation = setup
    return quantize_to_budget(static, calibration, evaluation, QUANT, SearchPlan(BUDGET, **plan), root / name, cache)


def _sensitive(layers):
    (layer,) = [layer for layer in layers if "self.sensitive(x)" in layer.source]
    return layer


def test_without_fallback_the_budget_fails_loudly(setup):
    result = _search(setup, "nofallback", algos=("avg", "abs_max"), fallback=False)
    assert not result.holds
    assert all(not c.holds for c in result.candidates)
    assert result.chosen.score.cosine < 0.97          # measured 0.953 (avg): far outside the budget
    lines = result.lines()      # what the build prints before tier B fails it (exit 9)
    assert any("avg" in line and "✗" in line for line in lines)
    assert any("MISSES the budget" in line for line in lines)


def test_fallback_keeps_exactly_the_outlier_layer_in_float(setup, tmp_path):
    result = _search(setup, "fallback", always_analyse=True)
    layers = result.layers
    assert [layer.op_type for layer in layers] == ["conv2d", "conv2d", "conv2d", "matmul_v2"]
    sensitive = _sensitive(layers)

    # measured, not assumed: the outlier layer is the most sensitive by far
    first, second = result.sensitivity[0], result.sensitivity[1]
    assert first.layer == sensitive
    assert first.value > 0.05 and first.value > 20 * second.value

    # the budget missed with everything in int8, holds with that one layer in float, and nothing else is float
    assert not result.candidates[0].holds
    assert result.holds and result.chosen.skip == (sensitive.key,)
    assert [layer.key for layer in result.float_layers] == [sensitive.key]
    assert result.chosen.score.cosine >= 0.99

    # the chosen program really keeps that conv in float and the others quantised
    program = prog.parse_program(result.quantized.model.model_file)
    convs = [op for op in program.global_block().ops if op.type in ("conv2d", "matmul_v2")]
    quantised_inputs = [any(n.endswith(".quantized") for n in op.input_arg_names) for op in convs]
    assert quantised_inputs == [layer.key != sensitive.key for layer in layers]
    assert sum(count_quantized_ops(result.quantized.model).values()) == 2 * (len(layers) - 1)

    # the parity stage's own comparison agrees with the search's figure
    reference = StaticRunner(setup[1]).run(setup[3].inputs)
    simulated = StaticRunner(result.quantized.model).run(setup[3].inputs)
    assert parity.cosine(reference[0], simulated[0]) == pytest.approx(result.chosen.score.cosine, abs=1e-9)

    written = write_report(result, tmp_path / "report")
    text = written["report"].read_text()
    row = next(line for line in text.splitlines() if f"`{sensitive.key}`" in line and "| 1 |" in line)
    assert row.rstrip().endswith("| float |")
    assert sum(1 for line in text.splitlines() if line.rstrip().endswith("| int8 |")) == len(layers) - 1
    # what keeping it float buys: back in int8 it is the whole-model candidate that missed the budget
    (cost,) = result.float_costs()
    assert cost["name"] == sensitive.key and cost["extra_bytes"] == 3 * sensitive.weight_elements
    assert cost["drop_if_int8"] == pytest.approx(1.0 - result.candidates[0].score.cosine) and cost["drop_if_int8"] > 0.01
    assert "## What each float layer costs" in text and f"| `{sensitive.key}` | conv2d |" in text
    png = written["plot"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 750   # 7.5 in at 100 dpi


def test_the_fallback_model_converts_for_arm(setup, tmp_path):
    from edgekit.lite import convert, read_header

    result = _search(setup, "arm")
    assert result.chosen.skip
    nb = convert(result.quantized.model, "arm", tmp_path / "model.nb", timeout=300, target="arm64", precision="int8")
    assert read_header(nb.nb_file).params_bytes > 0


def test_a_rerun_with_the_cache_calibrates_nothing(setup, tmp_path):
    cache = tmp_path / "cache"
    first = _search(setup, "run1", cache, algos=("avg", "mse"))
    # one calibration per algorithm; the float lists of the search are built from avg's thresholds
    assert first.calibrations == 2 and first.replays >= 2 and first.holds
    second = _search(setup, "run2", cache, algos=("avg", "mse"))
    assert second.calibrations == 0
    assert all(c.reused for c in second.candidates)
    assert second.chosen == replace(first.chosen, reused=True, seconds=second.chosen.seconds)
    assert second.quantized.model.model_file.read_bytes() == first.quantized.model.model_file.read_bytes()
    assert second.quantized.model.model_file.parent.parent == cache.absolute()
    # other calibration data is another key
    root, static, calibration, evaluation = setup
    other = Samples({"x": calibration.inputs["x"][::-1].copy()})
    third = quantize_to_budget(static, other, evaluation, QUANT, SearchPlan(BUDGET, algos=("avg",)), root / "run3", cache)
    assert third.calibrations >= 1


# ---------------------------------------------------------------- one calibration, every float list


def _canonical(model):
    """The program op by op (types, slots, attributes) with the values of every persistable input in place of its
    name: PaddleSlim names its channel-scale tensors in set order, which differs between two runs of the same call."""
    import paddle

    paddle.enable_static()
    exe, scope = paddle.static.Executor(paddle.CPUPlace()), paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        program, _, _ = paddle.static.load_inference_model(str(model.model_file.with_suffix("")), exe)
        persistable = {v.name for v in program.list_vars() if v.persistable and v.name not in ("feed", "fetch")}
        ops = []
        for op in program.global_block().ops:
            inputs = {slot: [np.array(scope.find_var(n).get_tensor()).tolist() if n in persistable else n
                             for n in op.input(slot)] for slot in op.input_names}
            attrs = {a: op.attr(a) for a in op.attr_names if a != "op_callstack"}
            ops.append((op.type, inputs, {slot: op.output(slot) for slot in op.output_names}, attrs))
        return ops


def test_a_float_list_from_the_thresholds_is_the_calibrated_model(setup, tmp_path):
    from edgekit.quantize.ptq import SCALES_FILE, quantize_int8, requantize_int8
    from edgekit.quantize.sensitivity import quantizable_layers

    root, static, calibration, evaluation = setup
    skip = (_sensitive(quantizable_layers(static)).key,)
    for algo in ("avg", "hist"):
        cfg = replace(QUANT, algo=algo)
        whole, calibrated, replayed = (tmp_path / algo / name for name in ("whole", "calibrated", "replayed"))
        for folder in (whole, calibrated, replayed):
            folder.mkdir(parents=True)
        quantize_int8(static, calibration, cfg, whole)
        want = quantize_int8(static, calibration, cfg, calibrated, skip)
        got = requantize_int8(static, whole / SCALES_FILE, cfg, replayed, skip)
        assert _canonical(got.model) == _canonical(want.model)
        assert got.calibration_samples == want.calibration_samples and got.calibration_sha256 == want.calibration_sha256
        outputs = [StaticRunner(m.model).run(evaluation.inputs)[0] for m in (want, got)]
        assert np.array_equal(outputs[0], outputs[1])


def test_the_fallback_calibrates_once_per_algorithm(setup):
    result = _search(setup, "once", always_analyse=True)
    assert result.calibrations == 1                             # avg on the data; every float list from its thresholds
    assert result.replays == len(result.layers) + 1            # the sensitivity runs, then the fallback's one step
    assert result.holds and result.chosen.skip == (_sensitive(result.layers).key,)


def test_local_sensitivity_finds_the_outlier_layer_in_one_pass(setup):
    result = _search(setup, "local", method="local")
    sensitive = _sensitive(result.layers)
    first, second = result.sensitivity[0], result.sensitivity[1]
    # per-channel int8 of the sensitive conv rounds every useful weight to 0: its own output is almost all noise
    assert first.layer == sensitive and first.value > 0.5 and first.value > 100 * second.value
    assert result.holds and result.chosen.skip == (sensitive.key,)
    assert [c.purpose for c in result.candidates] == ["algorithm", "fallback"]      # no candidate scored for ranking
    assert result.calibrations == 1 and result.replays == 1
