"""Per-layer sensitivity in one pass: each layer's own INT8 error on the FP32 model's activations.

The `alone` and `all-but` methods score one quantised model per layer, each a run of the
evaluation set (an hour on a 100-layer detector at 800x608). `local` runs the FP32 program once
per sample with, beside every quantisable op, a copy of it that reads its input through the
activation threshold the calibration chose and its weight rounded per channel to int8 (what the
INT8 program does to that op), and compares the two outputs: the noise-to-signal power of that
op's output. Layers whose own output INT8 ruins rank first. It measures each layer on FP32 inputs,
so it says nothing about how errors add up; the fallback loop that follows judges every float list
on the whole model, as with the other methods.
"""

from __future__ import annotations

import logging
import math
from typing import Sequence

import numpy as np

from edgekit.core.errors import QuantizeError
from edgekit.model.artifacts import StaticModel
from edgekit.model.data import Samples, width_groups
from edgekit.model.parity import Score

from .ptq import QUANTIZABLE_OPS
from .sensitivity import LayerSensitivity, QuantLayer, rank

log = logging.getLogger(__name__)

BINS = 127                                     # int8, symmetric: what PaddleSlim's range_abs_max and weights use
AXIS1_OPS = ("conv2d_transpose", "mul", "matmul", "matmul_v2")   # weights quantised per column (PaddleSlim's utils)
SUFFIX = "@edgekit_local"


def thresholds(scales: dict) -> dict:
    """The table PaddleSlim's program takes its scales from for this algorithm (ptq.requantize_int8 reads the same)."""
    return scales["var_threshold"] if scales["algo"] in ("KL", "hist") else scales["threshold"]


def round_weight(weight: np.ndarray, axis: int) -> np.ndarray:
    """Per-channel abs-max int8 rounding of a weight along `axis`, back in float (as PaddleSlim's freeze does)."""
    moved = np.moveaxis(weight.astype(np.float64), axis, 0)
    scale = np.abs(moved.reshape(moved.shape[0], -1)).max(axis=1)
    scale = np.where(scale > 0, scale, 1.0).reshape((-1,) + (1,) * (moved.ndim - 1))
    rounded = np.clip(np.round(moved / scale * BINS), -BINS, BINS) * scale / BINS
    return np.moveaxis(rounded, 0, axis).astype(weight.dtype)


def analyse_local(model: StaticModel, layers: Sequence[QuantLayer], samples: Samples, scales: dict) -> tuple[LayerSensitivity, ...]:
    """Rank `layers` (quantizable_layers of `model`) by their own INT8 output error on `samples`; most sensitive first.
    A layer with no activation threshold (left float by the calibration) gets 0."""
    import paddle

    from edgekit.export import StaticRunner

    runner = StaticRunner(model)
    block = runner.program.global_block()
    ops = [op for op in block.ops if op.type in QUANTIZABLE_OPS]
    if [op.type for op in ops] != [layer.op_type for layer in layers]:
        raise QuantizeError("sensitivity_method local reads the program's main block only, and this model has "
                            "quantisable layers elsewhere (e.g. inside control flow)",
                            'use [quantize] sensitivity_method = "alone"')
    table = thresholds(scales)
    place = paddle.CPUPlace()
    probes: list[tuple[int, list]] = []
    with paddle.static.scope_guard(runner.scope), paddle.static.program_guard(runner.program):
        for index, op in enumerate(ops):
            renamed, usable = {}, True
            for name in dict.fromkeys(op.input_arg_names):
                var = block.var(name)
                if var.persistable:
                    weight = np.array(runner.scope.find_var(name).get_tensor())
                    copy = block.create_var(name=name + SUFFIX, shape=weight.shape, dtype=var.dtype, persistable=True)
                    runner.scope.var(copy.name).get_tensor().set(round_weight(weight, 1 if op.type in AXIS1_OPS else 0), place)
                    renamed[name] = copy.name
                elif name in table and float(table[name]) > 0:
                    limit = float(table[name])
                    rounded = paddle.round(paddle.clip(var, -limit, limit) * (BINS / limit)) * (limit / BINS)
                    renamed[name] = rounded.name
                else:
                    usable = False              # no scale: PaddleSlim leaves this op float
            if not usable:
                continue
            outputs = {slot: [block.create_var(name=n + SUFFIX, dtype=block.var(n).dtype).name for n in op.output(slot)]
                       for slot in op.output_names}
            block.append_op(type=op.type,
                            inputs={slot: [block.var(renamed.get(n, n)) for n in op.input(slot)] for slot in op.input_names},
                            outputs={slot: [block.var(n) for n in names] for slot, names in outputs.items()},
                            attrs={a: op.attr(a) for a in op.attr_names})
            exact, quantised = block.var(op.output_arg_names[0]), block.var(op.output_arg_names[0] + SUFFIX)
            noise = quantised - exact
            probes.append((index, [paddle.sum(noise * noise), paddle.sum(exact * exact), paddle.sum(exact * quantised),
                                   paddle.sum(quantised * quantised)]))
    fetch = [var for _, sums in probes for var in sums]
    totals = np.zeros((len(probes), 4))
    names = runner.feed_names
    for members, inputs in width_groups(samples):     # text lines at their group's width, as they are scored
        for i in range(len(members)):
            feed = {n: inputs[n][i:i + 1] for n in names}
            with paddle.static.scope_guard(runner.scope):
                values = runner.exe.run(runner.program, feed=feed, fetch_list=fetch, return_numpy=True)
            totals += np.array([float(np.asarray(v).reshape(-1)[0]) for v in values], dtype=np.float64).reshape(-1, 4)
    measured = {index: sums for (index, _), sums in zip(probes, totals)}
    out = []
    for index, layer in enumerate(layers):
        if index not in measured:
            out.append((layer, Score(1.0, math.inf), 0.0))
            continue
        noise, signal, dot, other = measured[index]
        ratio = noise / signal if signal > 0 else (0.0 if noise == 0 else math.inf)
        cosine = dot / math.sqrt(signal * other) if signal > 0 and other > 0 else (1.0 if noise == 0 else 0.0)
        snr = 10 * math.log10(signal / noise) if noise > 0 and signal > 0 else (math.inf if noise == 0 else -math.inf)
        out.append((layer, Score(cosine, snr), ratio))
        log.info("local %s (%s): noise/signal %.4g, cosine %.6f", layer.name, layer.op_type, ratio, cosine)
    return rank(out)


__all__ = ["analyse_local", "round_weight", "thresholds"]
