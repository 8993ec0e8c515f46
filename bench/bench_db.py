"""DB post-processing: edgekit's old axis-aligned boxes vs the PaddleOCR-grade quads vs rapidocr's, as JSON.

    ./run python bench/bench_db.py [--pages 24] [--seed 0]

Pages are rendered with edgekit.examples.ppocr.make_data's text drawing (Hershey fonts, known ink
boxes) in three sets: upright lines of 16-34 px (make_data's own pages), small text (6-11 px cap
height) and lines rotated by -40..40 degrees (truth: the rotated ink rectangle's corners). The real
PP-OCRv4 mobile det (the .onnx shipped with rapidocr_onnxruntime) runs in ONNX Runtime at 320x640;
the same probability maps then go through

- "old": the connected-component boxes grown by a rectangle unclip (edgekit before issue 23),
- "new": edgekit.tasks.db.db_quads (contours, minimum-area rectangles, Clipper unclip),
- "rapidocr": rapidocr_onnxruntime's DBPostProcess (PaddleOCR's code as that package ships it),

all with thresh 0.3, box_thresh 0.6, unclip_ratio 1.5, min_size 3 (OcrDet's defaults), scored by
PaddleOCR's DetMetric rule (one-to-one matches at polygon IoU >= 0.5). Also: how many of the new boxes
equal rapidocr's within 1 px per corner, and the post-processing time per map. Takes ~1 minute.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

THRESH, BOX_THRESH, UNCLIP, MIN_SIZE = 0.3, 0.6, 1.5, 3


def old_db_boxes(prob: np.ndarray) -> list:
    """edgekit's DB boxes before issue 23: 8-connected components, a rectangle grown by area*ratio/perimeter."""
    import cv2

    height, width = prob.shape
    _, _, stats, _ = cv2.connectedComponentsWithStats((prob > THRESH).astype(np.uint8), connectivity=8)
    boxes = []
    for x, y, w, h, _ in stats[1:1001]:
        if min(w, h) < MIN_SIZE or float(prob[y:y + h, x:x + w].mean()) < BOX_THRESH:
            continue
        grow = w * h * UNCLIP / (2.0 * (w + h))
        x0, y0 = max(0.0, x - grow), max(0.0, y - grow)
        x1, y1 = min(float(width), x + w + grow), min(float(height), y + h + grow)
        if min(x1 - x0, y1 - y0) >= MIN_SIZE + 2:
            boxes.append((x0, y0, x1, y1))
    return boxes


def rotated_page(rng, size, heights, angles, lines=(2, 5)):
    """A page of text lines drawn at an angle; truth: each line's ink rectangle, rotated (4 corners)."""
    import cv2

    from edgekit.examples.ppocr.make_data import ink_mask, paint, text_style, random_text

    height, width = size
    canvas = np.empty((height, width, 3), np.float32)
    canvas[:] = rng.integers(200, 256, 3).astype(np.float32)
    taken = np.zeros((height, width), bool)
    quads = []
    wanted = int(rng.integers(lines[0], lines[1] + 1))
    for _ in range(40 * wanted):
        if len(quads) == wanted:
            break
        style = text_style(rng, float(rng.uniform(*heights)))
        mask = ink_mask(random_text(rng, 3, 10), style["face"], style["scale"], style["thickness"])
        h, w = mask.shape
        angle = float(rng.uniform(*angles))
        diag = int(math.ceil(math.hypot(h, w))) + 4
        if diag > min(height, width) - 8:
            continue
        turn = cv2.getRotationMatrix2D((diag / 2, diag / 2), angle, 1.0)
        turn[:, 2] += [(diag - w) / 2, (diag - h) / 2]
        tile = cv2.warpAffine(mask, turn, (diag, diag), flags=cv2.INTER_LINEAR)
        corners = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float64) @ turn[:, :2].T + turn[:, 2]
        top, left = int(rng.integers(4, height - diag - 4)), int(rng.integers(4, width - diag - 4))
        gap = max(4, int(0.6 * h))
        ink = tile > 0
        region = np.zeros((height, width), bool)
        region[top:top + diag, left:left + diag] = ink
        grown = cv2.dilate(region.astype(np.uint8), np.ones((2 * gap + 1, 2 * gap + 1), np.uint8)) > 0
        if (grown & taken).any():
            continue
        taken |= region
        paint(canvas, tile, top, left, style["ink"])
        quads.append([[float(x + left), float(y + top)] for x, y in corners])
    return np.clip(np.round(canvas), 0, 255).astype(np.uint8), quads


def page_sets(pages: int, seed: int) -> dict:
    from edgekit.examples.ppocr.make_data import DET_SIZE, render_page

    rng = np.random.default_rng(seed)
    return {
        "upright 16-34 px": [render_page(rng) for _ in range(pages)],
        "small 6-11 px": [rotated_page(rng, DET_SIZE, (6, 11), (0, 0), (4, 9)) for _ in range(pages)],
        "rotated -40..40 deg": [rotated_page(rng, DET_SIZE, (16, 30), (-40, 40)) for _ in range(pages)],
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import onnxruntime as ort
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DBPostProcess

    from edgekit.examples.ppocr import models
    from edgekit.tasks.db import DbParams, db_quads
    from edgekit.tasks.ocr import detection_scores, normalize

    session = ort.InferenceSession(str(models.model_path("det")), providers=["CPUExecutionProvider"])
    reference = DBPostProcess(thresh=THRESH, box_thresh=BOX_THRESH, unclip_ratio=UNCLIP)
    params = DbParams(THRESH, BOX_THRESH, UNCLIP, MIN_SIZE)
    report: dict = {"model": models.model_path("det").name, "pages_per_set": args.pages, "sets": {}}
    for name, pages in page_sets(args.pages, args.seed).items():
        truth = [boxes for _, boxes in pages]
        maps = [session.run(None, {"x": normalize(page)[None]})[0][0, 0] for page, _ in pages]
        found: dict = {"old": [], "new": [], "rapidocr": []}
        seconds = {key: 0.0 for key in found}
        same, total = 0, 0
        for prob in maps:
            height, width = prob.shape
            start = time.perf_counter()
            found["old"].append(old_db_boxes(prob))
            seconds["old"] += time.perf_counter() - start
            start = time.perf_counter()
            ours = [q for q, _ in db_quads(prob, params)]
            seconds["new"] += time.perf_counter() - start
            start = time.perf_counter()
            theirs, _ = reference.boxes_from_bitmap(prob, prob > THRESH, width, height)
            seconds["rapidocr"] += time.perf_counter() - start
            found["new"].append(ours)
            found["rapidocr"].append([b.tolist() for b in theirs])
            total += len(theirs)
            same += sum(any(np.abs(b - np.array(q)).max() <= 1 for q in ours) for b in theirs)
        report["sets"][name] = {
            "lines": sum(len(t) for t in truth),
            **{key: detection_scores(boxes, truth) for key, boxes in found.items()},
            "new_equals_rapidocr_within_1px": f"{same}/{total}",
            "ms_per_map": {key: round(1000 * s / len(maps), 2) for key, s in seconds.items()},
        }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
