"""PaddleX 3 detectors' PIR ops (issue 30): `pd_op.multiclass_nms3`, `pd_op.matrix_nms` and `pd_op.full_like`
(`zeros_like` in PaddleDetection's box clipping), translated into the legacy ops Paddle 2.6's own export writes
(`multiclass_nms3` / `matrix_nms` with their attributes, `fill_any_like`), on a small described program in the form `_paddle3_child.py describe` gives (the
attributes as Paddle 3.3.1 describes them), run by Paddle 2.6's executor against the legacy op built directly.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgekit.export.pir_translate import UntranslatableOp, translate

pytestmark = pytest.mark.e2e     # real Paddle 2.6 (importing it starts a process): not the fast tier

NMS_ATTRS = {"background_label": -1, "keep_top_k": 100, "normalized": True, "nms_threshold": 0.5, "nms_top_k": 1000,
             "nms_eta": 1.0, "score_threshold": 0.05000000074505806}     # as Paddle 3.3.1 describes them
MATRIX_ATTRS = {"gaussian_sigma": 2.0, "post_threshold": 0.05000000074505806, "background_label": -1, "keep_top_k": 100,
                "normalized": True, "nms_top_k": 1000, "use_gaussian": False, "score_threshold": 0.05000000074505806}


def _out(vid, shape, dtype="float32", name="out"):
    return [name, vid, shape, dtype]


def nms_graph(attrs=NMS_ATTRS, rois_num=False, op="multiclass_nms3"):
    """boxes [N, M, 4], scores [N, C, M] -> boxes clipped below at zeros_like(boxes) -> multiclass_nms3 -> rows, count."""
    def data(name, shape, dtype="float32"):
        return {"op": "pd_op.data", "inputs": [], "outputs": [_out(name, shape, dtype)],
                "attrs": {"name": name, "shape": shape, "dtype": {"dtype": dtype}}}

    ops = [data("boxes", [-1, 5, 4]), data("scores", [-1, 2, 5])] + ([data("rois", [-1], "int32")] if rois_num else []) + [
        {"op": "pd_op.full", "inputs": [], "outputs": [_out("zero", [1])],
         "attrs": {"dtype": {"dtype": "float32"}, "value": 0.0, "shape": [1]}},
        {"op": "pd_op.full_like", "inputs": [["x", "boxes"], ["value", "zero"]], "outputs": [_out("zeros", [-1, 5, 4])],
         "attrs": {"dtype": {"dtype": "float32"}}},
        {"op": "pd_op.maximum", "inputs": [["x", "boxes"], ["y", "zeros"]], "outputs": [_out("clipped", [-1, 5, 4])],
         "attrs": {}},
        {"op": f"pd_op.{op}", "inputs": [["bboxes", "clipped"], ["scores", "scores"]] + (
            [["rois_num", "rois" if rois_num else None]] if op == "multiclass_nms3" else []),
         "outputs": [_out("rows", [-1, 6], name="out"), _out("index", [-1, 1], "int32", "index"),
                     _out("count", [-1], "int32", "nms_rois_num" if op == "multiclass_nms3" else "roisnum")],
         "attrs": dict(attrs)},
        {"op": "pd_op.fetch", "inputs": [["x", "rows"]], "outputs": [], "attrs": {"name": "fetch0"}},
        {"op": "pd_op.fetch", "inputs": [["x", "count"]], "outputs": [], "attrs": {"name": "fetch1"}},
    ]
    return {"schema": "edgekit.pir-graph/1", "paddle": "3.3.1", "feeds": [], "fetches": ["rows", "count"], "params": {},
            "ops": ops}


def write(tmp_path, graph):
    (tmp_path / "graph.json").write_text(json.dumps(graph), encoding="utf-8")
    np.savez(tmp_path / "params.npz")
    return tmp_path / "graph.json", tmp_path / "params.npz"


def scene():
    """Two images of five boxes: overlapping pairs of one class (NMS keeps the better), one box with a negative corner
    (the clip moves it), one below the score threshold."""
    boxes = np.float32([[[0, 0, 10, 10], [1, 1, 10, 10], [-4, 20, 30, 40], [50, 50, 60, 60], [51, 50, 61, 60]],
                        [[5, 5, 20, 20], [6, 5, 20, 21], [30, 30, 40, 40], [0, 0, 2, 2], [70, 70, 90, 90]]])
    scores = np.float32([[[0.9, 0.8, 0.7, 0.01, 0.02], [0.1, 0.2, 0.03, 0.6, 0.55]],
                         [[0.3, 0.95, 0.5, 0.04, 0.8], [0.6, 0.1, 0.45, 0.2, 0.02]]])
    return boxes, scores


def run(program, feed, fetches):
    import paddle

    exe = paddle.static.Executor(paddle.CPUPlace())
    return [np.asarray(o) for o in exe.run(program, feed=feed, fetch_list=fetches)]


def legacy_rows(boxes, scores):
    """The same computation with the legacy ops built directly (what Paddle 2.6's export of PaddleDetection writes)."""
    import paddle
    from paddle.base.layer_helper import LayerHelper

    paddle.enable_static()
    main = paddle.static.Program()
    with paddle.static.program_guard(main, paddle.static.Program()):
        b = paddle.static.data("boxes", [-1, 5, 4], "float32")
        s = paddle.static.data("scores", [-1, 2, 5], "float32")
        clipped = paddle.maximum(b, paddle.zeros_like(b))
        helper = LayerHelper("multiclass_nms3")
        out, index, count = (helper.create_variable_for_type_inference(d) for d in ("float32", "int32", "int32"))
        helper.append_op(type="multiclass_nms3", inputs={"BBoxes": clipped, "Scores": s},
                         outputs={"Out": out, "Index": index, "NmsRoisNum": count},
                         attrs={"background_label": -1, "score_threshold": 0.05, "nms_top_k": 1000, "nms_threshold": 0.5,
                                "keep_top_k": 100, "nms_eta": 1.0, "normalized": True})
    return run(main, {"boxes": boxes, "scores": scores}, [out, count])


def test_multiclass_nms3_and_full_like_translate_to_the_legacy_ops_paddle_26_writes(tmp_path):
    import paddle

    graph_file, params_file = write(tmp_path, nms_graph())
    report = translate(graph_file, params_file, tmp_path / "model")
    assert report["pir_ops"]["pd_op.multiclass_nms3"] == 1 and report["pir_ops"]["pd_op.full_like"] == 1
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    program, feeds, fetches = paddle.static.load_inference_model(str(tmp_path / "model"), exe)
    ops = {op.type: op for op in program.global_block().ops}
    nms = ops["multiclass_nms3"]
    assert {k: nms.attr(k) for k in NMS_ATTRS} == pytest.approx(NMS_ATTRS)
    assert (nms.input("BBoxes"), nms.input("RoisNum")) == ([ops["elementwise_max"].output("Out")[0]], [])
    assert ops["fill_any_like"].attr("value") == 0.0 and "full_like" not in ops
    boxes, scores = scene()
    rows, count = run(program, dict(zip(feeds, (boxes, scores))), fetches)
    want_rows, want_count = legacy_rows(boxes, scores)
    assert count.tolist() == want_count.tolist() == [4, 6]
    assert np.array_equal(rows, want_rows)
    assert rows[rows[:, 1] == np.float32(0.7)][0, 2:].tolist() == [0, 20, 30, 40]   # the negative corner clipped


def test_rois_num_is_passed_on_and_a_missing_attribute_is_named(tmp_path):
    import paddle

    graph_file, params_file = write(tmp_path, nms_graph(rois_num=True))
    translate(graph_file, params_file, tmp_path / "model")
    paddle.enable_static()
    program, _, _ = paddle.static.load_inference_model(str(tmp_path / "model"), paddle.static.Executor(paddle.CPUPlace()))
    (nms,) = [op for op in program.global_block().ops if op.type == "multiclass_nms3"]
    assert nms.input("RoisNum") == ["rois"]
    changed = {k: v for k, v in NMS_ATTRS.items() if k != "nms_eta"}
    graph_file, params_file = write(tmp_path, nms_graph(changed))
    with pytest.raises(UntranslatableOp, match=r"op #5 pd_op.multiclass_nms3 -> \[-1, 6\] .*no attribute nms_eta"):
        translate(graph_file, params_file, tmp_path / "other")


def test_matrix_nms_translates_to_the_legacy_op_paddle_vision_writes(tmp_path):
    """`paddle.vision.ops.matrix_nms` (PP-YOLOv2-style decayed scores) as Paddle 3.3.1 describes it: the legacy
    matrix_nms with its RoisNum output gives the rows of Paddle 2.6's own op on the same boxes."""
    import paddle

    graph_file, params_file = write(tmp_path, nms_graph(MATRIX_ATTRS, op="matrix_nms"))
    assert translate(graph_file, params_file, tmp_path / "model")["pir_ops"]["pd_op.matrix_nms"] == 1
    paddle.enable_static()
    program, feeds, fetches = paddle.static.load_inference_model(str(tmp_path / "model"),
                                                                 paddle.static.Executor(paddle.CPUPlace()))
    (op,) = [o for o in program.global_block().ops if o.type == "matrix_nms"]
    assert {k: op.attr(k) for k in MATRIX_ATTRS} == pytest.approx(MATRIX_ATTRS) and op.output("RoisNum")
    boxes, scores = scene()
    rows, count = run(program, dict(zip(feeds, (boxes, scores))), fetches)
    main = paddle.static.Program()
    with paddle.static.program_guard(main, paddle.static.Program()):
        b = paddle.static.data("boxes", [-1, 5, 4], "float32")
        s = paddle.static.data("scores", [-1, 2, 5], "float32")
        out, num, _ = paddle.vision.ops.matrix_nms(paddle.maximum(b, paddle.zeros_like(b)), s, 0.05, 0.05, 1000, 100,
                                                   background_label=-1, return_rois_num=True)
    want_rows, want_count = run(main, {"boxes": boxes, "scores": scores}, [out, num])
    assert count.tolist() == want_count.tolist() and count.sum() > 0
    assert np.array_equal(rows, want_rows)
