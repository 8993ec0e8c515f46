"""Models that compute one sample per run, and PicoDet-style flattened heads, through a real `edgekit build`.

A tiny anchor-free detector written as ONNX in the test, in the form PaddleDetection's PicoDet exports take
without NMS: per stride, class probabilities [N, h*w, C] then DFL bins [N, h*w, 4 (reg_max + 1)]. Its batch is
either fixed at 1 in the input, or left symbolic while its reshapes bake 1 (as `layout_cdla.onnx` does). Both
build to arm64 INT8 (X2Paddle, the import gate on the data, PaddleSlim calibration, tiers A and B) one sample at a
time, found from the model alone; the flattened cells are laid out by the input size the build takes from the data.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgekit.export.onnx_import import onnxruntime_run
from edgekit.tasks import make_task, write_truth

pytestmark = pytest.mark.e2e

SIZE = (32, 48)              # height, width: not square, so a transposed cell grid would move every box
STRIDES = (8, 16)
CLASSES = 2
REG_MAX = 3
OPTIONS = {"head": "anchor_free", "strides": list(STRIDES), "reg_max": REG_MAX, "activation": "none",
           "score_threshold": 0.3, "labels": ["a", "b"]}


def picodet_onnx(path: Path, batch: str) -> Path:
    """`batch` "fixed": input [1, 3, H, W]; "baked": input [N, 3, H, W] whose reshapes write 1 as the batch."""
    rng = np.random.default_rng(0)
    nodes, weights, scores, bins = [], [], [], []
    for s in STRIDES:
        cells = (SIZE[0] // s) * (SIZE[1] // s)
        nodes.append(helper.make_node("AveragePool", ["image"], [f"p{s}"], kernel_shape=[s, s], strides=[s, s]))
        # class k scores its own colour channel (confident at stride 8 only); every side 1 bin (a box of 2 strides)
        gain = 3.0 if s == 8 else 1.0
        cls_w = np.zeros((CLASSES, 3, 1, 1), np.float32)
        cls_w[np.arange(CLASSES), np.arange(CLASSES)] = gain
        reg_b = np.tile(np.array([0.0, 5.0, 0.0, 0.0], np.float32), 4)
        for kind, channels, out, w, b in (
                ("cls", CLASSES, scores, cls_w, np.full(CLASSES, -3.0, np.float32)),
                ("reg", 4 * (REG_MAX + 1), bins, rng.normal(0, 0.05, (16, 3, 1, 1)).astype(np.float32), reg_b)):
            weights += [numpy_helper.from_array(w, f"{kind}{s}_w"), numpy_helper.from_array(b, f"{kind}{s}_b"),
                        numpy_helper.from_array(np.array([1, channels, cells], np.int64), f"{kind}{s}_shape")]
            nodes.append(helper.make_node("Conv", [f"p{s}", f"{kind}{s}_w", f"{kind}{s}_b"], [f"{kind}{s}_c"],
                                          kernel_shape=[1, 1]))
            last = f"{kind}{s}_c"
            if kind == "cls":
                nodes.append(helper.make_node("Sigmoid", [last], [f"{kind}{s}_p"]))
                last = f"{kind}{s}_p"
            nodes.append(helper.make_node("Reshape", [last, f"{kind}{s}_shape"], [f"{kind}{s}_r"]))
            nodes.append(helper.make_node("Transpose", [f"{kind}{s}_r"], [f"{kind}{s}_out"], perm=[0, 2, 1]))
            out.append(helper.make_tensor_value_info(f"{kind}{s}_out", TensorProto.FLOAT, [1, cells, channels]))
    first = 1 if batch == "fixed" else "N"
    graph = helper.make_graph(nodes, "picodet", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                               [first, 3, *SIZE])],
                              scores + bins, weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def pages(path: Path, seed: int, count: int) -> Path:
    """Images of bright 16 px blocks on dark ground, each centred on a stride-8 cell, their blocks as truth (the class
    by the block's colour)."""
    rng = np.random.default_rng(seed)
    images, truth = [], []
    for _ in range(count):
        image = rng.normal(-1, 0.2, (3, *SIZE)).astype(np.float32)
        boxes, classes = [], []
        for _ in range(int(rng.integers(1, 3))):
            y, x = (8 * int(rng.integers(0, (d - 20) // 8 + 1)) + 4 for d in SIZE)   # centred on a stride-8 cell
            klass = int(rng.integers(CLASSES))
            image[klass, y:y + 16, x:x + 16] = 2.0
            boxes.append([float(x), float(y), float(x + 16), float(y + 16)])
            classes.append(klass)
        images.append(image)
        truth.append({"boxes": boxes, "classes": classes, "size": list(SIZE)})
    np.savez(path, image=np.stack(images))
    write_truth(path.with_name(path.stem + ".truth.json"), make_task("detection", OPTIONS), truth, {"seed": seed})
    return path


@pytest.fixture(scope="module", params=["fixed", "baked"])
def built(request, tmp_path_factory, cli):
    root = tmp_path_factory.mktemp(f"picodet-{request.param}")
    model = picodet_onnx(root / "picodet.onnx", request.param)
    evaluation, calibration = pages(root / "eval.npz", 1, 12), pages(root / "calib.npz", 2, 16)
    cli("build", "-m", model, "--eval", evaluation, "--calib", calibration, "--target", "arm64", "--quant", "int8",
        "--no-emulation", "--out", root / "out", "--name", "picodet", "--quiet")
    return request.param, model, evaluation, root / "out" / "picodet" / "arm64-int8"


def test_one_sample_per_run_is_found_from_the_model(built):
    batch, model, evaluation, bundle = built
    manifest = json.loads((bundle / "manifest.json").read_text())
    found = manifest["onnx_import"]["batch"]
    assert found["samples_per_run"] == 1
    assert ("fails in ONNX Runtime" in found["why"]) if batch == "baked" else found["why"] == "the model's inputs fix the batch"
    # the import gate ran ONNX Runtime on all 12 evaluation samples, one at a time, and the metric is ONNX Runtime's
    metrics = manifest["parity"]["metrics"]
    x = np.load(evaluation)["image"]
    source = onnxruntime_run(model, {"image": x}, batch=1)
    assert source[0].shape == (12, 24, CLASSES)
    task = make_task("detection", dict(OPTIONS, input_size=list(SIZE)))
    truth = json.loads(evaluation.with_name("eval.truth.json").read_text())["truth"]
    onnx_map = task.evaluate(source, truth)["map50"]
    assert metrics["fp32 reference"]["map50"] == pytest.approx(onnx_map, abs=0.01)
    assert metrics["x86 twin .nb"]["map50"] == metrics["fp32 reference"]["map50"]   # tier A
    assert onnx_map > 80 and abs(metrics["int8 simulated"]["map50"] - onnx_map) <= 1.0   # tier B, calibrated one by one


def test_flattened_cells_are_laid_out_by_the_input_size(built):
    _, _, _, bundle = built
    task = json.loads((bundle / "task.json").read_text())
    assert task["options"]["input_size"] == list(SIZE) and task["options"]["strides"] == list(STRIDES)
