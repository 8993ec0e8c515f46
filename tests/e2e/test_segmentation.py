"""The segmenter example through the real toolchain: arm64 INT8 with mIoU in tiers A, B (and C with an ARM runtime)
on 12 of its evaluation scenes; `edgekit run` gives a class map of the image's own size."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bundles import build_example_int8, check_named, manifest, qemu_cell

from edgekit.examples import segmenter
from edgekit.examples.segmenter import train
from edgekit.tasks.segmentation import decode_rle

pytestmark = pytest.mark.e2e

EXAMPLE = Path(segmenter.__file__).parent
SAMPLES = 12
INT8_BUDGET = 1.0            # miou points (the [parity] default int8 gate)
MIN_MIOU = 65.0              # measured 77.9 on all 32 scenes


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, cli):
    return build_example_int8(cli, tmp_path_factory.mktemp("segmenter"), EXAMPLE, "segmenter", SAMPLES)


def test_miou_in_every_tier(bundle):
    m = manifest(bundle)
    assert m["task"]["kind"] == "segmentation" and m["task"]["primary"] == "miou"
    metrics = m["parity"]["metrics"]
    fp32, twin, int8 = metrics["fp32 reference"], metrics["x86 twin .nb"], metrics["int8 simulated"]
    assert fp32["miou"] >= MIN_MIOU and fp32["pixel_accuracy"] >= 90.0
    assert abs(twin["miou"] - fp32["miou"]) <= 0.01                # tier A: FP32 kernels, the same pixels
    assert fp32["miou"] - int8["miou"] <= INT8_BUDGET
    arm = metrics.get("arm64 .nb (emulated ARM)")
    if os.environ.get("EDGEKIT_LITE_ARM"):
        assert arm is not None and abs(arm["miou"] - int8["miou"]) <= INT8_BUDGET


def test_run_maps_classes_onto_the_image(bundle, cli):
    index = 2
    scene = train.scene_of(train.EVAL_SEED + index)
    result = cli("run", bundle, EXAMPLE / "data" / "eval" / f"eval{index:03d}.png", "--engine", "twin").stdout
    found = json.loads(result.strip().splitlines()[-1])
    mask = decode_rle(found)
    assert mask.shape == scene.mask.shape and found["size"] == list(scene.mask.shape)
    assert (mask == scene.mask).mean() >= 0.9
    assert set(found["classes"]) <= set(train.LABELS) and abs(sum(found["classes"].values()) - 100.0) < 0.01


def test_the_device_suite_compares_the_golden_class_maps_pixel_by_pixel(bundle, cli, lite_arm, tmp_path):
    """The INT8 bundle on the qemu device: its golden score maps become class maps on the host (task.json) and each
    image must agree with the reference's map on at least golden.json's `tolerances.masks.min_agreement` of its
    pixels, the floor the build measured on tier C's worst image less 1 point."""
    floors = manifest(bundle)["golden"]["tolerances"]["masks"]
    assert floors["measured"]["tier"] == "C" and 0 < floors["min_agreement"] <= floors["measured"]["min_agreement"] - 1
    cell, _ = qemu_cell(cli, bundle, lite_arm, tmp_path / "device.json")
    found = check_named(cell, "golden masks")
    assert cell["status"] == "passed" and found["status"] == "passed", cell
    figures = cell["masks"]
    assert figures["mode"] == "agreement" and figures["images"] == manifest(bundle)["golden"]["count"]
    assert figures["min_agreement"] >= floors["min_agreement"] and figures["pixels"] > 0
    print(found["message"], floors["min_agreement"], floors["measured"])
