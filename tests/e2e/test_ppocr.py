"""PP-OCR end to end on a small rendered subset: real X2Paddle, Paddle-Lite and ONNX Runtime on the
rapidocr_onnxruntime 1.4.4 models. Full-size figures: bench/bench_ocr.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from edgekit.lite.runtime import LiteRunner

from edgekit.examples.ppocr import make_data, models
from edgekit.tasks import find_truth

pytestmark = pytest.mark.e2e

EXAMPLE = Path(make_data.__file__).parent
SMALL = make_data.Counts(det_calib=1, det_eval=8, rec_calib=1, rec_eval=20, cls_calib=1, cls_eval=10)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ppocr-data")
    make_data.make_data(folder, seed=0, counts=SMALL)
    return folder


def _config(role: str, folder: Path, emulated: int, quantize: str = "") -> Path:
    """The example's `<role>.toml` as it is, but tier C on `emulated` samples and `quantize` lines added to its
    [quantize] table: tier C of every evaluation sample is what these tests spend most on (a loaded CI run: rec
    FP32 356 s, det FP32 193 s, rec INT8 784 s), and what they assert is the twin's, the search's and `edgekit ocr`'s.
    """
    text = (EXAMPLE / f"{role}.toml").read_text(encoding="utf-8")
    assert "\n[quantize]\n" in text
    text = text.replace("\n[quantize]\n", f"\n[quantize]\n{quantize}")
    if "\n[emulation]" in text:
        head, tail = text.split("\n[emulation]", 1)
        assert re.search(r"\nmax_samples = \d+", tail)
        text = head + "\n[emulation]" + re.sub(r"\nmax_samples = \d+", f"\nmax_samples = {emulated}", tail, count=1)
    else:
        text += f"\n[emulation]\nmax_samples = {emulated}\n"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{role}.toml"
    config.write_text(text, encoding="utf-8")
    return config


def _build_and_run(cli, role: str, data: Path, out: Path):
    """`edgekit build` fp32 for arm64 (tier C on 4 samples), then the bundle's x86 twin and ONNX Runtime on the
    evaluation set."""
    onnx_path = models.model_path(role)
    eval_file = data / f"{role}_eval.npz"
    cli("build", "-c", _config(role, out / "config", 4), "-m", onnx_path, "--eval", eval_file, "--quant", "fp32",
        "--out", out, "--quiet")
    bundle = next(out.glob("*/arm64-fp32"))
    return (bundle,) + _twin_and_reference(bundle, onnx_path, eval_file)


def _twin_and_reference(bundle: Path, onnx_path: Path, eval_file: Path):
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["parity"]["passed"]
    with np.load(eval_file) as loaded:
        x = loaded["x"]
    feeds = [i["name"] for i in manifest["model"]["inputs"]]
    twin = LiteRunner(bundle / manifest["host_twin"]["file"], feeds).run({feeds[0]: x})
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    reference = [np.concatenate([session.run(None, {"x": x[i:i + 1]})[0] for i in range(len(x))])]
    return find_truth(eval_file, len(x)), twin, reference, manifest


def test_rec_twin_reads_the_same_text_as_onnxruntime(cli, data, tmp_path):
    _, truth, twin, reference, manifest = _build_and_run(cli, "rec", data, tmp_path)
    task = truth.task
    texts = [r["text"] for r in task.postprocess(twin)]
    assert texts == [r["text"] for r in task.postprocess(reference)]
    scores = task.evaluate(twin, truth.values)
    assert scores["exact_match"] >= 95.0, (scores, list(zip(texts, truth.values)))     # measured 100 on these 20
    assert manifest["model"]["bytes"] > 10_000_000                                        # fp32 arm64: 11.2 MB


@pytest.fixture(scope="module")
def det_fp32(cli, data, tmp_path_factory):
    return _build_and_run(cli, "det", data, tmp_path_factory.mktemp("det-fp32"))


def test_det_hmean(det_fp32):
    _, truth, twin, reference, _ = det_fp32
    twin_scores = truth.task.evaluate(twin, truth.values)
    assert twin_scores["hmean"] >= 90.0, twin_scores                                      # measured 100 on these 8 pages
    assert twin_scores == truth.task.evaluate(reference, truth.values)


def test_cls_direction_accuracy(cli, data, tmp_path):
    _, truth, twin, reference, _ = _build_and_run(cli, "cls", data, tmp_path)
    assert truth.values == [0, 1] * 10
    assert list(twin[0].argmax(axis=1)) == list(reference[0].argmax(axis=1))
    accuracy = truth.task.evaluate(twin, truth.values)["accuracy"]
    assert accuracy >= 90.0                                                              # measured 100 on these 20 crops


REC_FULL = make_data.Counts(det_calib=1, det_eval=1, rec_calib=64, rec_eval=200, cls_calib=1, cls_eval=1)


@pytest.fixture(scope="module")
def rec_int8(cli, tmp_path_factory):
    data = tmp_path_factory.mktemp("ppocr-rec")
    make_data.make_data(data, seed=0, counts=REC_FULL)
    out = tmp_path_factory.mktemp("rec-int8")
    # tier C on 8 lines, not 64 (the ARM engine's text is test_ocr_on_an_int8_bundle's), and no cost step
    # (tests/e2e/test_cost_search)
    config = _config("rec", data / "config", 8, "cost_candidates = 0\n")
    cli("build", "-c", config, "-m", models.model_path("rec"), "--eval", data / "rec_eval.npz",
        "--calib", data / "rec_calib.npz", "--quant", "int8", "--out", out, "--quiet")
    return next(out.glob("*/arm64-int8"))


def test_rec_int8_search_keeps_exact_match_within_two_points(rec_int8):
    """The issue's figure on the full rendered set: whole-model avg PTQ loses ~10 exact-match points; the
    search (avg, then hist, both in rec.toml) is scored in exact match and keeps the one within the budget."""
    bundle = rec_int8
    manifest = json.loads((bundle / "manifest.json").read_text())
    metrics = manifest["task"]["metrics"]
    fp32, int8 = metrics["fp32 reference"]["exact_match"], metrics["int8 simulated"]["exact_match"]
    assert fp32 == 100.0 and fp32 - int8 <= 2.0, metrics                       # measured 100 -> 99.5
    search = manifest["quantization"]["search"]
    assert search["budget"] == {"metric": "exact_match_drop_points", "max_drop": 2.0, "max_changed": None}
    assert search["holds"]
    tried = {c["algo"]: c for c in search["candidates"] if c["purpose"] == "algorithm"}
    assert not tried["avg"]["holds"] and tried["avg"]["task"] <= 95.0, tried   # measured 90.0
    assert search["algo"] == "hist" and search["float_layers"] == []
    assert search["candidates"][-1]["task"] == int8                              # the search and tier B agree
    report = (bundle / "quant" / "quant_report.md").read_text()
    assert "exact_match" in report and "FP32 reference exact_match: 100.00 %" in report
    assert manifest["model"]["bytes"] < 4_500_000                                # measured 3.68 MB (fp32: 11.2 MB)


def test_ocr_on_an_int8_bundle_reports_the_arm_engines_text(cli, data, det_fp32, rec_int8, lite_arm):
    """`edgekit ocr` with a runtime configured runs the INT8 rec model.nb itself under emulation and says so; what it
    reads agrees with the FP32 twin's reading of the same page."""
    page, det = data / "det_example.png", det_fp32[0]
    read = {kind: json.loads(cli("ocr", page, "--det", det, "--rec", rec_int8, "--engine", kind, "--json").stdout)
            for kind in ("arm", "twin")}
    engine = read["arm"]["engines"]["rec"]
    assert engine["kind"] == "arm" and engine["precision"] == "int8" and engine["emulated"] is True, engine
    assert read["twin"]["engines"]["rec"]["kind"] == "twin" and "note" in read["twin"]["engines"]["rec"]
    arm, twin = ([line["text"] for line in read[k]["lines"]] for k in ("arm", "twin"))
    assert len(arm) == len(twin) >= 2, read
    same = sum(a == t for a, t in zip(arm, twin))
    assert same >= len(arm) - 1, (arm, twin)            # INT8 rec: 99.5 % exact match against FP32's 100 on 200 lines
