"""Engines that run a model on named input arrays: one interface and one batching loop for all of them.

The FP32 reference (`paddle.static.Executor`), Paddle Inference, the dynamic graph,
the x86 twin on Paddle-Lite's x86 runtime and the ARM `.nb` under emulation all
take `{feed name: array with a leading sample dimension}` and return the model's
outputs in fetch order, concatenated over samples.
"""

from __future__ import annotations

from typing import Callable, Mapping, Protocol

import numpy as np

Inputs = Mapping[str, np.ndarray]


class Runner(Protocol):
    def run(self, inputs: Inputs) -> list[np.ndarray]:
        """Outputs for every sample of `inputs`, in fetch order."""


def sample_count(inputs: Inputs) -> int:
    return int(len(next(iter(inputs.values()))))


def run_batched(run_batch: Callable[[dict[str, np.ndarray]], list[np.ndarray]], inputs: Inputs,
                batch: int) -> list[np.ndarray]:
    """Run `run_batch` on slices of at most `batch` samples and concatenate each output over the slices."""
    total = sample_count(inputs)
    per = [run_batch({k: v[start:start + batch] for k, v in inputs.items()}) for start in range(0, total, batch)]
    return [np.concatenate([p[i] for p in per]) for i in range(len(per[0]))]
