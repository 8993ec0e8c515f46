"""The host reference engine: `paddle.static.Executor` on the saved program.

Paddle Inference's default CPU passes gave a wrong answer on a real model
(docs/toolchain.md), so the reference is the plain static executor, checked against the
dynamic model at export and, for models given already exported, against Paddle
Inference with IR optimisation switched off (two independent engines agreeing).
"""

from __future__ import annotations

import logging
from typing import Mapping

import numpy as np

from edgekit.model.artifacts import StaticModel
from edgekit.core.errors import InputModelError
from edgekit.model.runners import run_batched, sample_count

log = logging.getLogger(__name__)


MAX_BATCH = 32


def batch_limit(model: StaticModel, inputs: Mapping[str, np.ndarray] | None = None, program=None) -> int:
    """Samples per run: a fixed batch dimension's size; else up to MAX_BATCH, as many as the memory rule lets the
    program's per-sample activations take at the sizes of `inputs` (edgekit/core/memory.py; PP-OCRv5 det at
    960x960 needs ~70 MB a sample by the program, 50 MB measured). `program`: the loaded program, else it is read."""
    if model.fixed_batch is not None:
        return model.fixed_batch
    if not inputs:
        return MAX_BATCH
    from edgekit.core import memory
    from edgekit.export import program as prog
    from edgekit.export.footprint import footprint

    shapes = {name: np.shape(value)[1:] for name, value in inputs.items()}
    per_sample = footprint(program if program is not None else prog.parse_program(model.model_file), shapes).live
    batch = memory.fitting_batch(MAX_BATCH, per_sample, memory.available_bytes())
    if batch < min(MAX_BATCH, sample_count(inputs)):
        log.info("running %s in batches of %d, not %d: ~%s a sample, %s available", model.model_file.name, batch,
                 MAX_BATCH, memory.describe_bytes(per_sample), memory.describe_bytes(memory.available_bytes() or 0))
    return batch


class Batches:
    """`batch_limit` for one loaded program, decided once per input size: a runner is fed the same sizes again and
    again (pruning's sensitivity trials), and each decision reads the program's footprint."""

    def __init__(self, model: StaticModel, program) -> None:
        self.model, self.program = model, program
        self._decided: dict[tuple, int] = {}

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> int:
        sizes = tuple((name, np.shape(value)[1:]) for name, value in sorted(inputs.items()))
        if sizes not in self._decided:
            self._decided[sizes] = batch_limit(self.model, inputs, self.program)
        return self._decided[sizes]


class StaticRunner:
    def __init__(self, model: StaticModel) -> None:
        import paddle

        paddle.enable_static()
        self._paddle = paddle
        self.model = model
        self.scope = paddle.static.Scope()
        self.exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(self.scope):
            try:
                self.program, self.feed_names, self.fetch_vars = self._load(paddle, model)
            except InputModelError:
                raise
            except Exception as exc:
                reason = next((line.strip() for line in reversed(str(exc).splitlines()) if line.strip()), "")[:200]
                raise InputModelError(f"cannot load {model.model_file} with its parameters ({type(exc).__name__}: {reason})",
                                      "check that the .pdmodel and .pdiparams were saved together") from exc
        self.batches = Batches(model, self.program)

    def _load(self, paddle, model: StaticModel):
        # every stage writes the canonical pair <prefix>.pdmodel + <prefix>.pdiparams
        return paddle.static.load_inference_model(str(model.model_file.with_suffix("")), self.exe)

    def run(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        with self._paddle.static.scope_guard(self.scope):
            return run_batched(self._run_batch, inputs, self.batches(inputs))

    def _run_batch(self, batch: dict[str, np.ndarray]) -> list[np.ndarray]:
        res = self.exe.run(self.program, feed=batch, fetch_list=self.fetch_vars, return_numpy=True)
        return [np.array(r, copy=True) for r in res]


def run_paddle_inference(model: StaticModel, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """A second engine for cross-checking the reference: Paddle Inference without IR passes."""
    from paddle import inference

    config = inference.Config(str(model.model_file), str(model.params_file)) if model.params_file \
        else inference.Config(str(model.model_file.parent))
    config.disable_gpu()
    config.switch_ir_optim(False)
    config.disable_mkldnn()
    config.disable_glog_info()
    predictor = inference.create_predictor(config)

    def run_batch(batch: dict[str, np.ndarray]) -> list[np.ndarray]:
        for name in predictor.get_input_names():
            handle = predictor.get_input_handle(name)
            handle.reshape(batch[name].shape)
            handle.copy_from_cpu(np.ascontiguousarray(batch[name]))
        predictor.run()
        return [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]

    return run_batched(run_batch, inputs, batch_limit(model, inputs))
