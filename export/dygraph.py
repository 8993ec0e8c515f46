"""Export a dynamic-graph model (`package.module:factory`) to a legacy static program."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.model.artifacts import StaticModel
from edgekit.contracts.settings import InputSpec, ModelConfig
from edgekit.core.errors import ExportError, InputModelError, ParityError
from edgekit.model.parity import check_same
from edgekit.core.imports import import_callable

from . import program as prog
from .runner import StaticRunner
from edgekit.model.passes import TOLERANCES, judge

log = logging.getLogger(__name__)



def _last_line(exc: BaseException) -> str:
    """Paddle wraps errors in 'In transformed code:' frames; the real reason is the last line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1][:240] if lines else ""


def load_factory(spec: str):
    return import_callable(spec, "model factory", "name a function or class that returns a paddle.nn.Layer", InputModelError)


def build_layer(cfg: ModelConfig):
    import paddle

    factory = load_factory(cfg.factory)
    try:
        layer = factory()
    except Exception as exc:  # user code: any failure is theirs to see, in one line
        raise InputModelError(f"calling {cfg.factory}() failed: {type(exc).__name__}: {_last_line(exc)}",
                              "the factory is called with no arguments and must return the model") from exc
    if not isinstance(layer, paddle.nn.Layer):
        raise InputModelError(f"{cfg.factory} returned {type(layer).__name__}, not a paddle.nn.Layer",
                              "make the factory return the model instance")
    if cfg.weights is not None:
        if not cfg.weights.is_file():
            raise InputModelError(f"weights file {cfg.weights} does not exist", "check the --weights path")
        try:
            state = paddle.load(str(cfg.weights))
        except Exception as exc:
            raise InputModelError(f"cannot read weights {cfg.weights} ({type(exc).__name__})", "pass a .pdparams written by paddle.save") from exc
        if not isinstance(state, dict):
            raise InputModelError(f"weights {cfg.weights} hold no state dict", "save model.state_dict() with paddle.save")
        expected = layer.state_dict()
        missing = sorted(set(expected) - set(state))
        unexpected = sorted(set(state) - set(expected))
        if missing or unexpected:
            raise InputModelError(
                f"weights {cfg.weights} do not fit {cfg.factory}: missing {missing[:3]}, unexpected {unexpected[:3]}",
                "load the weights saved from this model class")
        bad = [k for k in expected if tuple(expected[k].shape) != tuple(state[k].shape)]
        if bad:
            raise InputModelError(f"weights {cfg.weights}: shape mismatch for {bad[:3]}", "load the weights saved from this model class")
        layer.set_state_dict(state)
    layer.eval()
    return layer


def _user_frame(callstack: list[str]) -> str:
    """The innermost frame of the op's creation stack that is not Paddle's own code."""
    frames = [line.strip() for line in callstack if line.strip().startswith("File ")]
    pairs = list(zip(callstack, callstack[1:]))
    for line, code in reversed(pairs):
        text = line.strip()
        if text.startswith("File ") and "site-packages/paddle" not in text and "/paddle/" not in text and "dy2static" not in text:
            where = text.replace("File ", "").replace('"', "")
            return f"{where}: {code.strip()}"
    return frames[-1] if frames else ""


def _sources(program) -> dict:
    """Map each op's output variable to the user source line that created the op."""
    found = {}
    for block in program.blocks:
        for op in block.ops:
            if not op.has_attr("op_callstack"):
                continue
            where = _user_frame(list(op.attr("op_callstack")))
            if where:
                for name in op.output_arg_names:
                    found[name] = {"op": op.type, "source": where}
    return found


def export_dygraph(cfg: ModelConfig, out_dir: Path, samples: Mapping[str, np.ndarray]) -> StaticModel:
    """Build the factory's model and export it (see `export_layer`)."""
    import paddle

    paddle.disable_static()
    return export_layer(build_layer(cfg), cfg.inputs, out_dir, samples, cfg.factory or "the model")


def export_layer(layer, inputs: Sequence[InputSpec], out_dir: Path, samples: Mapping[str, np.ndarray],
                 what: str = "the model") -> StaticModel:
    """to_static + jit.save of an in-memory layer, then check the saved program against it on `samples`.

    The one export path: factory models and pruned (in-memory) models both come here.
    """
    import paddle
    from paddle.static import InputSpec as PaddleSpec

    paddle.disable_static()
    layer.eval()
    specs = [PaddleSpec(list(i.shape), i.dtype, i.name) for i in inputs]
    prefix = out_dir / "model"
    own_forward = layer.__dict__.get("forward")
    try:
        # unique_name.guard: variable names (conv2d_0.w_0 ...) do not depend on what ran before,
        # so the same model always exports to the same bytes
        with paddle.utils.unique_name.guard():
            static_layer = paddle.jit.to_static(layer, input_spec=specs, full_graph=True)
            paddle.jit.save(static_layer, str(prefix))
            sources = _sources(static_layer.forward.concrete_program.main_program)
    except Exception as exc:
        raise ExportError(f"paddle.jit.to_static failed for {what}: {type(exc).__name__}: {_last_line(exc)}",
                          "make forward() traceable (no Python-side data-dependent control flow; a pruned layer must "
                          "read channel counts from its weights) or export it yourself and pass the .pdmodel") from exc
    finally:
        # to_static replaces layer.forward in place; callers may go on using the layer as a dynamic model
        if own_forward is None:
            layer.__dict__.pop("forward", None)
        else:
            layer.__dict__["forward"] = own_forward
    for extra in out_dir.glob("model.pdiparams.info"):
        extra.unlink()
    with paddle.no_grad():
        dyn = layer(*[paddle.to_tensor(samples[i.name]) for i in inputs])
    dyn_outs = [t.numpy() for t in (dyn if isinstance(dyn, (list, tuple)) else [dyn])]
    program = prog.parse_program(prefix.with_suffix(".pdmodel"))
    feeds, fetches = prog.feeds_and_fetches(program)
    if [f[0] for f in feeds] != [i.name for i in inputs]:
        raise ExportError(f"exported feeds {[f[0] for f in feeds]} differ from the input specs {[i.name for i in inputs]}",
                          "name the InputSpecs after forward()'s arguments, in order")
    model = StaticModel(prefix.with_suffix(".pdmodel"), prefix.with_suffix(".pdiparams"), tuple(inputs), tuple(fetches),
                        "dygraph", prog.op_types(program), sources)
    for index, out in enumerate(dyn_outs):
        if not np.isfinite(out).all():
            raise ExportError(f"the model's output {index} contains NaN or Inf on the export-check inputs",
                              "check the weights and the model's numerics (log/sqrt/div of invalid values) in Paddle first")
    static_outs = StaticRunner(model).run(samples)
    paddle.disable_static()     # StaticRunner switched to static mode; callers continue in dygraph
    if len(dyn_outs) != len(static_outs):
        raise ExportError(f"the dynamic model returns {len(dyn_outs)} outputs, the exported program {len(static_outs)}",
                          "return a tensor or a flat tuple of tensors from forward()")
    try:
        found = check_same(dyn_outs, static_outs, [f"output {i}" for i in range(len(dyn_outs))],
                           TOLERANCES["export"], f"exported {what} vs dynamic model")
    except ParityError as exc:
        raise ExportError(f"the exported {what} does not match the dynamic model: {exc.message}",
                          "return the same tensors from forward() in eval mode as when traced") from exc
    judge(model, "export", found, error=ExportError, hint="check for layers that behave differently in eval mode or when traced")
    worst = found.worst_max_abs
    count = int(len(next(iter(samples.values()))))
    log.info("export check (%s): static vs dynamic max abs %.3g on %d samples", what, worst, count)
    return StaticModel(model.model_file, model.params_file, model.feeds, model.fetches, "dygraph", model.op_types, sources,
                       {"engine": "paddle.static.Executor vs dynamic graph", "max_abs": worst, "samples": count})
