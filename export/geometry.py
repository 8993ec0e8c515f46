"""PaddleDetection's geometry inputs, bound into the graph: `im_shape` and `scale_factor` become constants.

PaddleDetection exports its detectors (PP-PicoDet, PP-YOLOE, the PaddleX/PaddleOCR layout detectors) with two
inputs beside the image, both [N, 2] float32 per image: `im_shape`, the (height, width) of the resized image,
and `scale_factor`, the (y, x) factors of that resize. The graph's post-processing divides the boxes by
`scale_factor` and clips them to `im_shape / scale_factor`, so that its NMS rows come out in source-image pixels.

edgekit undoes the resize (or letterbox) itself, in the Python twin and in the C++ core alike, from
preprocess.json (`PreprocessSpec.to_image`): a PaddleDetection graph's own division cannot undo a centred
letterbox, and every app would have to compute and feed the two extra tensors the same way. So the build feeds
them as the tensor itself sees the image, `scale_factor = (1, 1)` and `im_shape = (H, W)` of the tensor: the
graph's boxes stay in model-input pixels, clipped to the tensor, as a single-input detector's are. `bind` then
writes those values into the program (`fill_constant_batch_size_like` from the image feed, which Lite runs on ARM
and x86, so the batch size stays free) and drops the two feeds: the `.nb`, its golden vectors, the apps and the
device suite see a single-input model. The rewrite is checked against the program as it was, fed the same values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.model.artifacts import StaticModel
from edgekit.contracts.settings import InputSpec
from edgekit.model.data import geometry_name, geometry_values
from edgekit.core.errors import ConversionError
from edgekit.model.parity import SameCheck
from edgekit.model.passes import PassResult

from . import program as prog



def bound_feeds(feeds: Sequence[InputSpec]) -> list[str]:
    """The feeds of `feeds` that are PaddleDetection geometry inputs: so named (`geometry_name`: in the program or in
    the ONNX model it was imported from), float32 [N, 2], beside one image input [N, C, H, W]; [] for any other
    signature (such a model keeps its inputs, fed from the data)."""
    names = [f.name for f in feeds if geometry_name(f.name)]
    images = [f for f in feeds if f.name not in names]
    if not names or len(images) != 1 or len(images[0].shape) != 4:
        return []
    if any(len(f.shape) != 2 or f.shape[1] != 2 or f.dtype != "float32" for f in feeds if f.name in names):
        return []
    return names


def tensor_size(shape: Sequence[int], layout: str) -> tuple[int, int]:
    """(H, W) of an image tensor's `shape` in `layout` ("NCHW" or "NHWC")."""
    return (int(shape[2]), int(shape[3])) if layout == "NCHW" else (int(shape[1]), int(shape[2]))


def check_fed(names: Sequence[str], samples: Mapping[str, np.ndarray], image: str, layout: str, what: str) -> dict:
    """The values the data feeds the geometry inputs `names`: each must be the tensor's own (`geometry_values`) for
    every sample; {name: value}, else a one-line refusal naming the value expected."""
    hw = tensor_size(samples[image].shape, layout)
    values = {}
    for n in names:
        want = geometry_values(n, hw)
        fed = np.asarray(samples[n], np.float32)
        if fed.shape != (len(samples[image]), 2) or not (fed == want).all():
            raise ConversionError(f"the {what} data feeds {n} values other than {want.tolist()} (the {layout} "
                                  f"tensor's own geometry)", f"leave {n} out of the data: edgekit feeds it as the "
                                  "tensor sees the image")
        values[n] = want
    return values


def bind(model: StaticModel, names: Sequence[str], out_dir: Path, samples: Mapping[str, np.ndarray],
         layout: str = "NCHW") -> PassResult[StaticModel]:
    """`model` with the geometry feeds `names` written in as the values `samples` feed them (`check_fed`), saved to
    `out_dir`; checked on `samples` against `model` (the pass manager judges the check). Returns the program, its
    check and the manifest's record."""
    (image,) = [f for f in model.feeds if f.name not in names]
    shape = samples[image.name].shape
    values = check_fed(names, samples, image.name, layout, "evaluation")
    with prog.editing(model.model_file) as (program, _, fetch_vars, _, exe):
        block = program.global_block()
        at = sum(1 for op in block.ops if op.type == "feed")          # after the feed ops, before any reader
        source = block.var(image.name)
        for n in names:
            at = _write_constant(block, at, source, block.var(n), values[n])
        parsed, feeds, fetches = prog.save_edited(program, exe, out_dir, [source], fetch_vars)
    if [f[0] for f in feeds] != [image.name]:
        raise ConversionError(f"binding {', '.join(names)} left the program with inputs {[f[0] for f in feeds]}",
                              "report the model with this message")
    bound = StaticModel(out_dir / "model.pdmodel", out_dir / "model.pdiparams", (image,), tuple(fetches),
                        model.origin, prog.op_types(parsed), model.sources, model.check)
    found = _check(model, bound, samples, image.name)
    # an imported ONNX model's inputs carry X2Paddle's prefix in the program (and the bundle); the source's own
    # names are what its user knows them by
    renamed = {n: geometry_name(n) for n in names if geometry_name(n) != n}
    return PassResult(bound, found, {
        "bound": {n: values[n].tolist() for n in names}, "image_input": image.name, "layout": layout,
        **({"source_names": renamed} if renamed else {}),
        "tensor_size": list(tensor_size(shape, layout)), "check": {"samples": int(shape[0]), "max_abs": found.worst_max_abs},
        "why": "boxes stay in model-input pixels; the bundle undoes the resize/letterbox from preprocess.json "
               "(PaddleDetection's scale_factor cannot undo a centred letterbox)"})


def _write_constant(block, at: int, source, target, value: np.ndarray) -> int:
    """Ops at `at` that fill `target` [N, 2] with `value` per image, N taken from `source`'s first dimension."""
    def fill(out, shape, number: float):
        block._insert_op(at_[0], type="fill_constant_batch_size_like", inputs={"Input": [source]},
                         outputs={"Out": [out]},
                         attrs={"shape": shape, "value": float(number), "str_value": "", "dtype": int(target.dtype),
                                "input_dim_idx": 0, "output_dim_idx": 0, "force_cpu": False})
        at_[0] += 1

    at_ = [at]
    if value[0] == value[1]:
        fill(target, [-1, 2], value[0])
        return at_[0]
    parts = []
    for k, number in enumerate(value):
        part = block.create_var(name=f"{target.name}.edgekit_bound_{k}", shape=[-1, 1], dtype=target.dtype)
        fill(part, [-1, 1], number)
        parts.append(part)
    block._insert_op(at_[0], type="concat", inputs={"X": parts}, outputs={"Out": [target]}, attrs={"axis": 1})
    return at_[0] + 1


def _check(model: StaticModel, bound: StaticModel, samples: Mapping[str, np.ndarray], image: str) -> SameCheck:
    from edgekit.export.runner import StaticRunner
    from edgekit.model.parity import check_same
    from edgekit.model.passes import TOLERANCES

    before = StaticRunner(model).run(dict(samples))
    after = StaticRunner(bound).run({image: samples[image]})
    return check_same(before, after, model.fetches, TOLERANCES["geometry"], "the geometry inputs bound into the graph")
