"""Render PP-OCR calibration and evaluation sets whose ground truth is known because we draw it.

    python -m edgekit.examples.ppocr.make_data OUT [--seed 0] [--rec-eval 200 ...]

Writes, for det, rec and cls, `<role>_calib.npz` and `<role>_eval.npz` (preprocessed
float32 inputs in an array named `x`, the ONNX input name) and next to each a
`<role>_<set>.truth.json` (edgekit.tasks truth file), one preview PNG per role (`<role>_example.png`)
and the first 8 evaluation samples as PNG files (`<role>_images/`: pages for det, lines for rec and cls).

Text is drawn with OpenCV's Hershey fonts (part of the pinned opencv-python, so
the pixels do not depend on installed system fonts or Pillow's FreeType), dark on
light, large and clean: the point is to measure what conversion and quantisation
cost, so the FP32 models must score high. The alphabet leaves out glyphs the
Hershey faces draw alike (0/O/o, 1/l/I, and case pairs such as c/C, s/S, x/X),
which would otherwise count as errors no model can avoid. Everything is a pure
function of the seed; files are written with fixed zip timestamps so reruns give
identical bytes.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgekit.core import atomic
from edgekit.core.errors import DataError, EdgekitError
from edgekit.tasks import OcrCls, OcrDet, OcrRec, write_truth
from edgekit.tasks.ocr import line_tensor, normalize

from . import models

ALPHABET = "23456789abdefghmnqrtyABDEFGHMNQRTY"
DET_SIZE = (320, 640)                 # H, W of the det set (the det build's --input)
REC_SIZE = (48, 320)
SAMPLE_IMAGES = 8                     # eval samples also written as PNG (<role>_images/)
CLS_SIZE = (48, 192)


@dataclass(frozen=True)
class Counts:
    det_calib: int = 32
    det_eval: int = 64
    rec_calib: int = 64
    rec_eval: int = 200
    cls_calib: int = 32               # lines; each is stored upright and rotated by 180 degrees
    cls_eval: int = 100


def _faces() -> tuple[int, ...]:
    import cv2

    return (cv2.FONT_HERSHEY_SIMPLEX, cv2.FONT_HERSHEY_DUPLEX, cv2.FONT_HERSHEY_COMPLEX, cv2.FONT_HERSHEY_TRIPLEX)


def random_text(rng: np.random.Generator, low: int, high: int) -> str:
    return "".join(rng.choice(list(ALPHABET), int(rng.integers(low, high + 1))))


def ink_mask(text: str, face: int, scale: float, thickness: int) -> np.ndarray:
    """The text's anti-aliased coverage (uint8, 255 = ink) cropped to its ink."""
    import cv2

    (w, h), base = cv2.getTextSize(text, face, scale, thickness)
    pad = thickness + 4
    mask = np.zeros((h + base + 2 * pad, w + 2 * pad), np.uint8)
    cv2.putText(mask, text, (pad, pad + h), face, scale, 255, thickness, cv2.LINE_AA)
    ys, xs = np.nonzero(mask)
    return mask[ys.min():ys.max() + 1, xs.min():xs.max() + 1]


def text_style(rng: np.random.Generator, text_height: float) -> dict:
    """Font face, scale for about `text_height` px of cap height, stroke, ink and paper colours."""
    face = _faces()[int(rng.integers(len(_faces())))]
    scale = text_height / 22.0                   # Hershey cap height is ~22 px at scale 1
    return {"face": face, "scale": scale, "thickness": max(1, round(scale * 1.6)),
            "ink": rng.integers(0, 70, 3).astype(np.float32),
            "paper": rng.integers(200, 256, 3).astype(np.float32)}


def paint(canvas: np.ndarray, mask: np.ndarray, top: int, left: int, ink: np.ndarray) -> None:
    alpha = (mask.astype(np.float32) / 255.0)[:, :, None]
    region = canvas[top:top + mask.shape[0], left:left + mask.shape[1]]
    region[:] = region * (1.0 - alpha) + ink * alpha


def render_line(rng: np.random.Generator, text: str) -> np.ndarray:
    """A BGR uint8 crop of one text line with a margin, as a detector's box would cut it."""
    style = text_style(rng, float(rng.uniform(26, 40)))
    mask = ink_mask(text, style["face"], style["scale"], style["thickness"])
    margin_y = round(mask.shape[0] * rng.uniform(0.12, 0.3))
    margin_x = round(mask.shape[0] * rng.uniform(0.1, 0.4))
    canvas = np.empty((mask.shape[0] + 2 * margin_y, mask.shape[1] + 2 * margin_x, 3), np.float32)
    canvas[:] = style["paper"]
    paint(canvas, mask, margin_y, margin_x, style["ink"])
    return np.clip(np.round(canvas), 0, 255).astype(np.uint8)


def render_page(rng: np.random.Generator, size: tuple[int, int] = DET_SIZE,
                lines: tuple[int, int] = (2, 5)) -> tuple[np.ndarray, list[list[float]]]:
    """A BGR page with a few non-overlapping text lines; the truth is each line's ink box [x0, y0, x1, y1)."""
    height, width = size
    paper = rng.integers(200, 256, 3).astype(np.float32)
    shade = np.linspace(0.0, float(rng.uniform(-25, 0)), width, dtype=np.float32)[None, :, None]
    canvas = np.clip(np.broadcast_to(paper, (height, width, 3)) + shade, 0, 255).astype(np.float32)
    boxes: list[list[float]] = []
    wanted = int(rng.integers(lines[0], lines[1] + 1))
    for _ in range(40 * wanted):                    # placement attempts; pages may end up with fewer lines
        if len(boxes) == wanted:
            break
        style = text_style(rng, float(rng.uniform(16, 34)))
        mask = ink_mask(random_text(rng, 3, 10), style["face"], style["scale"], style["thickness"])
        h, w = mask.shape
        if w > width - 16 or h > height - 16:
            continue
        top, left = int(rng.integers(8, height - h - 8)), int(rng.integers(8, width - w - 8))
        box = [float(left), float(top), float(left + w), float(top + h)]
        gap = 0.6 * h                               # lines closer than this would merge into one region
        if any(box[0] < b[2] + gap and b[0] < box[2] + gap and box[1] < b[3] + gap and b[1] < box[3] + gap for b in boxes):
            continue
        paint(canvas, mask, top, left, style["ink"])
        boxes.append(box)
    return np.clip(np.round(canvas), 0, 255).astype(np.uint8), boxes


def det_set(seed: int, count: int) -> tuple[np.ndarray, list, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    pages = [render_page(rng) for _ in range(count)]
    return np.stack([normalize(page) for page, _ in pages]), [boxes for _, boxes in pages], [p for p, _ in pages]


def rec_set(seed: int, count: int) -> tuple[np.ndarray, list[str], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    texts = [random_text(rng, 4, 10) for _ in range(count)]
    crops = [render_line(rng, text) for text in texts]
    return np.stack([line_tensor(c, *REC_SIZE) for c in crops]), texts, crops


def cls_set(seed: int, count: int) -> tuple[np.ndarray, list[int], list[np.ndarray]]:
    """`count` lines, each upright (label 0) followed by its 180-degree rotation (label 1)."""
    import cv2

    rng = np.random.default_rng(seed)
    crops = [render_line(rng, random_text(rng, 3, 8)) for _ in range(count)]
    tensors, labels, images = [], [], []
    for crop in crops:
        for label, image in ((0, crop), (1, cv2.rotate(crop, cv2.ROTATE_180))):
            tensors.append(line_tensor(image, *CLS_SIZE))
            labels.append(label)
            images.append(image)
    return np.stack(tensors), labels, images


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez_compressed with fixed member timestamps: same arrays, same bytes."""
    with atomic.replacing(path) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, buffer.getvalue())


def make_data(out: Path, seed: int = 0, counts: Counts = Counts()) -> dict:
    """Render every set into `out`; returns {file name: sample count}."""
    import cv2

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dictionary = models.rec_dictionary()
    missing = sorted(set(ALPHABET) - set(dictionary))
    if missing:
        raise DataError(f"the rec model's dictionary lacks {''.join(missing)!r}", "render only characters it knows")
    tasks = {"det": OcrDet(), "rec": OcrRec(dictionary), "cls": OcrCls()}
    makers = {"det": det_set, "rec": rec_set, "cls": cls_set}
    meta = {"generator": "edgekit.examples.ppocr.make_data", "alphabet": ALPHABET, "opencv": cv2.__version__,
            "rapidocr_onnxruntime": models.installed_version()}
    written = {}
    for offset, split in enumerate(("calib", "eval")):
        for index, role in enumerate(("det", "rec", "cls")):
            set_seed = seed * 1000 + offset * 10 + index     # calibration and evaluation never share a drawing
            inputs, truth, images = makers[role](set_seed, getattr(counts, f"{role}_{split}"))
            name = f"{role}_{split}"
            save_npz(out / f"{name}.npz", {models.INPUT_NAME: inputs})
            write_truth(out / f"{name}.truth.json", tasks[role], truth, dict(meta, seed=set_seed, set=name))
            if split == "eval":
                cv2.imwrite(str(out / f"{role}_example.png"), images[0])
                # the first eval samples as images: golden image cases (`build --images`) and the apps' demos
                (out / f"{role}_images").mkdir(exist_ok=True)
                for i, image in enumerate(images[:SAMPLE_IMAGES]):
                    cv2.imwrite(str(out / f"{role}_images" / f"{i:04d}.png"), image)
            written[f"{name}.npz"] = len(inputs)
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="folder for the .npz, .truth.json and preview files")
    parser.add_argument("--seed", type=int, default=0)
    for field_name, default in Counts().__dict__.items():
        parser.add_argument("--" + field_name.replace("_", "-"), type=int, default=default,
                            help=f"samples (cls: lines, each stored twice) (default {default})")
    args = parser.parse_args(argv)
    counts = Counts(**{k: getattr(args, k) for k in Counts().__dict__})
    if min(counts.__dict__.values()) < 1:
        parser.error("every count must be >= 1")
    try:
        written = make_data(args.out.expanduser().absolute(), args.seed, counts)
    except EdgekitError as error:
        print("\n".join(error.lines()), file=sys.stderr)
        return error.exit_code
    print(json.dumps({"out": str(args.out), "files": written}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
