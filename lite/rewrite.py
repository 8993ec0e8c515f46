"""Program rewrites that let opt 2.13rc0 convert models it would otherwise crash on.

opt segfaults on Paddle 2.6 exports containing `flatten_contiguous_range` for
x86 (docs/toolchain.md: Lite's op expects an `XShape` output that Paddle 2.6 no longer
writes). `reshape2` with shape `[0]*start + [-1] + [0]*(ndim-stop-1)` computes
the same tensor, so the x86 twin is built from a program where every flatten is
replaced by that reshape. The rewrite is checked numerically before use.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from edgekit.artifacts import StaticModel
from edgekit.errors import ConversionError
from edgekit.export import program as prog
from edgekit.export.runner import StaticRunner
from edgekit.parity import differences, worst_max_abs

REWRITE_MAX_ABS = 1e-6


def flatten_to_reshape(model: StaticModel, out_dir: Path, samples: dict[str, np.ndarray]) -> tuple[StaticModel, dict | None]:
    program = prog.parse_program(model.model_file)
    replaced = 0
    for block in program.blocks:
        index = 0
        while index < len(block.ops):
            op = block.ops[index]
            if op.type != "flatten_contiguous_range":
                index += 1
                continue
            x_name, out_name = op.input("X")[0], op.output("Out")[0]
            x_var = block.var(x_name)
            ndim = len(x_var.shape)
            start, stop = op.attr("start_axis"), op.attr("stop_axis")
            start, stop = start % ndim if ndim else 0, stop % ndim if ndim else 0
            shape = [0] * start + [-1] + [0] * (ndim - stop - 1)
            xshape = block.create_var(name=f"{out_name}.edgekit_xshape", shape=[0, *x_var.shape], dtype=x_var.dtype,
                                      stop_gradient=True)
            block._insert_op(index, type="reshape2", inputs={"X": [x_var]},
                             outputs={"Out": [block.var(out_name)], "XShape": [xshape]}, attrs={"shape": shape})
            block._remove_op(index + 1)
            replaced += 1
            index += 1
    if not replaced:
        return model, None
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "model.pdmodel"
    target.write_bytes(program.desc.serialize_to_string())
    shutil.copyfile(model.params_file, out_dir / "model.pdiparams")
    rewritten = StaticModel(target, out_dir / "model.pdiparams", model.feeds, model.fetches, model.origin,
                            prog.op_types(program), model.sources, model.check)
    before = StaticRunner(model).run(samples)
    after = StaticRunner(rewritten).run(samples)
    worst = worst_max_abs(differences(before, after, model.fetches))
    if not np.isfinite(worst) or worst > REWRITE_MAX_ABS:
        raise ConversionError(f"the flatten->reshape2 rewrite changed the outputs by {worst:.3g}",
                              "report the model with this message: the x86 twin cannot be built safely")
    return rewritten, {"rewrite": "flatten_contiguous_range -> reshape2", "ops": replaced, "max_abs": worst,
                       "reason": "paddle_lite_opt 2.13rc0 crashes on flatten_contiguous_range for x86"}
