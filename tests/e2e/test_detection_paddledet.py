"""The detector example exported with PaddleDetection's three inputs, `image`, `im_shape` and `scale_factor`
(edgekit/examples/detector/paddledet.toml, `with_nms:create_paddledet`): the build writes the two geometry inputs
into the graph as the tensor sees the image (export/geometry.py), so the bundle is a single-input detector whose
boxes stay in model-input pixels; it builds to arm64 INT8, detects what Paddle's own graph detects fed those
values, and `edgekit run` gives boxes in the image's pixels with the letterbox undone. The same model exported to
ONNX by paddle2onnx (tests/data/paddledet_onnx) builds the same way: its inputs bound, its NMS written back
(export/onnx_nms.py) and kept or cut as for the Paddle program."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bundles import build_example_int8, example_config, manifest

from edgekit.examples import detector
from edgekit.examples.detector import train, with_nms
from edgekit.examples.detector import truth as example_truth
from edgekit.lite.nbfile import kernels
from edgekit.tasks import coco, make_task
from edgekit.tasks.detection import nms_rows

pytestmark = pytest.mark.e2e

EXAMPLE = Path(detector.__file__).parent
SAMPLES = 16
SAME_BOXES = 0.5           # map50 points: the bundle against the source framework's own NMS'd boxes
INT8_BUDGET = 1.0          # map50 points (the [parity] default int8 gate)


def paddle_model():
    """The three-input example with its weights, in Paddle's dynamic graph."""
    import paddle

    paddle.disable_static()
    model = with_nms.create_paddledet()
    model.set_state_dict(paddle.load(str(EXAMPLE / "detector.pdparams")))
    model.eval()
    return model


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, cli):
    return build_example_int8(cli, tmp_path_factory.mktemp("detector-paddledet"), EXAMPLE, "detector-paddledet",
                              SAMPLES, toml="paddledet.toml")


@pytest.fixture(scope="module")
def paddle_map(bundle):
    """mAP of the three-input model in Paddle's dynamic graph, fed im_shape = the tensor's size and scale_factor = 1
    (what the build writes into the graph), its own multiclass_nms3 rows scored on the same scenes."""
    return own_map(json.loads((bundle / "task.json").read_text())["options"])


def own_map(options: dict) -> dict:
    """The three-input model's own rows (Paddle's dynamic graph, geometry fed as the build writes it in) on the first
    SAMPLES evaluation scenes, scored with task options `options`."""
    import paddle

    model = paddle_model()
    x, truth = example_truth.evaluation_set(EXAMPLE / "data" / "eval", train.spec())
    x = x[:SAMPLES]
    im_shape = np.tile(np.float32([x.shape[2], x.shape[3]]), (len(x), 1))
    with paddle.no_grad():
        rows, counts = model(paddle.to_tensor(x), paddle.to_tensor(im_shape), paddle.ones([len(x), 2]))
    return make_task("detection", options).evaluate_detections(nms_rows(rows.numpy(), counts.numpy()), truth[:SAMPLES])


def test_the_geometry_inputs_are_written_into_the_graph_and_the_bundle_has_one_input(bundle):
    m = manifest(bundle)
    geometry = m["model"]["geometry"]
    assert geometry["bound"] == {"im_shape": [96.0, 96.0], "scale_factor": [1.0, 1.0]}
    assert geometry["image_input"] == "image" and geometry["check"]["max_abs"] == 0.0
    assert [i["name"] for i in m["model"]["inputs"]] == ["image"]
    assert [g["name"] for g in m["golden"]["inputs"]] == ["image"]
    assert "fill_constant_batch_size_like" in m["model"]["source_ops"]
    found = {k.op for k in kernels(bundle / "model.nb")}
    assert "fill_constant_batch_size_like" in found                          # Lite computes the bound values on ARM
    nms = m["model"]["nms"]
    if os.environ.get("EDGEKIT_LITE_ARM"):                                   # the op kept: tiers A and C agree
        assert nms["kept"] is True and nms["measured"]["tier_c"]["agree"], nms
    else:
        assert nms["kept"] is False and nms["cut"]["passed"]


def test_the_bundle_detects_what_paddles_own_three_input_graph_detects(bundle, paddle_map):
    metrics = manifest(bundle)["parity"]["metrics"]
    fp32, twin, int8 = metrics["fp32 reference"], metrics["x86 twin .nb"], metrics["int8 simulated"]
    assert paddle_map["map50"] >= 60.0                                       # measured 67.10 on 16 scenes
    assert abs(fp32["map50"] - paddle_map["map50"]) <= SAME_BOXES
    assert abs(twin["map50"] - paddle_map["map50"]) <= SAME_BOXES
    assert paddle_map["map50"] - int8["map50"] <= INT8_BUDGET
    arm = metrics.get("arm64 .nb (emulated ARM)")
    if os.environ.get("EDGEKIT_LITE_ARM"):
        assert arm is not None and abs(arm["map50"] - int8["map50"]) <= INT8_BUDGET
    print({"paddle": paddle_map["map50"], **{k: v["map50"] for k, v in metrics.items()}})


def test_run_gives_boxes_in_the_images_pixels(bundle, cli):
    index = 7                                                      # a 128x96 scene: letterboxed to 96x96
    scene = train.scene_of(train.EVAL_SEED + index)
    assert scene.image.shape[:2] == (96, 128)
    found = json.loads(cli("run", bundle, EXAMPLE / "data" / "eval" / f"eval{index:03d}.png", "--engine", "twin",
                           "--json").output)["boxes"]
    boxes = np.array([r["box"] for r in found if r["score"] >= 0.5]).reshape(-1, 4)
    assert len(boxes) and boxes[:, [0, 2]].max() <= 128 and boxes[:, [1, 3]].max() <= 96 and boxes.min() >= 0
    best = coco.iou_matrix(boxes, scene.boxes).max(axis=0)
    assert (best >= 0.75).sum() >= 3, best                         # undone letterbox: boxes sit on the shapes


def test_a_saved_three_input_pdmodel_builds_as_it_comes(tmp_path, cli, paddle_map):
    """The user's path: a PaddleDetection-style inference model (jit.save with the three InputSpecs) given with -m,
    no [model] inputs: its feeds come from the program, and the two geometry inputs are bound the same way."""
    import paddle
    from paddle.static import InputSpec

    model = paddle_model()
    specs = [InputSpec([-1, 3, 96, 96], "float32", "image"), InputSpec([-1, 2], "float32", "im_shape"),
             InputSpec([-1, 2], "float32", "scale_factor")]
    paddle.jit.save(paddle.jit.to_static(model, input_spec=specs), str(tmp_path / "model"))

    def saved(text: str) -> str:          # no factory, weights or input specs: the program says
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("factory = "))
        end = next(i for i, line in enumerate(lines) if line.startswith("[data]"))
        return "\n".join(lines[:start] + lines[end:]) + "\n"

    config = example_config(tmp_path, EXAMPLE, SAMPLES, "paddledet.toml", saved)
    cli("build", "-c", config, "-m", tmp_path / "model.pdmodel", "--target", "arm64", "--quant", "fp32", "--out",
        tmp_path / "out", "--no-emulation", "--quiet")
    m = manifest(tmp_path / "out" / "detector-paddledet" / "arm64-fp32")
    assert m["model"]["geometry"]["bound"] == {"im_shape": [96.0, 96.0], "scale_factor": [1.0, 1.0]}
    assert [i["name"] for i in m["model"]["inputs"]] == ["image"]
    assert abs(m["parity"]["metrics"]["fp32 reference"]["map50"] - paddle_map["map50"]) <= SAME_BOXES   # 67.10


PADDLEDET_YML = """# written by PaddleDetection's export (tools/export_model.py) for PP-PicoDet-style models
mode: paddle
draw_threshold: 0.5
metric: COCO
use_dynamic_shape: false
arch: GFL
min_subgraph_size: 3
Preprocess:
- interp: 1
  keep_ratio: false
  target_size: [96, 96]
  type: Resize
- is_scale: true
  mean: [0.5, 0.5, 0.5]
  std: [0.5, 0.5, 0.5]
  type: NormalizeImage
- type: Permute
label_list: [circle, square, triangle]
NMS:
  keep_top_k: 100
  name: MultiClassNMS
  nms_threshold: 0.5
  nms_top_k: 1000
  score_threshold: 0.05
"""


def test_a_paddledetection_model_folder_builds_from_its_inference_yml(tmp_path, cli):
    """`edgekit build -m DIR` on a PaddleDetection export folder (inference.pdmodel + .pdiparams + inference.yml):
    preprocessing, labels and the detection task come from the yml, the geometry inputs are bound, and the bundle
    detects what the three-input graph detects on the example's 96x96 scenes (the yml's Resize stretches)."""
    import shutil

    import paddle
    from paddle.static import InputSpec

    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.tasks import write_truth
    from edgekit.tasks.truth import read_truth

    model = paddle_model()
    folder = tmp_path / "PicoDet-like"
    specs = [InputSpec([-1, 3, 96, 96], "float32", "image"), InputSpec([-1, 2], "float32", "im_shape"),
             InputSpec([-1, 2], "float32", "scale_factor")]
    paddle.jit.save(paddle.jit.to_static(model, input_spec=specs), str(folder / "inference"))
    (folder / "inference.yml").write_text(PADDLEDET_YML, encoding="utf-8")

    source = EXAMPLE / "data" / "eval"                     # the square scenes: a stretch is the letterbox there
    stored = read_truth(source / "truth.json")
    picks = [i for i, t in enumerate(stored.values) if t["size"] == [96, 96]][:SAMPLES]
    scenes = tmp_path / "eval"
    scenes.mkdir()
    files = sorted(source.glob("*.png"))
    for i in picks:
        shutil.copyfile(files[i], scenes / files[i].name)
    write_truth(scenes / "truth.json", stored.task, [stored.values[i] for i in picks])
    (tmp_path / "edgekit.toml").write_text(f'[model]\nname = "picodet-like"\n[data]\nevaluation = "{scenes}"\n',
                                           encoding="utf-8")
    cli("build", "-c", tmp_path / "edgekit.toml", "-m", folder, "--target", "arm64", "--quant", "fp32", "--out",
        tmp_path / "out", "--no-emulation", "--quiet")
    bundle = tmp_path / "out" / "picodet-like" / "arm64-fp32"
    m = manifest(bundle)
    assert m["source"]["description"]["path"].endswith("inference.yml")
    assert m["model"]["geometry"]["bound"] == {"im_shape": [96.0, 96.0], "scale_factor": [1.0, 1.0]}
    task = json.loads((bundle / "task.json").read_text())
    assert task["kind"] == "detection" and task["options"]["labels"] == ["circle", "square", "triangle"]
    assert task["options"]["f1_threshold"] == 0.5 and task["options"]["max_detections"] == 100
    preprocess = json.loads((bundle / "preprocess.json").read_text())["preprocess"]
    assert preprocess["resize"] == [96, 96] and preprocess["mean"] == [0.5, 0.5, 0.5]

    x, truth = example_truth.evaluation_set(scenes, PreprocessSpec.from_mapping(
        {k: v for k, v in preprocess.items() if k != "order"}))
    model = paddle_model()                                 # a fresh one: the build left Paddle in static mode
    with paddle.no_grad():
        rows, counts = model(paddle.to_tensor(x), paddle.to_tensor(np.tile(np.float32([96, 96]), (len(x), 1))),
                             paddle.ones([len(x), 2]))
    own = make_task("detection", task["options"]).evaluate_detections(nms_rows(rows.numpy(), counts.numpy()), truth)
    fp32 = m["parity"]["metrics"]["fp32 reference"]
    assert own["map50"] >= 50.0 and abs(fp32["map50"] - own["map50"]) <= SAME_BOXES, (fp32, own)
    assert m["parity"]["metrics"]["x86 twin .nb"]["map50"] == fp32["map50"]
    print({"scenes": len(picks), "paddle": own["map50"], "fp32": fp32["map50"]})


def test_a_non_square_im_shape_is_written_as_two_columns(tmp_path):
    """im_shape (H, W) with H != W: two fill_constant_batch_size_like ops and a concat from the image feed; the
    bound program computes what the three-input one computes, at another batch size too."""
    import paddle

    from edgekit.model.artifacts import StaticModel
    from edgekit.contracts.settings import InputSpec
    from edgekit.export import geometry, program
    from edgekit.export.runner import StaticRunner

    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        image = paddle.static.data("image", [-1, 3, 4, 6], "float32")
        im_shape = paddle.static.data("im_shape", [-1, 2], "float32")
        scale = paddle.static.data("scale_factor", [-1, 2], "float32")
        pooled = paddle.reshape(paddle.mean(image, axis=[1, 2, 3]), [-1, 1])
        out = pooled + im_shape * 2.0 + scale * 3.0                      # [N, 2]
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        paddle.static.save_inference_model(str(tmp_path / "src" / "model"), [image, im_shape, scale], [out], exe,
                                           program=main)
    paddle.disable_static()
    feeds = (InputSpec("image", (-1, 3, 4, 6)), InputSpec("im_shape", (-1, 2)), InputSpec("scale_factor", (-1, 2)))
    _, fetches = program.feeds_and_fetches(program.parse_program(tmp_path / "src" / "model.pdmodel"))
    source = StaticModel(tmp_path / "src" / "model.pdmodel", tmp_path / "src" / "model.pdiparams", feeds,
                         tuple(fetches), "inference")
    x = np.random.default_rng(0).standard_normal((3, 3, 4, 6)).astype(np.float32)
    samples = {"image": x, "im_shape": np.float32([[4, 6]] * 3), "scale_factor": np.ones((3, 2), np.float32)}
    found = geometry.bind(source, ["im_shape", "scale_factor"], tmp_path / "bound", samples)
    bound, entry = found.model, found.facts
    assert found.check.passed and found.check.what == "the geometry inputs bound into the graph"
    assert entry["bound"] == {"im_shape": [4.0, 6.0], "scale_factor": [1.0, 1.0]} and entry["tensor_size"] == [4, 6]
    assert [f.name for f in bound.feeds] == ["image"] and entry["check"]["max_abs"] == 0.0
    ops = [op.type for op in program.parse_program(bound.model_file).global_block().ops]
    assert ops.count("fill_constant_batch_size_like") == 3 and ops.count("concat") == 1
    (got,) = StaticRunner(bound).run({"image": x[:2]})
    assert np.allclose(got, x[:2].mean(axis=(1, 2, 3))[:, None] + np.float32([[11, 15]]), atol=1e-6)


# --- the same model exported to ONNX by paddle2onnx, as users do (tests/data/paddledet_onnx/make.py says how)

PADDLE2ONNX = Path(__file__).resolve().parents[1] / "data" / "paddledet_onnx" / "detector_nms.onnx"


def build_paddle2onnx(cli, folder: Path, nms: str | None = None) -> dict:
    """The paddle2onnx export built to arm64 FP32 without tier C (`[model] nms = nms` when given); its manifest."""
    def onnx_model(text: str) -> str:       # no factory, weights or input specs: the .onnx says
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("factory = "))
        end = next(i for i, line in enumerate(lines) if line.startswith("[data]"))
        head = lines[:start] + ([f'nms = "{nms}"'] if nms else []) + [""]
        return "\n".join(head + lines[end:]) + "\n"

    config = example_config(folder, EXAMPLE, SAMPLES, "paddledet.toml", onnx_model)
    cli("build", "-c", config, "-m", PADDLE2ONNX, "--target", "arm64", "--quant", "fp32", "--out", folder / "out",
        "--no-emulation", "--quiet")
    return manifest(folder / "out" / "detector-paddledet" / "arm64-fp32")


def check_paddle2onnx_import(m: dict) -> None:
    """What every build of the paddle2onnx export shows: the geometry bound, the NMS written back and both checked."""
    assert [i["name"] for i in m["model"]["inputs"]] == ["x2paddle_image"]          # the image alone
    geometry = m["model"]["geometry"]
    assert geometry["bound"] == {"x2paddle_im_shape": [96.0, 96.0], "x2paddle_scale_factor": [1.0, 1.0]}
    assert geometry["source_names"] == {"x2paddle_im_shape": "im_shape", "x2paddle_scale_factor": "scale_factor"}
    assert geometry["check"]["max_abs"] == 0.0
    written = m["onnx_import"]["nms"]                  # paddle2onnx's NonMaxSuppression tail, a multiclass_nms3 again
    assert written["op"] == "multiclass_nms3" and written["attrs"] == {
        "score_threshold": with_nms.SCORE_THRESHOLD, "nms_threshold": with_nms.NMS_IOU, "nms_top_k": with_nms.NMS_TOP_K,
        "keep_top_k": with_nms.KEEP_TOP_K, "normalized": True, "nms_eta": 1.0, "background_label": -1}
    assert written["check"]["agree"] and written["check"]["rows"] > 0               # measured 200 rows on 2 draws
    assert written["check"]["max_abs"] <= 1e-3                                      # measured 7.6e-6
    assert [r["op"] for r in m["onnx_import"]["legalise"]["rewrites"]] == ["Split", "Split"]   # scale_factor's, floor's
    judged = m["onnx_import"]
    assert judged["verdict"]["passed"] and judged["data_check"]["passed"]           # at the op's inputs, 16 scenes
    assert [o["output"] for o in judged["data_check"]["outputs"]] == list(written["reads"].values())
    assert judged["task_metric"]["paddle"] == judged["task_metric"]["onnxruntime"]   # measured 67.10 both
    nms = m["model"]["nms"]
    assert nms["op"] == "multiclass_nms3" and nms["measured"]["tier_a"]["agree"]    # measured 262 rows, 2.3e-5


def test_a_paddle2onnx_export_binds_its_geometry_and_gets_the_paddle_programs_nms_decision(tmp_path, cli):
    """ONNX Runtime needs im_shape and scale_factor, X2Paddle cannot convert paddle2onnx's NMS tail: the build binds
    the two inputs as for a Paddle program, writes the NMS op back and decides keep or cut the same way (here no
    tier C: cut for task.json's NMS); the bundle detects what the Paddle model paddle2onnx read detects."""
    m = build_paddle2onnx(cli, tmp_path)
    check_paddle2onnx_import(m)
    nms = m["model"]["nms"]
    assert nms["kept"] is False and "tier C is off for this build" in nms["reason"]
    assert nms["cut"]["passed"] and nms["cut"]["match_percent"] == 100.0            # measured 980 of 980 rows
    task = json.loads((tmp_path / "out" / "detector-paddledet" / "arm64-fp32" / "task.json").read_text())["options"]
    paddle = own_map(task)
    fp32, twin = (m["parity"]["metrics"][k] for k in ("fp32 reference", "x86 twin .nb"))
    assert paddle["map50"] >= 60.0                                                  # measured 67.10
    assert abs(fp32["map50"] - paddle["map50"]) <= SAME_BOXES and abs(twin["map50"] - paddle["map50"]) <= SAME_BOXES


def test_a_kept_nms_op_of_a_paddle2onnx_export_is_judged_at_its_inputs(tmp_path, cli):
    """`[model] nms = "keep"`: the op written back stays in the bundle (rows + counts), and the import is judged
    against ONNX Runtime where X2Paddle's conversion ends, at the op's inputs, as for a cut."""
    m = build_paddle2onnx(cli, tmp_path, nms="keep")
    check_paddle2onnx_import(m)
    nms = m["model"]["nms"]
    assert nms["kept"] is True and nms["reason"].startswith("kept on request")
    assert "multiclass_nms3" in m["model"]["source_ops"] and m["golden"]["outputs"][0]["shape"][1:] == [6]
    task = json.loads((tmp_path / "out" / "detector-paddledet" / "arm64-fp32" / "task.json").read_text())["options"]
    assert task["head"] == "nms"
    paddle = own_map(task)
    assert abs(m["parity"]["metrics"]["x86 twin .nb"]["map50"] - paddle["map50"]) <= SAME_BOXES   # measured 67.10
