"""The apps' self-test on a dynamic-width bundle (issue 23): golden.json's group at max_width (1280) is replayed by the
app core through the C API on model.nb under qemu, each sample at its own shape, and judged with the golden
tolerances like the main 48x320 group. Measured: cosine 0.99999999976, max abs 1.37e-4 at width 1280 (FP32; limit 1e-3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgekit.examples.ppocr import lines, make_data, models

pytestmark = pytest.mark.e2e


def test_the_selftest_replays_the_golden_group_at_max_width(edgekit_cli, emulation, run_native, tmp_path):
    why = lines.fonts_missing()
    if why:
        pytest.fail(why)
    make_data.make_data(tmp_path / "data", seed=0, counts=make_data.Counts(det_calib=1, det_eval=1, rec_calib=1,
                                                                            rec_eval=2, cls_calib=1, cls_eval=1))
    edgekit_cli(["build", "-c", Path(make_data.__file__).parent / "rec_dynamic.toml", "-m", models.model_path("rec"), "--eval",
                 tmp_path / "data" / "rec_eval.npz", "--quant", "fp32", "--target", "arm64", "--no-emulation",
                 "--out", tmp_path / "out", "--quiet"])
    bundle = tmp_path / "out" / "ppocrv4-rec-dynamic" / "arm64-fp32"
    edgekit_cli(["package", bundle, "--platform", "linux", "--out", tmp_path / "assets"])
    runtime, build = emulation("aarch64")
    done = run_native("aarch64", runtime, build, [build.root / "edgekit-capi", "selftest", tmp_path / "assets"])
    (report,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and report["ok"], done.stderr[-2000:]
    (model,) = report["models"]
    vectors = model["vectors"]
    assert vectors["ok"] and vectors["samples"] == 2
    (wide,) = vectors["widths"]
    assert (wide["width"], wide["samples"], wide["ok"]) == (1280, 1, True), wide
    (out,) = wide["outputs"]
    assert out["cosine"] >= wide["min_cosine"] and out["max_abs"] <= wide["max_abs"], out
    print(f"selftest at width 1280: cosine {out['cosine']:.11f}, max abs {out['max_abs']:.2e}")
