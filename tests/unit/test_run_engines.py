"""Which engine `edgekit run` / `edgekit ocr` use, how the result names it, and how OCR batches crops (pure logic)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner
from untrusted_bundles import document, make_bundle

from edgekit.cli import app
from edgekit.contracts.manifest import Manifest
from edgekit.contracts.settings import EmulationConfig
from edgekit.core.errors import BundleError, ConfigError, EmulationUnavailable
from edgekit.consumers.predict import BundleModel, Engine, EngineKind, Engines, choose_engine, ocr_system, parse_engine
from edgekit.core.tables import Precision, Target
from edgekit.tasks import TaskKind



@pytest.mark.parametrize("precision", list(Precision))
@pytest.mark.parametrize("runtime", [False, True])
def test_the_default_is_the_arm_model_for_a_reduced_precision_with_a_runtime(precision, runtime):
    want = EngineKind.arm if precision is not Precision.fp32 and runtime else EngineKind.twin
    assert choose_engine(precision, Target.arm64, None, runtime) is want
    assert choose_engine(precision, Target.armv7, None, runtime) is want


@pytest.mark.parametrize("precision", list(Precision))
@pytest.mark.parametrize("runtime", [False, True])
@pytest.mark.parametrize("flag", list(EngineKind))
def test_the_flag_wins_over_the_default(precision, runtime, flag):
    assert choose_engine(precision, Target.arm64, flag, runtime) is flag


def test_an_x86_bundle_has_no_arm_model():
    assert choose_engine(Precision.fp32, Target.x86, None, True) is EngineKind.twin
    with pytest.raises(BundleError, match="x86 bundle has no ARM model"):
        choose_engine(Precision.fp32, Target.x86, EngineKind.arm, True)


def test_an_unknown_engine_is_a_config_error():
    assert parse_engine(None) is None and parse_engine("arm") is EngineKind.arm
    with pytest.raises(ConfigError, match="engine 'gpu' is unknown"):
        parse_engine("gpu")


def _manifest(precision: str) -> Manifest:
    m = document(precision=precision)
    m["host_twin"].update(precision="fp32")
    return Manifest.of(m, Path("manifest.json"))


def test_the_twin_of_an_int8_bundle_says_the_int8_model_was_not_run():
    twin = Engine.of(_manifest("int8"), EngineKind.twin)
    found = twin.describe()
    assert {k: found[k] for k in ("kind", "model", "precision", "target", "emulated")} == {
        "kind": "twin", "model": "host/model_x86.nb", "precision": "fp32", "target": "x86", "emulated": False}
    assert "int8 model.nb itself was not run" in found["note"] and "--engine arm" in found["note"]
    assert "NOT run" in twin.line()
    fp32 = Engine.of(_manifest("fp32"), EngineKind.twin)
    assert "note" not in fp32.describe() and "NOT" not in fp32.line()


def test_the_arm_engine_names_model_nb_its_abi_and_cpu_profile():
    arm = Engine.of(_manifest("int8-weight"), EngineKind.arm, "a55")
    assert arm.describe() == {"kind": "arm", "model": "model.nb", "precision": "int8-weight", "target": "arm64",
                              "emulated": True, "cpu": "a55", "abi": "aarch64"}
    assert arm.line("rec").startswith("engine rec: arm64 int8-weight model.nb") and "aarch64" in arm.line()


def test_asking_for_arm_without_a_runtime_is_tier_cs_error():
    with pytest.raises(EmulationUnavailable, match="no Paddle-Lite ARM Linux runtime is configured") as caught:
        Engines(EngineKind.arm, EmulationConfig()).emulator("aarch64")
    assert caught.value.exit_code == 13 and "EDGEKIT_LITE_ARM" in caught.value.hint


def _int8_bundle(tmp_path: Path, target: str = "arm64") -> Path:
    def edit(m):
        m["model"]["precision"] = "int8" if target != "x86" else "fp32"
        m["model"]["target"] = target
    return make_bundle(tmp_path, target=target, edit=edit)


def test_cli_run_with_engine_arm_and_no_runtime_is_one_line_exit_13(tmp_path, monkeypatch):
    monkeypatch.delenv("EDGEKIT_LITE_ARM", raising=False)
    monkeypatch.delenv("EDGEKIT_DEBUG", raising=False)
    image = tmp_path / "x.png"
    import cv2

    cv2.imwrite(str(image), np.zeros((8, 8), np.uint8))
    result = CliRunner().invoke(app, ["run", str(_int8_bundle(tmp_path)), str(image), "--engine", "arm"])
    assert result.exit_code == 13, result.output
    assert "error: no Paddle-Lite ARM Linux runtime is configured" in result.output
    assert "fix: set EDGEKIT_LITE_ARM" in result.output and "Traceback" not in result.output
    x86 = CliRunner().invoke(app, ["run", str(_int8_bundle(tmp_path / "x", "x86")), str(image), "--engine", "arm"])
    assert x86.exit_code == 10 and "no ARM model" in x86.output and "Traceback" not in x86.output


class _CountingRunner:
    """Stands in for an engine: records each call's batch; scores a class by the tensor's mean."""

    def __init__(self, outputs):
        self.calls, self.outputs = [], outputs

    def run(self, inputs):
        (batch,) = inputs.values()
        self.calls.append(batch.shape)
        return self.outputs(batch)


def _model(tmp_path, name, kind, outputs):
    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.tasks import make_task

    options = {"ocr_det": {}, "ocr_rec": {"dictionary": ["a", "b"]}, "ocr_cls": {"labels": ["0", "180"]}}[kind]
    size = [32, 32] if kind == "ocr_det" else [8, 16]
    spec = PreprocessSpec.from_mapping({"color": "bgr", "resize": size, "resize_mode": "stretch", "scale": 1 / 255,
                                        "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "layout": "NCHW"})
    runner = _CountingRunner(outputs)
    model = BundleModel(tmp_path / name, spec, make_task(kind, options), "x", runner, (),
                        Engine.of(_manifest("int8"), EngineKind.arm, "default"))
    return model, runner


def test_ocr_batches_every_crop_of_a_model_into_one_engine_call(tmp_path):
    def det_map(batch):      # two text blobs on a 32x32 map
        found = np.zeros((len(batch), 1, 32, 32), np.float32)
        found[:, :, 4:10, 4:28] = found[:, :, 18:26, 6:20] = 1.0
        return [found]

    def cls_scores(batch):
        return [np.tile(np.array([[0.05, 0.95]], np.float32), (len(batch), 1))]

    def rec_logits(batch):   # CTC over blank, a, b, space: reads "ab" for every crop
        steps = np.zeros((len(batch), 4, 4), np.float32)
        steps[:, 0, 1] = steps[:, 1, 0] = steps[:, 2, 2] = steps[:, 3, 0] = 1.0
        return [steps]

    det, det_runner = _model(tmp_path, "det", "ocr_det", det_map)
    rec, rec_runner = _model(tmp_path, "rec", "ocr_rec", rec_logits)
    cls, cls_runner = _model(tmp_path, "cls", "ocr_cls", cls_scores)
    assert det.task.kind is TaskKind.ocr_det
    page = np.full((64, 64, 3), 255, np.uint8)
    lines = ocr_system(page, det, rec, cls)
    assert len(lines) == 2 and [line["text"] for line in lines] == ["ab", "ab"]
    assert all(line["angle"] == "180" for line in lines)
    assert list(lines[0]) == ["box", "quad", "det_score", "angle", "angle_score", "text", "confidence"]
    assert det_runner.calls == [(1, 3, 32, 32)]
    assert cls_runner.calls == [(2, 3, 8, 16)] and rec_runner.calls == [(2, 3, 8, 16)]   # one call for both crops
    assert json.dumps(lines)   # what the CLI prints


def _dark_text(batch):
    """A stand-in detector: text probability 1 where the tensor is dark (the first channel below 0.5)."""
    return [(batch[:, :1] < 0.5).astype(np.float32)]


@pytest.mark.parametrize("mode", ["letterbox", "stretch"])
def test_detector_boxes_land_on_the_page_through_its_resize(tmp_path, mode):
    """A 200x100 page (taller than wide) with a dark bar at x 20..80, y 90..110, fed at 64x64: letterboxed
    (PaddleOCR 3.x keeps the page's aspect ratio; the page fills columns 16..47, the border is white) or stretched.
    Either way the box and quad come back on the bar within 1.5 tensor pixels (4.7 page pixels: DB's rectangle runs
    through the centres of the outer pixels); the letterboxed bar mapped as a stretch would land 15 px off."""
    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.tasks import make_task

    spec = PreprocessSpec.from_mapping({"color": "bgr", "resize": [64, 64], "resize_mode": mode, "pad_value": 1.0,
                                        "scale": 1 / 255, "mean": [0.0], "std": [1.0], "layout": "NCHW"})
    det = BundleModel(tmp_path / "det", spec, make_task("ocr_det", {"unclip_ratio": 0.0, "box_thresh": 0.5}), "x",
                      _CountingRunner(_dark_text))
    page = np.full((200, 100, 3), 255, np.uint8)
    page[90:110, 20:80] = 0
    (found,) = det.predict(page)
    assert np.abs(np.array(found["box"]) - [20, 90, 80, 110]).max() <= 1.5 * 3.125, found
    xs, ys = [p[0] for p in found["quad"]], [p[1] for p in found["quad"]]
    assert [min(xs), min(ys), max(xs), max(ys)] == found["box"]
    if mode == "letterbox":
        raw = det.task.postprocess(det.run_batch(det.tensor(page)[None]))[0][0]      # in tensor pixels
        as_stretch = np.array(raw["box"][0::2]) * 100 / 64                         # x0, x1 scaled as if stretched
        assert np.abs(as_stretch - [20, 80]).min() > 10


def test_a_detector_whose_resize_cannot_be_undone_is_refused(tmp_path):
    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.tasks import make_task

    spec = PreprocessSpec.from_mapping({"color": "bgr", "resize": [64, 64], "resize_mode": "fit_height"})
    det = BundleModel(tmp_path / "det", spec, make_task("ocr_det", {}), "x", _CountingRunner(_dark_text))
    with pytest.raises(BundleError, match="preprocessing is fit_height, so its boxes cannot be mapped back"):
        det.predict(np.zeros((100, 200, 3), np.uint8))


def test_predict_many_keeps_the_order_across_tensor_shapes(tmp_path):
    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.tasks import make_task

    runner = _CountingRunner(lambda batch: [np.stack([[b.mean(), 1 - b.mean()] for b in batch]).astype(np.float32)])
    spec = PreprocessSpec.from_mapping({"color": "gray", "scale": 1 / 255, "mean": [0.0], "std": [1.0],
                                        "layout": "NCHW"})          # no resize: the tensor keeps the image's size
    model = BundleModel(tmp_path, spec, make_task("classification", {"labels": ["white", "black"]}), "x", runner)
    images = [np.full((4, 4), 255, np.uint8), np.zeros((6, 6), np.uint8), np.full((4, 4), 0, np.uint8)]
    found = model.predict_many(images)
    assert [r["label"] for r in found] == ["white", "black", "black"]
    assert sorted(runner.calls) == [(1, 1, 6, 6), (2, 1, 4, 4)]
    assert model.predict(images[0]) == found[0]
