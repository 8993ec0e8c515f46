"""Child of tests/e2e/test_calibration_memory.py: one PaddleSlim calibration in a fresh process, its peak RSS.

    python calibration_peak.py FOLDER BATCH

Builds (seeded, in FOLDER) a small conv net whose activations are big enough to measure at 3x256x256, calibrates
16 samples in batches of BATCH through edgekit's own PaddleSlim call, and prints one JSON line: the resident memory
before calibrating and at its peak, edgekit's per-sample estimate, and whether edgekit's list of sampled activations
is PaddleSlim's own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

SHAPE = (3, 256, 256)
SAMPLES = 16


def rss(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def small_net(folder: Path):
    import paddle

    from edgekit.contracts.settings import InputSpec
    from edgekit.model.artifacts import StaticModel

    paddle.enable_static()
    paddle.seed(0)
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = 0
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, *SHAPE], "float32")
        y = x
        for channels in (16, 16, 16):
            y = paddle.nn.functional.relu(paddle.static.nn.conv2d(y, channels, 3, padding=1))
        out = paddle.static.nn.conv2d(paddle.nn.functional.max_pool2d(y, 4), 4, 1)
    exe = paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(paddle.static.Scope()):
        exe.run(startup)
        paddle.static.save_inference_model(str(folder / "model"), [x], [out], exe, program=main)
    return StaticModel(folder / "model.pdmodel", folder / "model.pdiparams", (InputSpec("x", (-1, *SHAPE)),),
                       (out.name,), "test", ())


def main(folder: Path, batch: int) -> None:
    from edgekit.contracts.settings import QuantConfig
    from edgekit.export import program as prog
    from edgekit.model.data import Samples
    from edgekit.quantize import ptq

    model = small_net(folder)
    samples = Samples({"x": np.random.default_rng(0).normal(0, 1, (SAMPLES, *SHAPE)).astype(np.float32)})
    estimate = ptq.calibration_sample_bytes(model, samples)
    expected = ptq.sampled_activations(prog.parse_program(model.model_file), ptq.quantizable_ops())
    out = folder / f"int8-{batch}"
    out.mkdir()
    before = rss("VmRSS:")
    run = ptq._run(model, samples, QuantConfig(algo="avg"), out, (), batch, SAMPLES // batch, None, ptq.quantizable_ops())
    print(json.dumps({"batch": batch, "before": before, "peak": rss("VmHWM:"), "estimate": estimate,
                      "same_activations": sorted(run._quantized_act_var_name) == sorted(expected)}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
