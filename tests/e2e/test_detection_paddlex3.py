"""A PaddleX 3 detector folder as PaddleX ships one: a PIR `inference.json` written by Paddle 3 with PaddleDetection's
three inputs (`image`, `im_shape`, `scale_factor`) and `multiclass_nms3` inside, plus PaddleX's `inference.yml`
(made by edgekit/examples/detector/paddlex3.py from the detector example's weights). `edgekit build -m DIR` translates
it (`pd_op.multiclass_nms3`, `pd_op.full_like`), binds the geometry inputs into the graph as for a Paddle 2 program,
and keeps or cuts the NMS op by tiers A and C (kept with EDGEKIT_LITE_ARM, cut without); the bundle detects what
Paddle 3's own inference of the three-input program detects, fed the values the build wrote in."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from bundles import manifest

from edgekit.examples import detector
from edgekit.examples.detector import paddlex3
from edgekit.examples.detector import truth as example_truth

pytestmark = pytest.mark.e2e

EXAMPLE = Path(detector.__file__).parent
SAMPLES = 12
SAME_BOXES = 0.5           # map50 points: the bundle against Paddle 3's own NMS'd rows


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return paddlex3.make(tmp_path_factory.mktemp("paddlex3") / "PicoDet-shapes")


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """The first square eval scenes (96x96 images: the yml's Resize stretches, so the letterbox truth holds)."""
    import cv2

    from edgekit.tasks import write_truth
    from edgekit.tasks.truth import read_truth

    source = EXAMPLE / "data" / "eval"
    stored = read_truth(source / "truth.json")
    files = sorted(source.glob("*.png"))
    picks = [i for i, f in enumerate(files) if cv2.imread(str(f)).shape[:2] == (96, 96)][:SAMPLES]
    out = tmp_path_factory.mktemp("square-scenes")
    for i in picks:
        shutil.copyfile(files[i], out / files[i].name)
    write_truth(out / "truth.json", stored.task, [stored.values[i] for i in picks])
    return out


@pytest.fixture(scope="module")
def bundle(folder, scenes, cli, tmp_path_factory):
    work = tmp_path_factory.mktemp("paddlex3-build")
    (work / "edgekit.toml").write_text(f'[model]\nname = "picodet-pir"\n[data]\nevaluation = "{scenes}"\n',
                                       encoding="utf-8")
    emulation = [] if os.environ.get("EDGEKIT_LITE_ARM") else ["--no-emulation"]
    cli("build", "-c", work / "edgekit.toml", "-m", folder, "--target", "arm64", "--quant", "fp32", "--out",
        work / "out", "--quiet", *emulation)
    return work / "out" / "picodet-pir" / "arm64-fp32"


@pytest.fixture(scope="module")
def paddle3_map(folder, scenes, bundle, tmp_path_factory):
    """mAP@0.5 of Paddle 3's own inference of the three-input PIR program (its multiclass_nms3 rows), fed the scenes
    as the bundle's preprocess.json makes them, im_shape = the tensor's size and scale_factor = 1."""
    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.export import paddle3
    from edgekit.tasks import make_task
    from edgekit.tasks.detection import nms_rows

    preprocess = json.loads((bundle / "preprocess.json").read_text())["preprocess"]
    x, truth = example_truth.evaluation_set(scenes, PreprocessSpec.from_mapping(
        {k: v for k, v in preprocess.items() if k != "order"}))
    work = tmp_path_factory.mktemp("paddle3-run")
    inputs = {"image": x, "im_shape": np.tile(np.float32([96, 96]), (len(x), 1)), "scale_factor": np.ones((len(x), 2), np.float32)}
    answer = paddle3.find().call("run", {"prefix": str(folder / "inference"),
                                         "inputs": str(paddle3.save_inputs(work / "in.npz", inputs)),
                                         "outputs": str(work / "out.npz")}, timeout=300, what="the PaddleX 3 folder")
    rows, counts = paddle3.load_outputs(Path(answer["outputs"]))
    options = {"head": "nms", "labels": list(paddlex3.LABELS), "score_threshold": 0.05, "max_detections": 100}
    return make_task("detection", options).evaluate_detections(nms_rows(rows, counts), truth)["map50"]


def test_the_pir_detector_builds_with_geometry_bound_and_the_nms_op_decided(bundle):
    m = manifest(bundle)
    p3 = m["paddle3"]
    assert p3["paddle"].startswith("3.") and p3["translated_ops"]["pd_op.multiclass_nms3"] == 1
    assert p3["check"]["max_abs"] <= p3["check"]["limit"]                 # the translation vs Paddle 3 (measured 0)
    assert p3["check"]["reference_engines_max_abs"] == 0.0                # executor vs Paddle Inference, first batch
    assert m["model"]["geometry"]["bound"] == {"im_shape": [96.0, 96.0], "scale_factor": [1.0, 1.0]}
    assert m["model"]["geometry"]["check"]["max_abs"] == 0.0
    assert [i["name"] for i in m["model"]["inputs"]] == ["image"]
    nms = m["model"]["nms"]
    assert nms["op"] == "multiclass_nms3" and nms["measured"]["tier_a"]["agree"], nms
    if os.environ.get("EDGEKIT_LITE_ARM"):                                # kept: Paddle 3's rows stay the reference
        assert nms["kept"] is True and nms["measured"]["tier_c"]["agree"], nms
    else:                                                                 # cut: Paddle 3 again, at the op's inputs
        assert nms["kept"] is False and nms["cut"]["passed"], nms
        assert nms["paddle3_reference"]["max_abs"] <= nms["paddle3_reference"]["limit"], nms
        assert nms["paddle3_reference"]["samples"] == SAMPLES


def test_the_bundle_detects_what_paddle3_detects(bundle, paddle3_map):
    m = manifest(bundle)
    metrics = m["parity"]["metrics"]
    assert paddle3_map >= 60.0, paddle3_map                               # measured 67.96 on 12 scenes
    assert m["paddle3"]["task_metric"]["paddle3"] == pytest.approx(paddle3_map, abs=1e-3)
    for engine in ("fp32 reference", "x86 twin .nb") + (("arm64 .nb (emulated ARM)",) if os.environ.get(
            "EDGEKIT_LITE_ARM") else ()):
        assert abs(metrics[engine]["map50"] - paddle3_map) <= SAME_BOXES, (engine, metrics, paddle3_map)
    print({"paddle3": paddle3_map, **{k: v["map50"] for k, v in metrics.items()}})


def test_a_paddle3_detector_ending_in_matrix_nms_is_cut_for_the_bundles_matrix_nms(tmp_path, cli):
    """`--paddle 3` on the with_nms example's matrix_nms variant (with_nms.toml, whose truth names the anchor-free
    head): Paddle 3 exports it as PIR, `pd_op.matrix_nms` is translated, Paddle 3's reference is scored as the op's
    rows, and without tier C the graph is cut for task.json's matrix NMS, judged against Paddle 3 at the op's inputs."""
    from bundles import example_config

    def matrix_for_paddle3(text: str) -> str:
        return text.replace("with_nms:create\"", "with_nms:create_matrix\"\npaddle = 3")

    config = example_config(tmp_path, EXAMPLE, SAMPLES, "with_nms.toml", matrix_for_paddle3)
    cli("build", "-c", config, "--target", "arm64", "--quant", "fp32", "--out", tmp_path / "out", "--no-emulation",
        "--quiet")
    m = manifest(tmp_path / "out" / "detector-nms" / "arm64-fp32")
    assert m["model"]["origin"] == "paddle3-dygraph" and m["paddle3"]["translated_ops"]["pd_op.matrix_nms"] == 1
    nms = m["model"]["nms"]
    assert nms["op"] == "matrix_nms" and nms["kept"] is False and nms["task"]["nms"] == "matrix", nms
    assert nms["cut"]["passed"] and nms["cut"]["match_percent"] == 100.0, nms["cut"]
    assert nms["paddle3_reference"]["max_abs"] <= nms["paddle3_reference"]["limit"]
    own = m["paddle3"]["task_metric"]["paddle3"]                          # Paddle 3's own matrix_nms rows
    metrics = m["parity"]["metrics"]
    assert own >= 60.0 and all(abs(metrics[k]["map50"] - own) <= SAME_BOXES for k in ("fp32 reference", "x86 twin .nb"))
    print({"paddle3": own, **{k: v["map50"] for k, v in metrics.items()}})
