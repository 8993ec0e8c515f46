"""The fold stage on real Paddle programs: conv affine chains and decomposed activations, checked numerically."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.model.artifacts import StaticModel
from edgekit.contracts.settings import InputSpec
from edgekit.export import fold
from edgekit.export import program as prog

pytestmark = pytest.mark.e2e


def _save(tmp_path, build) -> StaticModel:
    """A Paddle 2.6 inference model from `build(x)`, with non-trivial BN statistics."""
    import paddle

    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 3, 16, 16], "float32")
        out = build(paddle, x)
    scope, exe = paddle.static.Scope(), paddle.static.Executor(paddle.CPUPlace())
    rng = np.random.default_rng(0)
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        for var in main.list_vars():
            if var.persistable and ("mean" in var.name or "variance" in var.name):
                shape = [int(d) for d in var.shape]
                low = 0.5 if "variance" in var.name else -0.3
                scope.var(var.name).get_tensor().set(rng.uniform(low, low + 1.0, shape).astype(np.float32), paddle.CPUPlace())
        with paddle.utils.unique_name.guard():
            paddle.static.save_inference_model(str(tmp_path / "model"), [x], [out], exe, program=main)
    program = prog.parse_program(tmp_path / "model.pdmodel")
    feeds, fetches = prog.feeds_and_fetches(program)
    return StaticModel(tmp_path / "model.pdmodel", tmp_path / "model.pdiparams", tuple(InputSpec(*f) for f in feeds),
                       tuple(fetches), "inference", prog.op_types(program))


def _x2paddle_style(paddle, x):
    """conv+bias -> BN -> scalar affine; hard_swish as x * clip(x + 3, 0, 6) / 6 with constant tensors (X2Paddle's
    reading of Paddle2ONNX's HardSwish); hard_sigmoid as clip(scale(x)); then a 1x1 conv."""
    y = paddle.nn.BatchNorm2D(8)(paddle.nn.Conv2D(3, 8, 3, padding=1)(x))
    y = y * paddle.full([1], 1.5) + paddle.full([1], 0.25)
    h = y * paddle.clip(y + paddle.full([1], 3.0), 0.0, 6.0) / paddle.full([1], 6.0)
    gate = paddle.clip(paddle.scale(h, 0.2, 0.5), 0.0, 1.0)
    return paddle.nn.Conv2D(8, 4, 1)(h * gate)


def test_chains_and_activations_fold_and_compute_the_same(tmp_path):
    model = _save(tmp_path / "src", _x2paddle_style)
    before = set(model.op_types)
    assert {"batch_norm", "clip", "elementwise_div", "fill_constant"} <= before
    folded, report = fold.fold_program(model, tmp_path / "folded")
    after = report["op_types_after"]
    # Paddle 2.6 writes a conv's bias as elementwise_add(conv, reshape2(bias)), as X2Paddle does: both convs fold
    assert report["conv_chains_folded"] == 2 and report["activations"] == {"hard_swish": 1, "hard_sigmoid": 1}
    assert not {"batch_norm", "clip", "elementwise_div", "fill_constant", "reshape2"} & set(after)
    assert after["elementwise_add"] == 2                 # the two convs' biases, each as opt folds it into the conv
    assert report["ops"]["after"] < report["ops"]["before"]
    x = np.random.default_rng(1).standard_normal((4, 3, 16, 16)).astype(np.float32)
    check = fold.check(model, folded, {"x": x})
    assert check.passed and check.outputs[0].max_abs < 1e-5 and check.what == "folded vs unfolded"
    assert folded.fetches == model.fetches                # one save_infer_model scale per fetch, as before


def test_a_graph_with_nothing_to_fold_is_left_alone(tmp_path):
    model = _save(tmp_path / "src", lambda paddle, x: paddle.nn.functional.relu(paddle.nn.Conv2D(3, 4, 3, bias_attr=False)(x)))
    assert fold.fold_program(model, tmp_path / "folded") is None
    assert not (tmp_path / "folded").exists()


def test_a_lone_batch_norm_after_a_bias_free_conv_is_left_to_opt(tmp_path):
    """opt's conv_bn_fuse_pass folds it already; rewriting it would only rename the weights."""
    model = _save(tmp_path / "src", lambda paddle, x: paddle.nn.BatchNorm2D(4)(paddle.nn.Conv2D(3, 4, 3, bias_attr=False)(x)))
    assert fold.fold_program(model, tmp_path / "folded") is None
