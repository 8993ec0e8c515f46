"""paddle2onnx's `multiclass_nms3` in an ONNX model, written back as a Paddle `multiclass_nms3` op.

paddle2onnx exports PaddleDetection's `multiclass_nms3` as ONNX `NonMaxSuppression` and a tail that gathers the
kept rows (class, score, x0, y0, x1, y1), keeps the best `keep_top_k` with `TopK` and counts them: two graph
outputs, rows [K, 6] and the count [N]. X2Paddle 1.6.0 cannot convert that tail (a Squeeze without axes, slices of
shapes known only at run time), and it maps `NonMaxSuppression` alone to a `multiclass_nms3` with other attributes
(unnormalised boxes, a per-class cap) that returns indices. So the import

1. recognises the pattern (`find`): one NonMaxSuppression whose boxes [N, M, 4] are the boxes the rows are gathered
   from and whose scores are [N, C, M]; the graph's outputs are the rows (float) and the count (integer), both
   computed from it; its thresholds, `max_output_boxes_per_class` (paddle2onnx writes nms_top_k there) and the
   TopK cap (keep_top_k) are constants. Anything else (background classes filtered, boxes widened by 1 for
   unnormalised IoU, a second NMS) is left to X2Paddle as it is;
2. gives X2Paddle the network up to the op's inputs (`network`), checked against ONNX Runtime like any import;
3. writes the op into the converted program (`append`) with those attributes (`normalized`, the IoU
   NonMaxSuppression computes; no background class), fetching its rows and counts in the ONNX outputs' place;
4. checks the rows against ONNX Runtime on the whole source, image by image and in any order (`rows_check`): Paddle
   lists an image's rows class by class, paddle2onnx's tail by score.

From then on the program is what PaddleDetection's own export is, and the build keeps or cuts the op by the same
measurement as for a Paddle program (lite/nms.py). The manifest's `onnx_import.nms` records the op, its attributes,
the ONNX tensors it reads and the rows check.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.core.errors import InputModelError
from edgekit.model.artifacts import StaticModel
from edgekit.model.passes import TOLERANCES

from . import program as prog
from .legalize import constant_values

OP = "multiclass_nms3"
HINT = "check the model in ONNX Runtime; or export it without NMS (boxes and scores as outputs)"


@dataclass(frozen=True)
class Lift:
    """paddle2onnx's NMS pattern in an ONNX graph: what the Paddle op reads, what it replaces and its attributes."""

    node: str                    # the NonMaxSuppression node
    boxes: str                   # its boxes input [N, M, 4]
    scores: str                  # its scores input [N, C, M]
    rows: str                    # the graph output holding the rows [K, 6]
    count: str                   # the graph output holding the count per image
    attrs: Mapping[str, float | int | bool]

    def to_json(self) -> dict:
        return {"op": OP, "from": f"ONNX NonMaxSuppression {self.node!r} and paddle2onnx's row-gathering tail",
                "reads": {"boxes": self.boxes, "scores": self.scores}, "outputs": {"rows": self.rows, "count": self.count},
                "attrs": dict(self.attrs)}


def find(model) -> Lift | None:
    """The pattern in `model` (an onnx.ModelProto), or None when the graph does not hold exactly it."""
    import onnx

    graph = model.graph
    nms = [n for n in graph.node if n.op_type == "NonMaxSuppression"]
    if len(nms) != 1 or len(nms[0].input) < 5 or len(graph.output) != 2:
        return None
    node = nms[0]
    consts = constant_values(model)
    thresholds = [consts.get(name) for name in node.input[2:5]]
    if any(v is None or np.size(v) != 1 for v in thresholds):
        return None
    tail = _downstream(graph, node)
    if any(n.op_type in ("NonZero", "NonMaxSuppression") for n in tail):
        return None                         # background classes filtered out (background_label >= 0), or a second NMS
    if not any(n.op_type == "Gather" and n.input[0] == node.input[0] for n in tail):
        return None                         # the rows come from other boxes (widened by 1: unnormalised IoU)
    produced = {o for n in tail for o in n.output}
    kinds = _elem_types(model)
    outputs = [o.name for o in graph.output]
    if not all(o in produced for o in outputs):
        return None
    floats = [o for o in outputs if kinds.get(o) == onnx.TensorProto.FLOAT]
    ints = [o for o in outputs if kinds.get(o) in (onnx.TensorProto.INT32, onnx.TensorProto.INT64)]
    if len(floats) != 1 or len(ints) != 1:
        return None
    keep_top_k = _cap(tail, consts)
    if keep_top_k is None:
        return None
    top_k, iou, score = (v.reshape(-1)[0] for v in thresholds)
    attrs = {"score_threshold": float(repr(np.float32(score))), "nms_top_k": int(top_k),
             "nms_threshold": float(repr(np.float32(iou))), "keep_top_k": keep_top_k, "normalized": True,
             "nms_eta": 1.0, "background_label": -1}
    return Lift(node.name, node.input[0], node.input[1], floats[0], ints[0], attrs)


def _downstream(graph, start) -> list:
    """The nodes computed from `start`'s outputs, `start` excluded, in graph order."""
    reached, queue = set(start.output), deque(start.output)
    readers: dict[str, list] = {}
    for n in graph.node:
        for name in n.input:
            readers.setdefault(name, []).append(n)
    found = set()
    while queue:
        for n in readers.get(queue.popleft(), []):
            if id(n) in found:
                continue
            found.add(id(n))
            for out in n.output:
                if out not in reached:
                    reached.add(out)
                    queue.append(out)
    return [n for n in graph.node if id(n) in found]


def _cap(tail, consts) -> int | None:
    """keep_top_k: -1 without a TopK after the NMS; the constant in TopK's k = ReduceMin(Concat(count, cap)); None
    for any other k."""
    top = [n for n in tail if n.op_type == "TopK"]
    if not top:
        return -1
    if len(top) != 1:
        return None
    by_output = {o: n for n in tail for o in n.output}
    reduce = by_output.get(top[0].input[1])
    concat = by_output.get(reduce.input[0]) if reduce is not None and reduce.op_type == "ReduceMin" else None
    if concat is None or concat.op_type != "Concat":
        return None
    caps = [consts[name] for name in concat.input if name in consts]
    return int(np.asarray(caps[0]).reshape(-1)[0]) if len(caps) == 1 and np.size(caps[0]) == 1 else None


def _elem_types(model) -> dict[str, int]:
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:      # onnx's shape inference raises its own InferenceError types; the declared outputs remain
        inferred = model
    return {vi.name: vi.type.tensor_type.elem_type for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}


def network(model, lift: Lift):
    """`model` up to the NMS op's inputs: the graph's outputs are the boxes and the scores it reads."""
    import onnx

    from . import onnxrt

    inputs = [vi.name for vi in model.graph.input if vi.name not in {i.name for i in model.graph.initializer}]
    with onnxrt.answers(f"onnx cannot cut the graph at the inputs of its NMS ({lift.boxes}, {lift.scores})", HINT):
        return onnx.utils.Extractor(model).extract_model(inputs, [lift.boxes, lift.scores])


def append(model: StaticModel, lift: Lift, out_dir: Path) -> StaticModel:
    """`model` (X2Paddle's conversion of `network`: it fetches the boxes and the scores) with the Paddle op written
    after them, saved to `out_dir`: it fetches the op's rows and counts."""
    import paddle
    from paddle.base.layer_helper import LayerHelper

    with prog.editing(model.model_file) as (program, feed_names, fetch_vars, _, exe):
        block = program.global_block()
        boxes, scores = fetch_vars
        with paddle.static.program_guard(program), paddle.utils.unique_name.guard("edgekit_nms_"):
            helper = LayerHelper(OP)
            rows = helper.create_variable_for_type_inference(dtype=boxes.dtype)
            index = helper.create_variable_for_type_inference(dtype="int32")
            count = helper.create_variable_for_type_inference(dtype="int32")
            block.append_op(type=OP, inputs={"BBoxes": [boxes], "Scores": [scores]},
                            outputs={"Out": [rows], "Index": [index], "NmsRoisNum": [count]}, attrs=dict(lift.attrs))
        parsed, _, fetches = prog.save_edited(program, exe, out_dir, [block.var(n) for n in feed_names], [rows, count])
    return StaticModel(out_dir / "model.pdmodel", out_dir / "model.pdiparams", model.feeds, tuple(fetches), model.origin,
                       prog.op_types(parsed), model.sources, model.check)


def canonical(rows: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """One [k, 6] array per image, its rows sorted by class, then score (best first), then box."""
    from edgekit.lite.nms import split_rows

    return [r[np.lexsort((r[:, 5], r[:, 4], r[:, 3], r[:, 2], -r[:, 1], r[:, 0]))] if len(r) else r
            for r in split_rows(rows, counts)]


def rows_check(source, model: StaticModel, lift: Lift, feed_map: Mapping[str, str],
               draws: Sequence[Mapping[str, np.ndarray]], source_name: str) -> dict:
    """The Paddle op's rows against ONNX Runtime's on the whole source (`source`, an onnx.ModelProto), one image at a
    time, order-free; raises InputModelError when they differ (same count and classes per image, values within
    TOLERANCES["nms"])."""
    from edgekit.export.runner import StaticRunner
    from edgekit.lite.nms import rows_agree

    from . import onnxrt

    images = [{k: v[i:i + 1] for k, v in draw.items()} for draw in draws for i in range(len(next(iter(draw.values()))))]
    onnx_rows, paddle_rows = [], []
    with onnxrt.answers(f"ONNX Runtime cannot run {source_name} with its NMS on the probe inputs", HINT):
        session = onnxrt.session(source.SerializeToString())
        names = [o.name for o in session.get_outputs()]
        for one in images:
            found = dict(zip(names, session.run(None, one)))
            onnx_rows += canonical(found[lift.rows], found[lift.count])
    runner = StaticRunner(model)
    for one in images:
        paddle_rows += canonical(*runner.run({feed_map[k]: v for k, v in one.items() if k in feed_map}))
    agreed = rows_agree(onnx_rows, paddle_rows, TOLERANCES["nms"].max_abs)
    if not agreed["agree"]:
        raise InputModelError(f"the {OP} op written for {source_name}'s NonMaxSuppression gives other rows than ONNX "
                              f"Runtime: {agreed['reason']}", "report the model with this line; export it from Paddle "
                              "directly, or without NMS (boxes and scores as outputs)")
    return dict(agreed, engine="paddle.static.Executor vs ONNX Runtime on the whole source, rows in any order per image")



def at_op_inputs(source, recorded: Mapping, static: StaticModel, inputs: Mapping[str, np.ndarray],
                 onnx_inputs: Mapping[str, np.ndarray], batch: int, work: Path) -> tuple[list, list, list[str]]:
    """For the import's judgement on the build's data: ONNX Runtime on the source (`source`, an onnx.ModelProto) up
    to the NMS op's inputs (the import's `nms` record, `recorded`), fed `onnx_inputs` in batches of `batch`, and the
    program's values there, fed `inputs` (`static`, the program after the optimise passes: a kept op's inputs
    fetched from a cut of it, a cut program's own outputs), both as a cut program fetches them: boxes [N, M, 4] and
    scores [N, M, C]. Returns (ONNX Runtime's, the program's, their names)."""
    from edgekit.export.runner import StaticRunner
    from edgekit.lite.nms import cut, find_nms
    from edgekit.model.runners import run_batched

    from . import onnxrt

    reads = recorded["reads"]
    with onnxrt.answers("ONNX Runtime cannot run the model up to its NMS op's inputs on the evaluation data", HINT):
        session = onnxrt.session(network(source, Lift("", reads["boxes"], reads["scores"], "", "", {})).SerializeToString())
        boxes, scores = run_batched(lambda chunk: [np.asarray(o) for o in session.run(None, chunk)], dict(onnx_inputs),
                                    batch)
    ops = find_nms(static)
    program = cut(static, ops[0], work) if ops else static
    return [boxes, np.transpose(scores, (0, 2, 1))], StaticRunner(program).run(dict(inputs)), [reads["boxes"], reads["scores"]]
