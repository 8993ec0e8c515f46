"""Host simulation of opt's own precisions: weight-only INT8/INT16 and FP16.

`paddle_lite_opt --quant_model=true --quant_type=QUANT_INT8|QUANT_INT16` stores
conv/matmul weights as integers with per-output-channel scales and dequantises
them at load time (float compute); `--enable_fp16` runs FP16 kernels on ARMv8.2
cores. Neither runs on the host (docs/toolchain.md: x86 weight-only .nb files give
chance-level results), so tier B checks a simulation: the same weights rounded
the way the device will see them, run by the reference executor. For FP16 only
the weight rounding is simulated; FP16 arithmetic is checked on the device.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from edgekit.model.artifacts import QuantizedModel, StaticModel
from edgekit.export import program as prog

WEIGHT_OPS = {"conv2d": ("Filter", 0), "depthwise_conv2d": ("Filter", 0), "conv2d_transpose": ("Filter", 1),
              "mul": ("Y", 1), "matmul": ("Y", 1), "matmul_v2": ("Y", 1)}   # op -> (weight input, output-channel axis)


def fake_quant(weights: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """Symmetric per-channel abs-max quantisation to `bits`, returned dequantised."""
    levels = float(2 ** (bits - 1) - 1)
    moved = np.moveaxis(weights.astype(np.float64), axis, 0)
    scale = np.abs(moved.reshape(len(moved), -1)).max(axis=1) / levels
    scale = np.where(scale == 0, 1.0, scale).reshape((-1,) + (1,) * (moved.ndim - 1))
    return np.moveaxis(np.clip(np.round(moved / scale), -levels, levels) * scale, 0, axis).astype(weights.dtype)


def round_fp16(weights: np.ndarray) -> np.ndarray:
    return weights.astype(np.float16).astype(weights.dtype)


def simulate(model: StaticModel, mode: str, out_dir: Path) -> QuantizedModel:
    """`mode` is "int8-weight", "int16-weight" or "fp16": a copy of `model` with its weights rounded."""
    import paddle

    start = time.monotonic()
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    changed = 0
    with paddle.static.scope_guard(scope):
        program, feed_names, fetch_vars = paddle.static.load_inference_model(str(model.model_file.with_suffix("")), exe)
        block = program.global_block()
        seen = set()
        for op in block.ops:
            if op.type not in WEIGHT_OPS:
                continue
            slot, axis = WEIGHT_OPS[op.type]
            for name in op.input(slot):
                var = block.vars.get(name)
                if var is None or not var.persistable or name in seen:
                    continue
                seen.add(name)
                tensor = scope.find_var(name).get_tensor()
                weights = np.array(tensor)
                if mode == "fp16":
                    rounded = round_fp16(weights)
                else:
                    rounded = fake_quant(weights, 8 if mode == "int8-weight" else 16, axis if weights.ndim > 1 else 0)
                tensor.set(rounded, paddle.CPUPlace())
                changed += 1
        out_dir.mkdir(parents=True, exist_ok=True)
        paddle.static.save_inference_model(str(out_dir / "model"), [block.var(n) for n in feed_names], fetch_vars, exe,
                                           program=program)
    info_file = out_dir / "model.pdiparams.info"
    if info_file.exists():
        info_file.unlink()
    parsed = prog.parse_program(out_dir / "model.pdmodel")
    simulated = StaticModel(out_dir / "model.pdmodel", out_dir / "model.pdiparams", model.feeds, model.fetches,
                            f"simulated-{mode}", prog.op_types(parsed), model.sources)
    return QuantizedModel(simulated, f"{mode} (host simulation, {changed} weight tensors)", 0, time.monotonic() - start)
