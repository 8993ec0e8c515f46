"""Real PaddleSlim pruning: the digits example to half its FLOPs with fine-tuning, residual ties, skip
reasons, and an exported MobileNet (no training code) pruned to a FLOPs target from sensitivity."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import paddle
import pytest
from paddle import nn


from edgekit.model import parity
from edgekit.build.config import resolve
from edgekit.contracts.settings import InputSpec, ModelConfig, QuantConfig, load_toml
from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.model.data import Samples, load_images, read_labels
from edgekit.core.errors import ConfigError
from edgekit.export import StaticRunner, load_inference
from edgekit.export import program as prog
from edgekit.model.evalset import EvalSet, with_truth
from edgekit.prune import PruneError, prune_config
from edgekit.prune.run import measure_nb
from edgekit.prune.stage import prune_factory_model
from edgekit.prune.static import prune_inference_model
from edgekit.prune.dygraph import prune_layer
from edgekit.prune.export import export_layer

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "edgekit" / "examples" / "digits"


# ---------------------------------------------------------------- models built here


class TinyResNet(nn.Layer):
    """stem -> [a(x) + b(x)] (projection residual) -> c -> [h + d(h)] (identity residual) -> fc."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2D(3, 16, 3, padding=1, bias_attr=False), nn.BatchNorm2D(16), nn.ReLU())
        self.a = nn.Sequential(nn.Conv2D(16, 16, 3, padding=1, bias_attr=False), nn.BatchNorm2D(16))
        self.b = nn.Sequential(nn.Conv2D(16, 16, 1, bias_attr=False), nn.BatchNorm2D(16))
        self.c = nn.Sequential(nn.Conv2D(16, 32, 3, stride=2, padding=1, bias_attr=False), nn.BatchNorm2D(32), nn.ReLU())
        self.d = nn.Sequential(nn.Conv2D(32, 32, 3, padding=1, bias_attr=False), nn.BatchNorm2D(32))
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        return self.masked(x, None)

    def masked(self, x, masks):
        """With masks (one per tied channel set), the unpruned model computes what the pruned one should."""
        m = masks or [1.0, 1.0, 1.0]
        x = self.stem(x) * m[0]
        y = nn.functional.relu(self.a(x) + self.b(x)) * m[1]
        h = self.c(y) * m[2]
        z = nn.functional.relu(h + self.d(h)) * m[2]
        return self.fc(paddle.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1))


class InputResidual(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc(paddle.flatten(nn.functional.adaptive_avg_pool2d(x + self.conv(x), 1), 1))


class GroupedNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(3, 16, 3, padding=1)
        self.grouped = nn.Conv2D(16, 32, 3, padding=1, groups=4)
        self.dw = nn.Conv2D(32, 32, 3, padding=1, groups=32)
        self.pw = nn.Conv2D(32, 32, 1)
        self.fc = nn.Linear(32, 3)

    def forward(self, x):
        x = self.pw(self.dw(self.grouped(self.conv(x))))
        return self.fc(paddle.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def _seeded(cls):
    paddle.disable_static()
    paddle.seed(3)
    model = cls()
    model.eval()
    return model


def _conv_weights(layer):
    return {name: sub.weight for name, sub in layer.named_sublayers() if isinstance(sub, nn.Conv2D)}


def _kept(original: np.ndarray, pruned: np.ndarray) -> list[int]:
    """Which original filters survived (`original` restricted to the surviving input channels): each pruned
    filter is an unchanged copy of exactly one original filter."""
    found = []
    for row in pruned:
        (match,) = np.flatnonzero(np.all(np.isclose(original, row[None]).reshape(len(original), -1), axis=1))
        found.append(int(match))
    return found


def _program_filters(model_file: Path) -> list[tuple[int, ...]]:
    block = prog.parse_program(model_file).global_block()
    return [tuple(block.var(op.input("Filter")[0]).shape) for op in block.ops if op.type in ("conv2d", "depthwise_conv2d")]


# ---------------------------------------------------------------- the bundled example


@pytest.fixture(scope="module")
def digits():
    cfg = resolve(EXAMPLE / "edgekit.toml", {})
    spec = PreprocessSpec.from_mapping(load_toml(EXAMPLE / "edgekit.toml")["preprocess"])
    labels = read_labels(EXAMPLE / "data" / "labels.txt")
    folder = EXAMPLE / "data"
    return cfg, load_images(folder / "test", spec, "image", labels), load_images(folder / "calib", spec, "image", labels)


def test_digits_half_the_flops_fine_tuned_keeps_top1_within_one_point(tmp_path, digits):
    from edgekit.quantize import quantize_int8

    cfg, evaluation, calibration = digits
    settings = prune_config({"target": "flops", "reduction": 0.5, "criterion": "l1_norm", "budget": 1.0,
                             "finetune": "edgekit.examples.digits.finetune:finetune", "epochs": 6})
    pruned = prune_factory_model(cfg.model, settings, tmp_path, with_truth(cfg, evaluation))
    report = pruned.report

    # real shapes, read from the exported program
    shapes = _program_filters(pruned.model.model_file)
    assert [s[0] for s in shapes] == [r.filters_after for r in report.rows] == [11, 22, 45]
    assert [s[1] for s in shapes] == [1, 11, 22]
    assert _program_filters(pruned.unpruned.model_file) == [(16, 1, 3, 3), (32, 16, 3, 3), (64, 32, 3, 3)]
    # FLOPs by hand from those shapes (conv: out H*W * filters * k*k*inputs; fc: inputs * classes)
    c0, c1, c2 = (s[0] for s in shapes)
    assert report.flops["after"] == 32 * 32 * c0 * 9 + 16 * 16 * c1 * 9 * c0 + 8 * 8 * c2 * 9 * c1 + c2 * 10
    assert report.flops["before"] == 2507392 and report.flops_reduction >= 0.5
    assert report.params["after"] < 0.55 * report.params["before"]

    # accuracy: pruning alone breaks the model, fine-tuning brings it back within a point
    unpruned, fine_tuned = report.metric["unpruned"], report.metric["fine-tuned"]
    assert report.metric["pruned"] < unpruned - 20
    assert fine_tuned >= unpruned - 1.0
    exported = StaticRunner(pruned.model).run(evaluation.inputs)[0]
    assert parity.top1(exported, evaluation.labels) == pytest.approx(fine_tuned)
    assert report.checks and report.checks[0].passed

    # after quantisation (PaddleSlim's simulation, as the build's tier B sees it) and on disk
    quantized = quantize_int8(pruned.model, calibration, QuantConfig(), (tmp_path / "q").absolute())
    report = report.with_metric("int8 simulated", parity.top1(StaticRunner(quantized.model).run(evaluation.inputs)[0],
                                                              evaluation.labels))
    assert report.metric["int8 simulated"] >= unpruned - 2.0
    (tmp_path / "nb").mkdir()
    report = measure_nb(replace(pruned, report=report), tmp_path / "nb", timeout=300).report
    assert report.nb_bytes["pruned"] < 0.65 * report.nb_bytes["unpruned"]
    print("\n".join(report.lines()))


# ---------------------------------------------------------------- residual ties, skips


def test_residual_tied_convs_keep_the_same_channels_and_export(tmp_path):
    model = _seeded(TinyResNet)
    reference = _seeded(TinyResNet)
    before = {k: w.numpy().copy() for k, w in _conv_weights(model).items()}
    result = prune_layer(model, [1, 3, 16, 16], prune_config({"ratio": 0.5}))
    rows = {r.layer: r for r in result.report.rows}
    after = {k: w.numpy() for k, w in _conv_weights(model).items()}

    assert [(k, v.shape[0]) for k, v in after.items()] == [("stem.0", 8), ("a.0", 8), ("b.0", 8), ("c.0", 16), ("d.0", 16)]
    assert rows["b.0"].note.startswith("tied to a.0") and rows["d.0"].note.startswith("tied to c.0")
    # a and b read the pruned stem: compare on the surviving input channels
    stem_kept = _kept(before["stem.0"], after["stem.0"])
    kept_a = _kept(before["a.0"][:, stem_kept], after["a.0"])
    kept_b = _kept(before["b.0"][:, stem_kept], after["b.0"])
    assert kept_a == kept_b and len(set(kept_a)) == 8             # the residual sum keeps the same channels in both
    kept_c = _kept(before["c.0"][:, kept_a], after["c.0"])
    kept_d = _kept(before["d.0"][:, kept_c], after["d.0"])
    assert kept_c == kept_d and len(set(kept_c)) == 16

    # the pruned model computes exactly what the unpruned one does with those channels removed
    masks = []
    for kept, n in ((stem_kept, 16), (kept_a, 16), (kept_c, 32)):
        m = np.zeros([1, n, 1, 1], "float32")
        m[0, kept] = 1
        masks.append(paddle.to_tensor(m))
    x = np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype("float32")
    with paddle.no_grad():
        want = reference.masked(paddle.to_tensor(x), masks).numpy()
        got = model(paddle.to_tensor(x)).numpy()
    assert np.abs(got - want).max() < 1e-4

    # real FLOPs: conv out H*W * filters * k*k*inputs, fc inputs*outputs
    flops = 16 * 16 * 8 * 9 * 3 + 16 * 16 * 8 * 9 * 8 + 16 * 16 * 8 * 1 * 8 + 8 * 8 * 16 * 9 * 8 + 8 * 8 * 16 * 9 * 16 + 16 * 5
    assert result.report.flops["after"] == flops

    static = export_layer(model, (InputSpec("x", (-1, 3, 16, 16)),), tmp_path, {"x": x})
    assert _program_filters(static.model_file) == [(8, 3, 3, 3), (8, 8, 3, 3), (8, 8, 1, 1), (16, 8, 3, 3), (16, 16, 3, 3)]
    assert np.abs(StaticRunner(static).run({"x": x})[0] - got).max() < 1e-5


def test_skip_reasons_and_no_silent_no_op():
    grouped = prune_layer(_seeded(GroupedNet), [1, 3, 8, 8], prune_config({"ratio": 0.5}))
    notes = {r.layer: (r.filters_after, r.note) for r in grouped.report.rows}
    assert notes["conv"] == (16, "skipped: its output feeds grouped convolution grouped (groups=4), whose groups would break")
    assert notes["grouped"][1].startswith("skipped: grouped convolution (groups=4)")
    assert notes["dw"][1] == "skipped: depthwise convolution following grouped, which is not pruned"
    assert notes["pw"][0] == 16
    assert [tuple(w.shape) for w in _conv_weights(grouped.layer).values()][-1] == (16, 32, 1, 1)

    with pytest.raises(PruneError, match="tied to the model's input"):
        prune_layer(_seeded(InputResidual), [1, 16, 8, 8], prune_config({"ratio": 0.5}))

    from edgekit.examples.digits.model import DigitsCNN

    with pytest.raises(PruneError, match="removes no filter"):
        prune_layer(_seeded(DigitsCNN), [1, 1, 32, 32], prune_config({"layers": {"features.0": 0.03}}))  # 0.48 filters
    with pytest.raises(ConfigError, match="not a conv of this model"):
        prune_layer(_seeded(DigitsCNN), [1, 1, 32, 32], prune_config({"layers": {"conv2": 0.5}}))
    one = prune_layer(_seeded(DigitsCNN), [1, 1, 32, 32], prune_config({"layers": {"features.4": 0.5}, "criterion": "fpgm"}))
    assert [tuple(w.shape) for w in _conv_weights(one.layer).values()] == [(16, 1, 3, 3), (16, 16, 3, 3), (64, 16, 3, 3)]


# ---------------------------------------------------------------- an exported model, no training code


def _export_mobilenet(folder: Path) -> Path:
    paddle.disable_static()
    paddle.seed(0)
    model = paddle.vision.models.mobilenet_v1(scale=0.25, num_classes=10)
    rng = np.random.default_rng(0)
    for _, p in model.named_parameters():      # He init: paddle's default init makes this deep net's outputs ~1e-13
        if len(p.shape) == 4:
            p.set_value(rng.normal(0, np.sqrt(2.0 / np.prod(p.shape[1:])), p.shape).astype("float32"))
    model.eval()
    spec = paddle.static.InputSpec([1, 3, 64, 64], "float32", "image")
    paddle.jit.save(paddle.jit.to_static(model, input_spec=[spec], full_graph=True), str(folder / "model"))
    return folder


def test_exported_mobilenet_prunes_to_a_flops_target_from_sensitivity(tmp_path):
    from paddleslim.analysis import flops

    source = _export_mobilenet(tmp_path / "src")
    (tmp_path / "in").mkdir()
    static = load_inference(ModelConfig(name="mbv1", model_file=source), tmp_path / "in")
    evaluation = Samples({"image": np.random.default_rng(1).standard_normal((24, 3, 64, 64)).astype("float32")}, None,
                         (), "gaussian noise")
    settings = prune_config({"target": "flops", "reduction": 0.4, "sensitivity_samples": 8, "cache_dir": str(tmp_path / "cache")})
    pruned = prune_inference_model(static, settings, tmp_path / "p1", EvalSet(evaluation))
    report = pruned.report
    print("\n".join(report.lines()))

    assert report.sensitivity["samples"] == 8 and not report.sensitivity["cached"]
    chosen = report.chosen_ratios()
    assert len(chosen) == 14 and len({round(r, 2) for r in chosen.values()}) >= 5     # per-layer, not one ratio
    # real shapes in the saved program: pointwise convs as planned, each depthwise conv follows its producer
    shapes = _program_filters(pruned.model.model_file)
    assert [s[0] for s in shapes] == [r.filters_after for r in report.rows]
    assert all(shapes[i][0] == shapes[i - 1][0] for i in range(1, len(shapes), 2))
    assert all(shapes[i + 1][1] == shapes[i][0] for i in range(1, len(shapes) - 1, 2))
    assert sum(s[0] < r.filters_before for s, r in zip(shapes, report.rows)) >= 20
    # real FLOPs of the saved program, and it runs
    saved = prog.parse_program(pruned.model.model_file)
    assert float(flops(saved)) == report.flops["after"] and report.flops_reduction >= 0.4
    out = StaticRunner(pruned.model).run(evaluation.inputs)[0]
    ref = StaticRunner(static).run(evaluation.inputs)[0]
    assert out.shape == (24, 10)
    assert 100 * parity.cosine(ref, out) == pytest.approx(report.metric["pruned"], abs=1e-6)
    assert report.metric["pruned"] > 80

    again = prune_inference_model(static, settings, tmp_path / "p2", EvalSet(evaluation)).report
    assert again.sensitivity["cached"] and again.chosen_ratios() == chosen


def test_text_lines_are_scored_in_width_groups_as_every_other_stage_scores_them(tmp_path):
    """A folder of text lines is one tensor padded to the widest line; the tiers and the INT8 search run it in groups
    of similar width (`run_lines`). Pruning scored the padded tensor: another figure than the build's own."""
    from edgekit.model.data import Lines, run_lines

    paddle.disable_static()
    spec = paddle.static.InputSpec([-1, 3, 16, 48], "float32", "x")     # FLOPs are counted at a fixed size
    paddle.jit.save(paddle.jit.to_static(_seeded(TinyResNet), input_spec=[spec], full_graph=True),
                    str(tmp_path / "src" / "model"))
    (tmp_path / "in").mkdir()
    static = load_inference(ModelConfig(name="res", model_file=tmp_path / "src"), tmp_path / "in")
    x = np.random.default_rng(2).standard_normal((6, 3, 16, 48)).astype("float32") + 1.0
    x[:3, :, :, 8:] = 0.0                                   # three lines 8 wide, padded to the widest (48)
    lines = Samples({"x": x}, None, (), "text lines", Lines("x", 3, (8, 8, 8, 48, 48, 48), 8))
    pruned = prune_inference_model(static, prune_config({"ratio": 0.5}), tmp_path / "out", EvalSet(lines))
    grouped = 100 * parity.cosine(run_lines(StaticRunner(static).run, lines)[0],
                                  run_lines(StaticRunner(pruned.model).run, lines)[0])
    padded = 100 * parity.cosine(StaticRunner(static).run({"x": x})[0], StaticRunner(pruned.model).run({"x": x})[0])
    assert abs(grouped - padded) > 1e-3                     # the two readings differ on this model
    assert pruned.report.metric["pruned"] == pytest.approx(grouped, abs=1e-6)


def tiny_resnet():
    """The factory of the width-group test below (`test_prune:tiny_resnet`)."""
    return _seeded(TinyResNet)


def test_a_factory_model_scores_text_lines_in_width_groups_too(tmp_path):
    from edgekit.model.data import Lines, run_lines

    x = np.random.default_rng(2).standard_normal((6, 3, 16, 48)).astype("float32") + 1.0
    x[:3, :, :, 8:] = 0.0
    lines = Samples({"x": x}, None, (), "text lines", Lines("x", 3, (8, 8, 8, 48, 48, 48), 8))
    model = ModelConfig(name="res", factory="test_prune:tiny_resnet", inputs=(InputSpec("x", (-1, 3, 16, 48)),))
    pruned = prune_factory_model(model, prune_config({"ratio": 0.5}), tmp_path, EvalSet(lines))
    paddle.disable_static()
    reference = run_lines(lambda inputs: [tiny_resnet()(paddle.to_tensor(inputs["x"])).numpy()], lines)[0]
    grouped = 100 * parity.cosine(reference, run_lines(StaticRunner(pruned.model).run, lines)[0])
    assert pruned.report.metric["pruned"] == pytest.approx(grouped, abs=1e-4)


def test_static_path_ties_residual_convs_too(tmp_path):
    """The same tiny ResNet, exported first: the program pruner must tie the same convs and stay exact."""
    paddle.disable_static()
    spec = paddle.static.InputSpec([-1, 3, 16, 16], "float32", "x")
    paddle.jit.save(paddle.jit.to_static(_seeded(TinyResNet), input_spec=[spec], full_graph=True), str(tmp_path / "src" / "model"))
    (tmp_path / "in").mkdir()
    static = load_inference(ModelConfig(name="res", model_file=tmp_path / "src"), tmp_path / "in")
    pruned = prune_inference_model(static, prune_config({"ratio": 0.5}), tmp_path / "out", None)
    rows = pruned.report.rows
    assert [r.filters_after for r in rows] == [8, 8, 8, 16, 16]
    assert rows[2].note.startswith("tied to") and rows[4].note.startswith("tied to")
    assert _program_filters(pruned.model.model_file) == [(8, 3, 3, 3), (8, 8, 3, 3), (8, 8, 1, 1), (16, 8, 3, 3), (16, 16, 3, 3)]

    runner, original = StaticRunner(pruned.model), StaticRunner(static)
    weights = [(np.array(original.scope.find_var(r.param).get_tensor()), np.array(runner.scope.find_var(r.param).get_tensor()))
               for r in rows]
    stem = _kept(*weights[0])
    kept_a, kept_b = _kept(weights[1][0][:, stem], weights[1][1]), _kept(weights[2][0][:, stem], weights[2][1])
    kept_c = _kept(weights[3][0][:, kept_a], weights[3][1])
    assert kept_a == kept_b and kept_c == _kept(weights[4][0][:, kept_c], weights[4][1])
    x = np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype("float32")
    got = runner.run({"x": x})[0]
    paddle.disable_static()     # the runners switched Paddle to static mode
    masks = []
    for kept, n in ((stem, 16), (kept_a, 16), (kept_c, 32)):
        m = np.zeros([1, n, 1, 1], "float32")
        m[0, kept] = 1
        masks.append(paddle.to_tensor(m))
    with paddle.no_grad():
        want = _seeded(TinyResNet).masked(paddle.to_tensor(x), masks).numpy()
    assert np.abs(got - want).max() < 1e-4


# ---------------------------------------------------------------- the CLI


def test_cli_build_prunes_fine_tunes_and_records_it(tmp_path, cli):
    from bundles import manifest

    out = tmp_path / "out"
    cli("build", "--quant", "int8", "--prune", "flops:50%", "--finetune", "edgekit.examples.digits.finetune:finetune",
        "--epochs", "6", "--out", out, "--quiet")
    bundle = out / "digits" / "arm64-int8"
    m = manifest(bundle)
    pruning = m["pruning"]
    assert [row["filters_after"] for row in pruning["layers"]] == [11, 22, 45] and pruning["flops_reduction"] >= 0.5
    assert pruning["metric"]["fine-tuned"] >= pruning["metric"]["unpruned"] - 1.0
    assert pruning["metric"]["int8 simulated"] == m["parity"]["accuracy"]["int8 simulated"]
    assert pruning["nb_bytes"]["bundle arm64 int8"] == m["model"]["bytes"] < 0.5 * pruning["nb_bytes"]["unpruned"]
    unpruned_int8 = pruning["nb_parts"]["unpruned arm64 int8"]        # the same int8 path, unpruned
    assert pruning["nb_parts"]["bundle arm64 int8"]["weights"] < 0.6 * unpruned_int8["weights"]
    assert "features.4   32 -> 22" in (bundle / "prune.txt").read_text()
    assert m["config"]["prune"]["goal"] == "flops"


def test_cli_prune_over_budget_fails_with_the_report(tmp_path, cli):
    text = (EXAMPLE / "edgekit.toml").read_text()
    for key in ("digits_cnn.pdparams", "data/calib", "data/test", "data/labels.txt"):
        text = text.replace(f'"{key}"', f'"{EXAMPLE / key}"')
    config = tmp_path / "edgekit.toml"
    config.write_text(text + "\n[prune]\nratio = 0.5\nbudget = 1.0\n")
    result = cli("prune", "--config", config, "--out", tmp_path / "out", ok=False)
    assert result.exit_code == 12
    assert "over the budget of 1" in result.output and "✗ tier prune top-1 % loss vs unpruned" in result.output
    assert not (tmp_path / "out" / "digits" / "pruned").exists()
