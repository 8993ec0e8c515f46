"""Take in an already exported inference model (any layout opt accepts)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np

from edgekit.model.artifacts import StaticModel
from edgekit.contracts.settings import InputSpec, ModelConfig
from edgekit.core.errors import InputModelError, ParityError
from edgekit.model.parity import check_same

from . import legacy3
from . import program as prog
from .runner import StaticRunner, run_paddle_inference
from edgekit.model.passes import TOLERANCES, PassResult

log = logging.getLogger(__name__)



def merge_specs(found: list[tuple[str, tuple[int, ...], str]], given: tuple[InputSpec, ...]) -> tuple[InputSpec, ...]:
    """The program's own feeds, with dynamic dims filled from user specs; mismatches are errors."""
    names = [n for n, _, _ in found]
    by_name = {g.name: g for g in given}
    unknown = [n for n in by_name if n not in names]
    if unknown:
        raise InputModelError(f"input(s) {', '.join(unknown)} not in the model; its inputs are {', '.join(names)}",
                              "use the model's input names in --input")
    specs = []
    for name, shape, dtype in found:
        spec = by_name.get(name)
        if spec is None:
            specs.append(InputSpec(name, shape, dtype))
            continue
        if len(spec.shape) != len(shape) or any(s != -1 and g != -1 and s != g for s, g in zip(shape, spec.shape)):
            raise InputModelError(f"input {name!r} has shape {list(shape)} in the model, but {list(spec.shape)} was given",
                                  "give a shape with the same rank and the model's fixed sizes")
        specs.append(InputSpec(name, tuple(g if s == -1 else s for s, g in zip(shape, spec.shape)), dtype))
    return tuple(specs)


def load_inference(cfg: ModelConfig, out_dir: Path) -> StaticModel:
    """Copy/normalise the model into `out_dir/model.pdmodel` + `model.pdiparams`."""
    model_file, params_file, separate = prog.locate(cfg.model_file, cfg.params_file)
    program = prog.parse_program(model_file)   # readable at all?
    written_by = legacy3.program_version(model_file.read_bytes())
    target = out_dir / "model"
    if separate:
        import paddle

        paddle.enable_static()
        exe = paddle.static.Executor(paddle.CPUPlace())
        scope = paddle.static.Scope()
        with paddle.static.scope_guard(scope):
            try:
                # naming model_filename selects Paddle's legacy folder loader (one file per parameter)
                loaded, feed_names, fetch_vars = paddle.static.load_inference_model(
                    str(model_file.parent), exe, model_filename=model_file.name, params_filename=None)
            except Exception as exc:
                raise InputModelError(f"cannot load {model_file.parent} ({type(exc).__name__})",
                                      "check that every parameter file saved with the model is there") from exc
            block = loaded.global_block()
            paddle.static.save_inference_model(str(target), [block.var(n) for n in feed_names], fetch_vars, exe, program=loaded)
        program = prog.parse_program(target.with_suffix(".pdmodel"))
    else:
        shutil.copyfile(model_file, target.with_suffix(".pdmodel"))
        if params_file is not None:
            shutil.copyfile(params_file, target.with_suffix(".pdiparams"))
        else:
            target.with_suffix(".pdiparams").write_bytes(b"")
    dropped = legacy3.drop_unknown_slots(target.with_suffix(".pdmodel"), written_by)
    if dropped:
        program = prog.parse_program(target.with_suffix(".pdmodel"))
    feeds, fetches = prog.feeds_and_fetches(program)
    if not feeds or not fetches:
        raise InputModelError(f"{model_file} has no feed or fetch ops", "save it with paddle.jit.save or save_inference_model")
    check = {"written_by_program_version": written_by, "slots_dropped": dropped} if dropped else {}
    return StaticModel(target.with_suffix(".pdmodel"), target.with_suffix(".pdiparams"), merge_specs(feeds, cfg.inputs),
                       tuple(fetches), "inference", prog.op_types(program), check=check)


ENGINE_REFUSAL = (InputModelError, "the reference cannot be trusted: report the model; try re-exporting it with Paddle 2.6")


def cross_check(model: StaticModel, samples: dict[str, np.ndarray]) -> PassResult[StaticModel]:
    """Check the reference engine against a second one; disagreement means neither can be trusted (the pass
    manager refuses the model then: `ENGINE_REFUSAL`)."""
    ours = StaticRunner(model).run(samples)
    theirs = run_paddle_inference(model, samples)
    try:
        found = check_same(ours, theirs, model.fetches, TOLERANCES["engine"],
                           "paddle.static.Executor vs Paddle Inference")
    except ParityError as exc:
        raise InputModelError(f"the static executor and Paddle Inference disagree on this model: {exc.message}",
                              "the reference cannot be trusted: report the model; try re-exporting it with Paddle 2.6") from exc
    worst = found.worst_max_abs
    log.info("reference check: Executor vs Paddle Inference (no IR passes) max abs %.3g", worst)
    check = {**model.check, "engine": "paddle.static.Executor vs Paddle Inference (IR passes off)", "max_abs": worst,
             "samples": int(len(next(iter(samples.values()))))}
    return PassResult(StaticModel(model.model_file, model.params_file, model.feeds, model.fetches, model.origin,
                                  model.op_types, model.sources, check), found)
