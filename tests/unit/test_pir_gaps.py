"""PIR translation gaps found on PP-OCRv5 (issue 30), on small described programs written here in the form
`_paddle3_child.py describe` gives, translated with the real Paddle 2.6 and run by its executor.

- `pd_op.stack` over shape scalars feeding a reshape (PP-OCRv5_mobile_rec op #385: `x.reshape([0, 1, w, 120])`
  with w = shape(y)[3]): Paddle 2.6 refused the stack, then the reshape, then the conv after it.
- `survey`: every gap of a program at once, not the first one.
- `pd_op.while` with a data-dependent trip count (Paddle 2.6's `while` with a sub-block, as `while_loop` writes it).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgekit.export.pir_translate import UntranslatableOp, survey, translate

pytestmark = pytest.mark.e2e     # real Paddle 2.6 (importing it starts a process): not the fast tier


def _out(vid, shape, dtype="float32"):
    return ["out", vid, shape, dtype]


def _full(vid, value, dtype="int64"):
    return {"op": "pd_op.full", "inputs": [], "outputs": [_out(vid, [], dtype)],
            "attrs": {"dtype": {"dtype": dtype}, "value": float(value), "shape": []}}


def _ints(vid, values):
    return {"op": "pd_op.full_int_array", "inputs": [], "outputs": [_out(vid, [len(values)], "int64")],
            "attrs": {"dtype": {"dtype": "int64"}, "value": list(values)}}


def stacked_shape_graph(extra_ops=()):
    """x [-1, 2, 1, -1] -> t = transpose [N, 1, W, 2] -> z = reshape [N, W, 2] -> reshape(z, stack([0, 1, W, 2]))
    -> transpose back [N, 2, 1, W] -> 1x1 conv to 3 channels. W is shape(x)[3], taken at run time."""
    ops = [
        {"op": "pd_op.data", "inputs": [], "outputs": [_out("x", [-1, 2, 1, -1])],
         "attrs": {"name": "x", "shape": [-1, 2, 1, -1], "dtype": {"dtype": "float32"}}},
        {"op": "pd_op.shape64", "inputs": [["input", "x"]], "outputs": [_out("s", [4], "int64")], "attrs": {}},
        _ints("s0", [3]), _ints("s1", [4]),
        {"op": "pd_op.slice", "inputs": [["input", "s"], ["starts", "s0"], ["ends", "s1"]],
         "outputs": [_out("w", [], "int64")], "attrs": {"decrease_axis": [0], "infer_flags": [1], "axes": [0]}},
        {"op": "pd_op.transpose", "inputs": [["x", "x"]], "outputs": [_out("t", [-1, 1, -1, 2])],
         "attrs": {"perm": [0, 2, 3, 1]}},
        _ints("zs", [0, -1, 2]),
        {"op": "pd_op.reshape", "inputs": [["x", "t"], ["shape", "zs"]], "outputs": [_out("z", [-1, -1, 2])],
         "attrs": {}},
        _full("c0", 0), _full("c1", 1), _full("c2", 2),
        {"op": "builtin.combine", "inputs": [["in0", "c0"], ["in1", "c1"], ["in2", "w"], ["in3", "c2"]],
         "outputs": [["out", "list", None, None]], "attrs": {}},
        {"op": "pd_op.stack", "inputs": [["x", "list"]], "outputs": [_out("st", [4], "int64")], "attrs": {"axis": 0}},
        {"op": "pd_op.reshape", "inputs": [["x", "z"], ["shape", "st"]], "outputs": [_out("r", [-1, 1, -1, 2])],
         "attrs": {}},
        {"op": "pd_op.transpose", "inputs": [["x", "r"]], "outputs": [_out("b", [-1, 2, 1, -1])],
         "attrs": {"perm": [0, 3, 1, 2]}},
        {"op": "pd_op.conv2d", "inputs": [["input", "b"], ["filter", "wt"]], "outputs": [_out("y", [-1, 3, 1, -1])],
         "attrs": {"data_format": "NCHW", "groups": 1, "padding_algorithm": "EXPLICIT", "dilations": [1, 1],
                   "paddings": [0, 0], "strides": [1, 1]}},
        *extra_ops,
        {"op": "pd_op.fetch", "inputs": [["x", "y"]], "outputs": [], "attrs": {"name": "fetch0"}},
    ]
    return {"schema": "edgekit.pir-graph/1", "paddle": "3.3.1", "feeds": [], "fetches": ["y"],
            "params": {"wt": "conv_w"}, "ops": ops}


def write(tmp_path, graph, weight):
    (tmp_path / "graph.json").write_text(json.dumps(graph), encoding="utf-8")
    np.savez(tmp_path / "params.npz", conv_w=weight)
    return tmp_path / "graph.json", tmp_path / "params.npz"


def run_legacy(prefix, x):
    import paddle

    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        program, feeds, fetches = paddle.static.load_inference_model(str(prefix), exe)
        out, = exe.run(program, feed={feeds[0]: x}, fetch_list=fetches)
    return program, np.asarray(out)


def test_stack_of_shape_scalars_feeds_a_run_time_reshape(tmp_path):
    rng = np.random.default_rng(0)
    weight = rng.normal(0, 1, (3, 2, 1, 1)).astype(np.float32)
    graph_file, params_file = write(tmp_path, stacked_shape_graph(), weight)
    report = translate(graph_file, params_file, tmp_path / "model")
    assert report["pir_ops"]["pd_op.stack"] == 1
    for width in (5, 9):      # the width is read at run time: one program for every width
        x = rng.normal(0, 1, (2, 2, 1, width)).astype(np.float32)
        program, got = run_legacy(tmp_path / "model", x)
        want = np.einsum("oc,nchw->nohw", weight[:, :, 0, 0], x)
        assert got.shape == (2, 3, 1, width)
        assert np.abs(got - want).max() < 1e-5
    reshapes = [op for op in program.global_block().ops if op.type == "reshape2" and op.input("ShapeTensor")]
    assert len(reshapes) == 1 and reshapes[0].attr("shape") == [0, 1, -1, 2]   # the constants stay readable


def test_survey_lists_every_gap_and_translates_past_them(tmp_path):
    extra = [{"op": "pd_op.cumsum", "inputs": [["x", "y"]], "outputs": [_out("c", [-1, 3, 1, -1])], "attrs": {}},
             {"op": "pd_op.relu", "inputs": [["x", "c"]], "outputs": [_out("d", [-1, 3, 1, -1])], "attrs": {}},
             {"op": "pd_op.reshape", "inputs": [["x", "d"], ["shape", "y"]], "outputs": [_out("e", [-1])], "attrs": {}},
             {"op": "pd_op.sigmoid", "inputs": [["x", "e"]], "outputs": [_out("f", [-1])], "attrs": {}}]
    graph_file, params_file = write(tmp_path, stacked_shape_graph(extra), np.ones((3, 2, 1, 1), np.float32))
    gaps, translated = survey(graph_file, params_file)
    assert [(g.position, g.op) for g in gaps] == [("16", "pd_op.cumsum"), ("18", "pd_op.reshape")]
    assert "no translation for this op" in gaps[0].line() and "op #16 pd_op.cumsum -> [-1, 3, 1, -1]" in gaps[0].line()
    assert "computed at run time" in gaps[1].line()
    assert translated["pd_op.relu"] == 1 and translated["pd_op.sigmoid"] == 1 and translated["pd_op.stack"] == 1
    with pytest.raises(UntranslatableOp, match=r"pd_op.cumsum \(first: op #16 .*1 in all"):
        translate(graph_file, params_file, tmp_path / "model")


def while_graph():
    """As Paddle 3.3.1 describes `while i < n: y = tanh(fc(y)); i += 1` with n = the count of x's positive entries
    (`_paddle3_child.py describe` of a jit.save'd layer): the body reads i and y as block arguments."""
    def op(name, inputs, outputs, attrs=None):
        return {"op": name, "inputs": inputs, "outputs": outputs, "attrs": attrs or {}}

    body = [
        op("pd_op.matmul", [["x", "y_arg"], ["y", "w"]], [_out("mm", [1, 4])], {"transpose_x": False, "transpose_y": False}),
        op("pd_op.add", [["x", "mm"], ["y", "b"]], [_out("lin", [1, 4])]),
        op("pd_op.tanh", [["x", "lin"]], [_out("y_next", [1, 4])]),
        {"op": "pd_op.full", "inputs": [], "outputs": [_out("one", [1], "float32")],
         "attrs": {"dtype": {"dtype": "float32"}, "value": 1.0, "shape": [1]}},
        op("pd_op.scale", [["x", "i_arg"], ["scale", "one"]], [_out("i_next", [1], "int64")],
           {"bias": 1.0, "bias_after_scale": True}),
        op("pd_op.less_than", [["x", "i_next"], ["y", "n"]], [_out("go_on", [1], "bool")]),
        op("cf.yield", [["in0", "go_on"], ["in1", "i_next"], ["in2", "y_next"]], []),
    ]
    ops = [
        op("pd_op.data", [], [_out("x", [1, 4])], {"name": "x", "shape": [1, 4], "dtype": {"dtype": "float32"}}),
        {"op": "pd_op.full", "inputs": [], "outputs": [_out("i0", [1], "int64")],
         "attrs": {"dtype": {"dtype": "int64"}, "value": 0.0, "shape": [1]}},
        _full("zero", 0, "float32"),
        op("pd_op.greater_than", [["x", "x"], ["y", "zero"]], [_out("pos", [1, 4], "bool")]),
        _ints("all", []),
        op("pd_op.sum", [["x", "pos"], ["axis", "all"]], [_out("n0", [], "int64")], {"keepdim": False}),
        op("pd_op.cast", [["x", "n0"]], [_out("n", [], "int64")], {"dtype": {"dtype": "int64"}}),
        op("pd_op.less_than", [["x", "i0"], ["y", "n"]], [_out("c0", [1], "bool")]),
        dict(op("pd_op.while", [["in0", "c0"], ["in1", "i0"], ["in2", "x"]], [_out("i_end", [1], "int64"),
                                                                              _out("y_end", [1, 4])]),
             blocks=[body], block_args=[["i_arg", "y_arg"]]),
        op("pd_op.fetch", [["x", "y_end"]], [], {"name": "fetch0"}),
    ]
    return {"schema": "edgekit.pir-graph/1", "paddle": "3.3.1", "feeds": [], "fetches": ["y_end"],
            "params": {"w": "fc_w", "b": "fc_b"}, "ops": ops}


def test_while_loop_runs_as_many_times_as_the_data_says(tmp_path):
    rng = np.random.default_rng(1)
    w, b = rng.uniform(-0.5, 0.5, (4, 4)).astype(np.float32), rng.uniform(-0.5, 0.5, (4,)).astype(np.float32)
    (tmp_path / "graph.json").write_text(json.dumps(while_graph()), encoding="utf-8")
    np.savez(tmp_path / "params.npz", fc_w=w, fc_b=b)
    report = translate(tmp_path / "graph.json", tmp_path / "params.npz", tmp_path / "model")
    assert report["control_flow"] == {"pd_op.while": 1} and report["pir_ops"]["pd_op.tanh"] == 1
    for positives in range(5):
        x = np.where(np.arange(4) < positives, 0.4, -0.3).astype(np.float32)[None]
        program, got = run_legacy(tmp_path / "model", x)
        want = x
        for _ in range(positives):
            want = np.tanh(want @ w + b)
        assert np.abs(got - want).max() < 1e-6, positives
    assert [op.type for op in program.global_block().ops].count("while") == 1
    assert "tanh" in [op.type for op in program.block(1).ops]
