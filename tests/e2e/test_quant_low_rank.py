"""PaddleSlim's samplers never see a 0-d or 1-d activation (issue 30).

PP-OCRv5_mobile_rec ended INT8 in PaddleSlim 2.6's `_sample_avg` (`var_tensor.reshape(var_tensor.shape[0], -1)`
-> IndexError on a 0-d activation). Here a small Paddle 2.6 program has the same kinds of activations, written by
ops PaddleSlim observes: a 0-d mean, a 1-d per-sample mean and a [1] constant. Real PaddleSlim, real calibration.
"""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.model.artifacts import StaticModel
from edgekit.contracts.settings import InputSpec, QuantConfig
from edgekit.model.data import Samples
from edgekit.quantize.ptq import quantize_int8

pytestmark = pytest.mark.e2e


def low_rank_program(folder):
    import paddle

    paddle.enable_static()
    paddle.seed(0)            # the weights, whatever ran before in this process (the cosine below depends on them)
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = 0
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, 3, 8, 8], "float32")
        c = paddle.static.nn.conv2d(x, 4, 3, padding=1, bias_attr=False)
        whole = paddle.mean(c)                                  # 0-d: reduce_mean over everything
        per_sample = paddle.mean(c, axis=[1, 2, 3])             # 1-d: [N]
        y = paddle.nn.functional.relu(c * whole + paddle.reshape(per_sample, [-1, 1, 1, 1]))
        out = paddle.static.nn.conv2d(y, 2, 1, bias_attr=False)
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        paddle.static.save_inference_model(str(folder / "model"), [x], [out], exe, program=main)
    return StaticModel(folder / "model.pdmodel", folder / "model.pdiparams", (InputSpec("x", (-1, 3, 8, 8)),),
                       (out.name,), "dygraph", ())


def run(model: StaticModel, x: np.ndarray) -> np.ndarray:
    import paddle

    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        program, feeds, fetches = paddle.static.load_inference_model(str(model.model_file.with_suffix("")), exe)
        return np.asarray(exe.run(program, feed={feeds[0]: x}, fetch_list=fetches)[0])


@pytest.mark.parametrize("algo", ["avg", "hist"])
def test_low_rank_activations_stay_float_and_the_rest_calibrates(tmp_path, algo):
    rng = np.random.default_rng(0)
    model = low_rank_program(tmp_path)
    samples = Samples({"x": rng.normal(0, 1, (32, 3, 8, 8)).astype(np.float32)})
    out = tmp_path / algo
    out.mkdir()
    quantized = quantize_int8(model, samples, QuantConfig(algo=algo, batch_size=8, batch_nums=4), out)
    low = set(quantized.float_activations)
    assert any(name.startswith("mean_") for name in low) and len(low) >= 2      # the 0-d and the 1-d means
    ops = quantized.model.op_types
    assert any(op.startswith(("fake_", "quantize_linear", "dequantize_linear")) for op in ops)   # the convs are INT8
    x = rng.normal(0, 1, (4, 3, 8, 8)).astype(np.float32)
    want, got = run(model, x), run(quantized.model, x)
    cosine = float(np.dot(want.ravel(), got.ravel()) / (np.linalg.norm(want) * np.linalg.norm(got)))
    # this 4-channel net's INT8 error depends on its random weights: over weight seeds 0-5, avg gave cosine 0.952-0.998
    # and hist 0.995-0.9999 (seed 0, fixed above: 0.9519 and 0.9946); unseeded, it failed 0.99 after other tests
    assert cosine > 0.9
