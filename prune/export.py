"""Export a pruned in-memory layer exactly as `edgekit.export` exports a factory model.

`export.export_dygraph` builds its layer from the factory; a pruned model exists only
in memory (the factory builds the unpruned architecture), so this takes the layer.
Integration note: fold this into `export/dygraph.py` as `export_layer(layer, ...)`,
with `export_dygraph` calling it, so there is one export path and one check.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.artifacts import StaticModel
from edgekit.config import InputSpec
from edgekit.errors import ExportError

log = logging.getLogger(__name__)

EXPORT_MAX_ABS = 1e-4    # the same gate as edgekit.export.dygraph


def export_layer(layer, inputs: Sequence[InputSpec], out_dir: Path, samples: Mapping[str, np.ndarray],
                 what: str = "the pruned model") -> StaticModel:
    import paddle
    from paddle.static import InputSpec as PaddleSpec

    from edgekit.export import StaticRunner
    from edgekit.export import program as prog

    paddle.disable_static()
    layer.eval()
    prefix = out_dir / "model"
    specs = [PaddleSpec(list(i.shape), i.dtype, i.name) for i in inputs]
    own_forward = layer.__dict__.get("forward")
    try:
        with paddle.utils.unique_name.guard():
            static_layer = paddle.jit.to_static(layer, input_spec=specs, full_graph=True)
            paddle.jit.save(static_layer, str(prefix))
    except Exception as exc:
        last = next((line.strip() for line in reversed(str(exc).splitlines()) if line.strip()), "")[:240]
        raise ExportError(f"paddle.jit.to_static failed for {what}: {type(exc).__name__}: {last}",
                          "make forward() traceable; a layer that reads its configured channel count (not the weight's "
                          "shape) cannot be pruned") from exc
    finally:
        # to_static replaces layer.forward in place; the layer goes on as a dynamic model (pruned, fine-tuned)
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
    _, fetches = prog.feeds_and_fetches(program)
    model = StaticModel(prefix.with_suffix(".pdmodel"), prefix.with_suffix(".pdiparams"), tuple(inputs), tuple(fetches),
                        "dygraph", prog.op_types(program))
    static_outs = StaticRunner(model).run(dict(samples))
    paddle.disable_static()     # StaticRunner switched to static mode; the caller continues in dygraph
    worst = max(float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0 for a, b in zip(dyn_outs, static_outs))
    if len(dyn_outs) != len(static_outs) or not np.isfinite(worst) or worst > EXPORT_MAX_ABS:
        raise ExportError(f"the exported {what} differs from the dynamic model by {worst:.3g} (limit {EXPORT_MAX_ABS:g})",
                          "check for layers that behave differently in eval mode or when traced")
    log.info("export check (%s): static vs dynamic max abs %.3g", what, worst)
    return StaticModel(model.model_file, model.params_file, model.feeds, model.fetches, "dygraph", model.op_types, {},
                       {"engine": "paddle.static.Executor vs dynamic graph", "max_abs": worst,
                        "samples": int(len(next(iter(samples.values()))))})
