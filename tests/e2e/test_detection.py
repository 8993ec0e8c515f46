"""The detector example through the real toolchain: arm64 INT8 with mAP in tiers A, B (and C with an ARM runtime),
on 16 of its evaluation scenes; `edgekit run` on a letterboxed 128x96 scene gives boxes in that image's pixels."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bundles import build_example_int8, check_named, example_config, manifest, qemu_cell

from edgekit.examples import detector
from edgekit.examples.detector import train
from edgekit.tasks import coco

pytestmark = pytest.mark.e2e

EXAMPLE = Path(detector.__file__).parent
SAMPLES = 16
INT8_BUDGET = 1.0            # map50 points (the [parity] default int8 gate)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, cli):
    return build_example_int8(cli, tmp_path_factory.mktemp("detector"), EXAMPLE, "detector", SAMPLES)


def test_map_in_every_tier(bundle):
    m = manifest(bundle)
    assert m["task"]["kind"] == "detection" and m["task"]["primary"] == "map50"
    metrics = m["parity"]["metrics"]
    fp32, twin, int8 = metrics["fp32 reference"], metrics["x86 twin .nb"], metrics["int8 simulated"]
    assert set(fp32) == {"map50", "map", "map_small", "map_medium", "map_large", "f1"}
    assert fp32["map50"] >= 60.0 and fp32["map"] >= 40.0          # measured 70.9 / 50.5 on all 48 scenes
    assert twin == fp32                                            # tier A: FP32 kernels, the same boxes
    assert fp32["map50"] - int8["map50"] <= INT8_BUDGET
    arm = metrics.get("arm64 .nb (emulated ARM)")
    if os.environ.get("EDGEKIT_LITE_ARM"):
        assert arm is not None and abs(arm["map50"] - int8["map50"]) <= INT8_BUDGET   # tier C agrees with tier B
    task = json.loads((bundle / "task.json").read_text())
    assert task["kind"] == "detection" and task["options"]["strides"] == [8, 16] and task["options"]["reg_max"] == 7


def test_quant_report_shows_map_by_object_size(bundle):
    """quant/quant_report.md: FP32 and the chosen INT8 candidate in mAP@0.5, mAP and the three size buckets, the
    same figures the parity tiers measured (the search scores on the same samples as tier B)."""
    m = manifest(bundle)
    fp32, int8 = m["parity"]["metrics"]["fp32 reference"], m["parity"]["metrics"]["int8 simulated"]
    text = (bundle / "quant" / "quant_report.md").read_text(encoding="utf-8")
    keys = ("map50", "map", "map_small", "map_medium", "map_large")
    assert "| model | mAP@0.5 | mAP@0.5:0.95 | small | medium | large |" in text
    assert "| FP32 reference | " + " | ".join(f"{fp32[k]:.2f}" for k in keys) + " |" in text
    chosen = next(line for line in text.splitlines() if "(chosen)**" in line)
    values = [float(cell.split(" (")[0]) for cell in chosen.strip("|").split("|")[1:]]
    assert values == [round(int8[k], 2) for k in keys], (chosen, int8)


def test_run_gives_boxes_in_image_pixels(bundle, cli):
    index = 7                                                      # a 128x96 scene: letterboxed to 96x96
    scene = train.scene_of(train.EVAL_SEED + index)
    assert scene.image.shape[:2] == (96, 128)
    result = cli("run", bundle, EXAMPLE / "data" / "eval" / f"eval{index:03d}.png", "--engine", "twin").stdout
    found = json.loads(result.strip().splitlines()[-1])
    found = found["boxes"] if isinstance(found, dict) else found
    boxes = np.array([r["box"] for r in found if r["score"] >= 0.5]).reshape(-1, 4)
    assert len(boxes) and boxes[:, [0, 2]].max() <= 128 and boxes[:, [1, 3]].max() <= 96 and boxes.min() >= 0
    best = coco.iou_matrix(boxes, scene.boxes).max(axis=0)
    assert (best >= 0.75).sum() >= 3, best                         # undone letterbox: boxes sit on the shapes


def test_outputs_that_do_not_fit_the_task_are_refused(tmp_path, cli):
    config = example_config(tmp_path, EXAMPLE, edit=lambda text: text + "\n[task]\nstrides = [8, 16, 32]\n")
    result = cli("build", "-c", config, "--target", "arm64", "--out", tmp_path / "out",
                 "--no-emulation", ok=False)
    assert result.exit_code != 0
    assert "expects 6 outputs (3 class maps, then 3 box maps, for strides [8, 16, 32]), the model gives 4" in result.output
    assert not (tmp_path / "out" / "detector").exists()


def test_the_device_suite_matches_the_decoded_heads_detections_per_golden_image(bundle, cli, lite_arm, tmp_path):
    """The INT8 bundle on the qemu device: its golden outputs are raw heads, which the suite decodes and NMSes with
    task.json on the host and matches to the reference's detections per image (class + IoU, tolerances.detections)."""
    cell, _ = qemu_cell(cli, bundle, lite_arm, tmp_path / "device.json")
    found = check_named(cell, "golden detections")
    assert cell["status"] == "passed" and found["status"] == "passed", cell
    figures = cell["detections"]
    assert figures["mode"] == "matched" and figures["images"] == manifest(bundle)["golden"]["count"]
    assert figures["min_recall"] >= figures["floors"]["min_recall"] and figures["expected"] > 0
    print(found["message"])
