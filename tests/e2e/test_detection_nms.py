"""The detector example exported PaddleDetection-style, `multiclass_nms3` in the graph (edgekit/examples/detector/
with_nms.py): it builds to arm64 INT8, the manifest says whether the NMS op was kept or cut off and why, and the
bundle detects what Paddle's own NMS'd output detects on the evaluation scenes (mAP@0.5 within 0.5 points).

With an ARM runtime (EDGEKIT_LITE_ARM) the op is kept: opt converts it, the x86 twin and the ARM .nb under qemu give
Paddle's rows; without one tier C cannot check it and it is cut. `[model] nms = "cut"` cuts it on request."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from bundles import build_example_int8, check_named, example_config, leftovers, manifest, qemu_cell

from edgekit.examples import detector
from edgekit.examples.detector import train, with_nms
from edgekit.examples.detector import truth as example_truth
from edgekit.lite.nbfile import kernels
from edgekit.tasks import make_task
from edgekit.tasks.detection import nms_rows

pytestmark = pytest.mark.e2e

EXAMPLE = Path(detector.__file__).parent
SAMPLES = 16
SAME_BOXES = 0.5           # map50 points: the bundle against the source framework's own NMS'd boxes
INT8_BUDGET = 1.0          # map50 points (the [parity] default int8 gate)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, cli):
    return build_example_int8(cli, tmp_path_factory.mktemp("detector-nms"), EXAMPLE, "detector-nms", SAMPLES,
                              toml="with_nms.toml")


@pytest.fixture(scope="module")
def paddle_map(bundle):
    """mAP of the in-graph-NMS model as Paddle's dynamic graph runs it (multiclass_nms3's rows) on the same scenes."""
    return source_map(with_nms.create, json.loads((bundle / "task.json").read_text())["options"])


def source_map(factory, options: dict) -> dict:
    """The source framework's metrics: `factory`'s model with the example's weights in Paddle's dynamic graph, its
    own NMS rows scored with task options `options` on the first SAMPLES evaluation scenes."""
    import paddle

    paddle.disable_static()
    model = factory()
    model.set_state_dict(paddle.load(str(EXAMPLE / "detector.pdparams")))
    model.eval()
    x, truth = example_truth.evaluation_set(EXAMPLE / "data" / "eval", train.spec())
    with paddle.no_grad():
        rows, counts = model(paddle.to_tensor(x[:SAMPLES]))
    return make_task("detection", options).evaluate_detections(nms_rows(rows.numpy(), counts.numpy()), truth[:SAMPLES])


def test_the_nms_op_is_kept_when_lite_runs_it_on_arm_and_the_manifest_says_so(bundle):
    m = manifest(bundle)
    nms = m["model"]["nms"]
    measured = nms["measured"]
    assert nms["op"] == "multiclass_nms3" and nms["choice"] == "auto"
    assert measured["opt_arm"] == measured["opt_x86"] == "converted"        # opt 2.13 converts it for both
    assert measured["tier_a"]["agree"] and measured["tier_a"]["rows"] > 0   # the x86 twin gives Paddle's rows
    assert measured["tier_a"]["max_abs"] <= 1e-3                             # measured 3.2e-5 on 4 scenes
    if not os.environ.get("EDGEKIT_LITE_ARM"):   # no ARM runtime: tier C cannot check the op, so it is cut
        assert nms["kept"] is False and "tier C is off for this build" in nms["reason"]
        assert nms["cut"]["passed"] and m["model"]["outputs"] == nms["outputs"]
        return
    assert nms["kept"] is True and nms["reason"] == "opt converts it, tiers A and C give Paddle's rows"
    assert measured["tier_c"]["agree"] and measured["tier_c"]["rows"] == measured["tier_a"]["rows"]
    assert measured["tier_c"]["max_abs"] <= 1e-3                             # measured 6.9e-5 (ARM FP32 .nb, qemu)
    assert "multiclass_nms3" in m["model"]["source_ops"] and "cut" not in nms
    task = json.loads((bundle / "task.json").read_text())["options"]
    assert task["head"] == "nms" and (task["score_threshold"], task["max_detections"]) == (0.05, 100)   # the op's
    found = kernels(bundle / "model.nb")                                     # INT8 convolutions, a float NMS
    assert [k.precision for k in found if k.op == "multiclass_nms3"] == ["FP32"]
    assert any(k.op == "conv2d" and k.precision == "INT8" for k in found)
    golden = m["golden"]["outputs"]
    assert golden[0]["shape"][1:] == [6] and golden[1]["shape"] == [m["golden"]["count"]]   # rows + counts


def test_the_bundle_detects_what_paddles_own_nms_detects(bundle, paddle_map):
    metrics = manifest(bundle)["parity"]["metrics"]
    fp32, twin, int8 = metrics["fp32 reference"], metrics["x86 twin .nb"], metrics["int8 simulated"]
    assert paddle_map["map50"] >= 60.0                                       # measured 67.10 on 16 scenes
    assert abs(fp32["map50"] - paddle_map["map50"]) <= SAME_BOXES           # kept: 0 difference; cut: task.json's NMS
    assert abs(twin["map50"] - paddle_map["map50"]) <= SAME_BOXES           # tier A
    assert paddle_map["map50"] - int8["map50"] <= INT8_BUDGET
    arm = metrics.get("arm64 .nb (emulated ARM)")
    if os.environ.get("EDGEKIT_LITE_ARM"):
        assert arm is not None and abs(arm["map50"] - int8["map50"]) <= INT8_BUDGET   # tier C agrees with tier B
        assert paddle_map["map50"] - arm["map50"] <= INT8_BUDGET              # measured 68.83 (int8) vs 67.10
    assert np.isfinite(fp32["map"]) and abs(fp32["map"] - paddle_map["map"]) <= SAME_BOXES


@pytest.mark.skipif(not os.environ.get("EDGEKIT_LITE_ARM"), reason="the ARM engine needs EDGEKIT_LITE_ARM")
def test_edgekit_run_detects_on_an_image_with_the_kept_op(bundle, cli):
    image = EXAMPLE / "data" / "eval" / "eval000.png"
    arm = json.loads(cli("run", bundle, image, "--engine", "arm", "--json").output)
    twin = json.loads(cli("run", bundle, image, "--engine", "twin", "--json").output)
    assert arm["engine"]["kind"] == "arm" and arm["engine"]["precision"] == "int8" and twin["engine"]["kind"] == "twin"
    assert arm["boxes"] and twin["boxes"]
    assert all(0.05 < d["score"] <= 1 and d["label"] in ("circle", "square", "triangle") for d in arm["boxes"])
    assert all(-1 <= v <= 129 for d in arm["boxes"] for v in d["box"])        # image pixels (128x96, letterbox undone)


def test_the_golden_rows_replay_on_model_nb_and_on_the_qemu_device(bundle, cli, lite_arm, tmp_path):
    """A kept op's golden vectors are rows + counts: `parity --emulate` and the device suite run the runner's --rows
    mode and compare the rows image by image, and the qemu device counts their instructions too."""
    replay = cli("parity", bundle, "--emulate", "--lite-arm", lite_arm)
    assert "✓" in replay.output and "✗" not in replay.output, replay.output
    cell, _ = qemu_cell(cli, bundle, lite_arm, tmp_path / "device.json")
    assert cell["status"] == "passed", cell
    golden = [c for c in cell["checks"] if c["name"].startswith("golden cosine")]
    assert golden and all(c["status"] == "passed" for c in golden)          # measured 0.8535 (>= 0.84254)
    found = check_named(cell, "golden detections")                          # the rows post-processed on the host
    assert found["status"] == "passed", found
    print(found["message"])
    assert cell["instruction_counts"]["paths"]["default"]["per_inference"]["total"] > 0


def test_the_cut_override_cuts_the_op_for_the_bundles_nms(tmp_path, cli, paddle_map):
    """[model] nms = "cut": the graph is cut before the op without probing, task.json's NMS does what it did."""
    config = example_config(tmp_path, EXAMPLE, SAMPLES, "with_nms.toml",
                            lambda text: text.replace("[model]\n", "[model]\nnms = \"cut\"\n"))
    cli("build", "-c", config, "--target", "arm64", "--quant", "fp32", "--out", tmp_path / "out",
        "--no-emulation", "--quiet")
    m = manifest(tmp_path / "out" / "detector-nms" / "arm64-fp32")
    nms = m["model"]["nms"]
    assert nms["kept"] is False and nms["choice"] == "cut" and nms["reason"] == "cut on request ([model] nms = \"cut\")"
    assert nms["measured"] == {} and nms["cut"]["passed"] and nms["cut"]["match_percent"] >= 99.0
    assert "multiclass_nms3" not in m["model"]["source_ops"] and len(m["model"]["outputs"]) == 2   # boxes, scores
    task = json.loads((tmp_path / "out" / "detector-nms" / "arm64-fp32" / "task.json").read_text())["options"]
    assert task["head"] == "decoded" and task["activation"] == "none"
    assert (task["score_threshold"], task["nms_iou"], task["max_detections"]) == (0.05, 0.5, 100)   # the op's own
    fp32 = m["parity"]["metrics"]["fp32 reference"]
    assert abs(fp32["map50"] - paddle_map["map50"]) <= SAME_BOXES           # measured 67.10 both


def matrix_config(folder: Path) -> Path:
    """with_nms.toml on `create_matrix` (the graph ends in matrix_nms), SAMPLES evaluation scenes."""
    return example_config(folder, EXAMPLE, SAMPLES, "with_nms.toml",
                          lambda text: text.replace("with_nms:create", "with_nms:create_matrix"))


@pytest.fixture(scope="module")
def matrix_kept(tmp_path_factory, cli, lite_arm):
    """The matrix_nms export built to arm64 FP32 with tier C on: Lite's ARM matrix_nms is probed, and kept."""
    folder = tmp_path_factory.mktemp("detector-matrix")
    cli("build", "-c", matrix_config(folder), "--target", "arm64", "--quant", "fp32", "--out", folder / "out",
        "--lite-arm", lite_arm, "--quiet")
    return folder / "out" / "detector-nms" / "arm64-fp32"


def test_a_matrix_nms_graph_is_cut_for_the_bundles_matrix_nms(tmp_path, cli):
    """matrix_nms (PP-YOLOv2's decayed scores) without tier C: cut, task.json then runs the same matrix NMS (FP32;
    the decision and the cut are what differ from multiclass_nms3)."""
    cli("build", "-c", matrix_config(tmp_path), "--target", "arm64", "--quant", "fp32", "--out", tmp_path / "out",
        "--no-emulation", "--quiet")
    bundle = tmp_path / "out" / "detector-nms" / "arm64-fp32"
    m = manifest(bundle)
    nms = m["model"]["nms"]
    assert nms["op"] == "matrix_nms" and nms["kept"] is False and "tier C" in nms["reason"]
    assert nms["cut"]["judged_by"] == "rows" and nms["cut"]["match_percent"] == 100.0   # measured 1029 of 1029 rows
    task = json.loads((bundle / "task.json").read_text())["options"]
    assert task["nms"] == "matrix" and task["post_threshold"] == 0.05 and "nms_iou" not in task
    source = source_map(with_nms.create_matrix, task)
    metrics = m["parity"]["metrics"]
    assert abs(metrics["fp32 reference"]["map50"] - source["map50"]) <= SAME_BOXES          # measured 67.85 both
    assert metrics["x86 twin .nb"]["map50"] == metrics["fp32 reference"]["map50"]


def test_a_matrix_nms_graph_is_kept_when_tiers_a_and_c_give_paddles_rows(matrix_kept):
    """With tier C the matrix_nms op stays in the graph: opt converts it for ARM, and the x86 twin and the ARM .nb
    under qemu give Paddle's rows; the kept bundle's mAP is the source framework's, in tiers A and C."""
    m = manifest(matrix_kept)
    nms = m["model"]["nms"]
    measured = nms["measured"]
    assert nms["op"] == "matrix_nms" and nms["kept"] is True and "cut" not in nms
    assert nms["reason"] == "opt converts it, tiers A and C give Paddle's rows"
    assert measured["opt_arm"] == measured["opt_x86"] == "converted"
    assert measured["tier_a"]["agree"] and measured["tier_c"]["agree"] and measured["tier_a"]["rows"] > 0
    assert measured["tier_c"]["rows"] == measured["tier_a"]["rows"]          # measured 269 rows on 4 scenes
    assert max(measured["tier_a"]["max_abs"], measured["tier_c"]["max_abs"]) <= 1e-3   # measured 3.2e-5, 6.9e-5
    found = kernels(matrix_kept / "model.nb")
    assert [k.precision for k in found if k.op == "matrix_nms"] == ["FP32"]
    task = json.loads((matrix_kept / "task.json").read_text())["options"]
    assert task["head"] == "nms" and (task["score_threshold"], task["max_detections"]) == (0.05, 100)
    source = source_map(with_nms.create_matrix, task)
    metrics = m["parity"]["metrics"]
    fp32, twin, arm = (metrics[k] for k in ("fp32 reference", "x86 twin .nb", "arm64 .nb (emulated ARM)"))
    assert source["map50"] >= 60.0                                           # measured 67.85 on 16 scenes
    for tier in (fp32, twin, arm):
        assert abs(tier["map50"] - source["map50"]) <= SAME_BOXES, (tier, source)
    print({"source": source["map50"], "fp32": fp32["map50"], "twin": twin["map50"], "arm": arm["map50"]})


def test_a_kept_matrix_bundle_passes_the_device_suite_and_a_moved_golden_box_fails_it(matrix_kept, cli, lite_arm,
                                                                                       tmp_path):
    """FP32 rows on the qemu device: the golden detections check compares them image by image (classes in order,
    corners within 1 px). A golden reference whose first box was moved by 2 px (its checksum made to fit, as a
    rebuilt bundle would have) fails that check on that image, and the cell fails."""
    cell, _ = qemu_cell(cli, matrix_kept, lite_arm, tmp_path / "good.json")
    found = check_named(cell, "golden detections")
    assert cell["status"] == "passed" and found["status"] == "passed", cell
    assert cell["detections"]["mode"] == "fp32" and cell["detections"]["max_corner_px"] <= 1.0
    print(found["message"])

    moved = tmp_path / "moved"
    shutil.copytree(matrix_kept, moved)
    golden = manifest(moved)["golden"]
    rows_file = golden["outputs"][0]["file"]
    rows = np.load(moved / rows_file)
    rows[0, [2, 4]] += 2.0                                                   # image 0's best box, 2 px to the right
    rewrite(moved, rows_file, rows)
    cell, result = qemu_cell(cli, moved, lite_arm, tmp_path / "moved.json", ok=False)
    assert result.exit_code != 0
    found = check_named(cell, "golden detections")
    assert cell["status"] == "failed" and found["status"] == "failed", found
    assert cell["detections"]["failed_images"] == [0] and "failing images [0]" in found["message"], found
    assert 1.9 <= cell["detections"]["max_corner_px"] <= 2.1


def rewrite(bundle: Path, relative: str, array: np.ndarray) -> None:
    """Replace one file of `bundle` with `array` and list its new size and checksum in the manifest."""
    np.save(bundle / relative, array)
    data = (bundle / relative).read_bytes()
    m = manifest(bundle)
    m["files"][relative] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (bundle / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True), encoding="utf-8")


def test_an_nms_graph_without_detection_truth_is_refused_in_one_line(tmp_path, cli):
    config = example_config(tmp_path, EXAMPLE, toml="with_nms.toml",   # judged on the calibration scenes: no truth
                            edit=lambda text: text.replace(f'evaluation = "{EXAMPLE}/data/eval"', ""))
    result = cli("build", "-c", config, "--target", "arm64", "--quant", "fp32", "--out",
                 tmp_path / "out", "--no-emulation", ok=False)
    assert result.exit_code != 0
    assert "the program holds multiclass_nms3, and the evaluation data has no detection truth" in result.output
    assert leftovers(tmp_path / "out") == []
