"""PP-OCR tasks: text detection (DB), text recognition (CTC) and the text direction classifier.

Post-processing follows PaddleOCR's (`ppocr/postprocess/db_postprocess.py`,
`rec_postprocess.py`, `cls_postprocess.py`); detection is edgekit/tasks/db.py (rotated
quads: contours, minimum-area rectangles, box score, Clipper unclip). Metrics follow
PaddleOCR's `DetMetric` (one-to-one matching at polygon IoU >= 0.5, corpus-level
precision/recall; truth boxes are [x0, y0, x1, y1] rectangles or 4-corner quads) and
`RecMetric` (spaces ignored; character accuracy = 1 - edit distance /
max(len(prediction), len(truth))), in percent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.core.errors import ConfigError, DataError

from .base import Task, TaskKind, check_count, check_options, first_output, number_option, percent
from .db import SCORE_MODES, DbParams, Quad, db_quads, quad_bounds

Box = tuple[float, float, float, float]          # x0, y0, x1, y1 in pixels (x1, y1 exclusive)
OCR_MEAN = 0.5                                   # all three PP-OCR models: RGB / 255, (x - 0.5) / 0.5
OCR_STD = 0.5


# --- preprocessing shared with the apps and `edgekit run` -----------------------------------------

def page_spec(height: int, width: int) -> PreprocessSpec:
    """The detector's input: the page stretched to the model's size, RGB, (x / 255 - 0.5) / 0.5, CHW."""
    return PreprocessSpec(color="rgb", resize=(height, width), scale=1.0 / 255.0, mean=(OCR_MEAN,), std=(OCR_STD,))


def line_spec(height: int, width: int) -> PreprocessSpec:
    """Recogniser/classifier input: a text line resized to `height` keeping its aspect ratio (at most `width`),
    normalised like a page, padded on the right with zeros (PaddleOCR's resize_norm_img)."""
    return PreprocessSpec(color="rgb", resize=(height, width), resize_mode="fit_height", scale=1.0 / 255.0,
                          mean=(OCR_MEAN,), std=(OCR_STD,), pad_value=0.0)


def normalize(image_bgr: np.ndarray) -> np.ndarray:
    """A page already at the model's size: uint8 BGR HxWx3 -> the detector's float32 CHW input."""
    return page_spec(*image_bgr.shape[:2]).apply(image_bgr)


def line_tensor(image_bgr: np.ndarray, height: int, width: int) -> np.ndarray:
    return line_spec(height, width).apply(image_bgr)


# --- detection ------------------------------------------------------------------------------------

def db_boxes(prob: np.ndarray, thresh: float = 0.3, box_thresh: float = 0.6, unclip_ratio: float = 1.5,
             min_size: int = 3, max_candidates: int = 1000) -> list[tuple[Quad, float]]:
    """DB post-process of one probability map (HxW): (quad, score) per text region, in map pixels."""
    return db_quads(prob, DbParams(thresh, box_thresh, unclip_ratio, min_size, max_candidates))


def as_polygon(box: Sequence) -> np.ndarray:
    """A truth or found box as 4 corners: [x0, y0, x1, y1] rectangles become their corners."""
    if len(box) == 4 and all(isinstance(v, (int, float, np.number)) for v in box):
        x0, y0, x1, y1 = (float(v) for v in box)
        return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float64)
    return np.asarray(box, np.float64).reshape(-1, 2)


def iou(a: Sequence, b: Sequence) -> float:
    """Polygon IoU of two boxes (rectangles or quads), as PaddleOCR's DetMetric computes it with shapely."""
    from shapely.geometry import Polygon

    qa, qb = as_polygon(a), as_polygon(b)
    if (qa[:, 0].max() <= qb[:, 0].min() or qb[:, 0].max() <= qa[:, 0].min() or
            qa[:, 1].max() <= qb[:, 1].min() or qb[:, 1].max() <= qa[:, 1].min()):
        return 0.0                                 # bounding boxes apart: skip shapely
    pa, pb = Polygon(qa), Polygon(qb)
    if not pa.is_valid or not pb.is_valid:
        pa, pb = pa.buffer(0), pb.buffer(0)
    inter = pa.intersection(pb).area
    union = pa.area + pb.area - inter
    return float(inter / union) if union > 0 else 0.0


def matched_boxes(found: Sequence[Sequence[float]], truth: Sequence[Sequence[float]], threshold: float = 0.5) -> int:
    """One-to-one matches at IoU >= threshold, best pairs first (ties: lower indices first)."""
    pairs = sorted(((iou(f, t), i, j) for i, f in enumerate(found) for j, t in enumerate(truth)),
                   key=lambda p: (-p[0], p[1], p[2]))
    used_f, used_t, matches = set(), set(), 0
    for value, i, j in pairs:
        if value < threshold:
            break
        if i not in used_f and j not in used_t:
            used_f.add(i)
            used_t.add(j)
            matches += 1
    return matches


def detection_scores(found: Sequence[Sequence[Sequence[float]]], truth: Sequence[Sequence[Sequence[float]]],
                     threshold: float = 0.5) -> dict[str, float]:
    """Corpus-level precision, recall and their harmonic mean, in percent."""
    matches = sum(matched_boxes(f, t, threshold) for f, t in zip(found, truth))
    n_found, n_truth = sum(len(f) for f in found), sum(len(t) for t in truth)
    precision = matches / n_found if n_found else 0.0
    recall = matches / n_truth if n_truth else 0.0
    hmean = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": percent(precision), "recall": percent(recall), "hmean": percent(hmean)}


@dataclass(frozen=True)
class OcrDet(Task):
    thresh: float = 0.3
    box_thresh: float = 0.6
    unclip_ratio: float = 1.5
    min_size: int = 3
    match_iou: float = 0.5                # a found box matches a true box at IoU >= this (evaluation only)
    max_candidates: int = 1000            # contours looked at per map, in cv2.findContours' order
    score_mode: str = "fast"              # box score: mean inside the rectangle (fast) or the contour (slow)

    kind = TaskKind.ocr_det
    primary = "hmean"
    # a DB probability map, binarised at `thresh` (0.3) and scored against `box_thresh` (0.6): Lite's ARM kernels give
    # the public PP-OCRv5 mobile det's 960x960 map 2.3e-4 from Paddle 3 under qemu (x86 twin 6.9e-5), same boxes
    twin_max_abs = 1e-3

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "OcrDet":
        check_options(cls.kind, options, ("thresh", "box_thresh", "unclip_ratio", "min_size", "max_candidates",
                                          "score_mode", "match_iou"))
        score_mode = options.get("score_mode", "fast")
        if score_mode not in SCORE_MODES:
            raise ConfigError(f"task ocr_det option score_mode = {score_mode!r} is not one of "
                              f"{', '.join(SCORE_MODES)}", 'write score_mode = "fast" (PaddleOCR\'s default)')
        return cls(number_option(cls.kind, options, "thresh", 0.3, 0.0, 1.0),
                   number_option(cls.kind, options, "box_thresh", 0.6, 0.0, 1.0),
                   number_option(cls.kind, options, "unclip_ratio", 1.5, 0.0, 10.0),
                   int(number_option(cls.kind, options, "min_size", 3, 0, 1000)),
                   number_option(cls.kind, options, "match_iou", 0.5, 0.0, 1.0),
                   int(number_option(cls.kind, options, "max_candidates", 1000, 1, 100000)), score_mode)

    def options(self) -> dict:
        return {"thresh": self.thresh, "box_thresh": self.box_thresh, "unclip_ratio": self.unclip_ratio,
                "min_size": self.min_size, "max_candidates": self.max_candidates, "score_mode": self.score_mode,
                "match_iou": self.match_iou}

    def boxes(self, outputs: Sequence[np.ndarray]) -> list[list[tuple[Quad, float]]]:
        maps = first_output(self.kind, outputs, 4, "probability maps [N, 1, H, W]")
        params = DbParams(self.thresh, self.box_thresh, self.unclip_ratio, self.min_size, self.max_candidates,
                          self.score_mode)
        return [db_quads(m[0], params) for m in maps]

    def evaluate(self, outputs: Sequence[np.ndarray], truth: Sequence) -> dict[str, float]:
        found = self.predictions(outputs)
        check_count(self.kind, len(found), truth)
        return detection_scores(found, truth, self.match_iou)

    def postprocess(self, outputs: Sequence[np.ndarray]) -> list[list[dict]]:
        # the box as numpy float64 values, as before quads (predict._scaled rounds them with numpy's round)
        return [[{"box": [np.float64(v) for v in quad_bounds(quad)], "quad": [list(p) for p in quad], "score": score} for quad, score in image]
                for image in self.boxes(outputs)]

    def predictions(self, outputs: Sequence[np.ndarray]) -> list[list[Quad]]:
        return [[quad for quad, _ in image] for image in self.boxes(outputs)]

    def truth_from_json(self, raw: Any) -> list[list]:
        def number(v: Any) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        def box_ok(b: Any) -> bool:
            if isinstance(b, list) and len(b) == 4 and all(number(v) for v in b):
                return b[0] < b[2] and b[1] < b[3]
            return (isinstance(b, list) and len(b) == 4 and all(isinstance(p, list) and len(p) == 2 and
                                                                 all(number(v) for v in p) for p in b))

        if not isinstance(raw, list) or not all(isinstance(image, list) and all(box_ok(b) for b in image) for image in raw):
            raise DataError("ocr_det truth is not a list (per image) of boxes: [x0, y0, x1, y1] rectangles or "
                            "[[x, y], [x, y], [x, y], [x, y]] quads",
                            "write one list of boxes per image, with x0 < x1 and y0 < y1 for rectangles")
        return [[tuple(float(v) for v in b) if number(b[0]) else tuple((float(p[0]), float(p[1])) for p in b)
                 for b in image] for image in raw]

    def truth_to_json(self, truth: Sequence) -> list:
        return [[[float(v) for v in b] if np.isscalar(b[0]) else [[float(p[0]), float(p[1])] for p in b]
                 for b in image] for image in truth]


# --- recognition ------------------------------------------------------------------------------------

def token_problem(token: Any) -> str | None:
    """Why `token` cannot be a CTC dictionary entry, or None. An entry is any non-empty string: one character,
    or several code points the model emits as one class (PP-OCRv5's flags such as '🇩🇪', ZWJ emoji, ligatures).
    Line breaks are refused: dictionary files hold one token a line."""
    if not isinstance(token, str):
        return f"a {type(token).__name__}, not a string"
    if not token:
        return "empty"
    if "\n" in token or "\r" in token:
        return "holds a line break"
    return None


def read_dictionary(path: Path) -> tuple[str, ...]:
    """A PaddleOCR character dictionary: the `character` metadata of an exported rec .onnx, or a text file
    (ppocr_keys_v1.txt), one token a line (a token may be several code points, e.g. a flag). Without the CTC
    blank and the appended space."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".onnx":
            import onnx

            metadata = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
            if "character" not in metadata:
                raise ConfigError(f"{path} has no `character` metadata (keys: {', '.join(sorted(metadata)) or 'none'})",
                                  "give the recognition model's dictionary file (one token a line) instead")
            text = metadata["character"]
        else:
            text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the character dictionary {path}: {exc.strerror}", "check the path") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"character dictionary {path} is not UTF-8 text (byte {exc.start})", "save it as UTF-8") from exc
    tokens = tuple(line.rstrip("\r") for line in text.split("\n"))
    tokens = tokens[:-1] if tokens and tokens[-1] == "" else tokens
    if not tokens:
        raise ConfigError(f"character dictionary {path} is empty", "use one token a line")
    for number, token in enumerate(tokens, 1):
        problem = token_problem(token)
        if problem:
            raise ConfigError(f"character dictionary {path} line {number} is {token!r}: {problem}",
                              "use one token (a character, or a multi-code-point symbol such as a flag) a line")
    return tokens


def ctc_greedy_decode(probs: np.ndarray, characters: Sequence[str]) -> tuple[str, float]:
    """Argmax per step, repeats collapsed, blanks (index 0) dropped. Confidence: mean max probability of
    the kept steps (0 for an empty result), as PaddleOCR reports it."""
    index = probs.argmax(axis=-1)
    keep = index != 0
    keep[1:] &= index[1:] != index[:-1]
    text = "".join(characters[i] for i in index[keep])
    confidence = float(probs.max(axis=-1)[keep].mean()) if keep.any() else 0.0
    return text, confidence


def edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def recognition_scores(predicted: Sequence[str], truth: Sequence[str], ignore_space: bool = True) -> dict[str, float]:
    if ignore_space:
        predicted = ["".join(p.split()) for p in predicted]
        truth = ["".join(t.split()) for t in truth]
    if not truth:
        return {"exact_match": 0.0, "char_accuracy": 0.0}
    exact = sum(p == t for p, t in zip(predicted, truth)) / len(truth)
    distance = sum(edit_distance(p, t) / max(len(p), len(t), 1) for p, t in zip(predicted, truth)) / len(truth)
    return {"exact_match": percent(exact), "char_accuracy": percent(1.0 - distance)}


@dataclass(frozen=True)
class OcrRec(Task):
    dictionary: tuple[str, ...]           # class i (i >= 1) is token dictionary[i - 1]; class 0 is the CTC blank
    use_space_char: bool = True           # PP-OCR appends " " as the last class
    ignore_space: bool = True             # metrics compare texts without whitespace (PaddleOCR's RecMetric)

    kind = TaskKind.ocr_rec
    primary = "exact_match"
    # softmax over a dictionary of thousands of tokens: Lite's x86 and ARM kernels differ from Paddle by 7.4e-4 on
    # PP-OCRv4 rec (6,625 classes) and 1.21e-4 / 1.27e-4 on PP-OCRv5 mobile rec (18,385) on 320-wide lines; on lines
    # cut from pages (up to ~1,300 px wide at height 48, so 4x the time steps) all padded to the widest, PP-OCRv5
    # rec's x86 twin differed by 2.55e-3 and its ARM .nb by 1.70e-3 (100 lines; cosine 1.0, the same texts); run in
    # width groups (`run_lines`) the same 100 lines differ by 5.7e-4 on the twin and 1.3e-5 on the ARM .nb (8 lines)
    twin_max_abs = 5e-3

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "OcrRec":
        check_options(cls.kind, options, ("dictionary", "use_space_char", "ignore_space"))
        source = options.get("dictionary")
        if isinstance(source, (str, Path)):
            dictionary = read_dictionary(Path(source))
        elif isinstance(source, (list, tuple)) and source:
            bad = next(((i, c, token_problem(c)) for i, c in enumerate(source) if token_problem(c)), None)
            if bad:
                raise ConfigError(f"task ocr_rec option dictionary[{bad[0]}] is {bad[1]!r}: {bad[2]}",
                                  "give each dictionary entry as a non-empty string without line breaks")
            dictionary = tuple(source)
        else:
            raise ConfigError("task ocr_rec needs option dictionary: a file (.txt, or the rec .onnx with `character` "
                              "metadata) or a list of tokens (strings)",
                              'e.g. dictionary = "ppocr_keys_v1.txt"')
        flags = {}
        for key in ("use_space_char", "ignore_space"):
            if key in options and not isinstance(options[key], bool):
                raise ConfigError(f"task ocr_rec option {key} = {options[key]!r} is not true/false", f"write {key} = true")
            flags[key] = options.get(key, True)
        return cls(dictionary, **flags)

    def options(self) -> dict:
        return {"dictionary": list(self.dictionary), "use_space_char": self.use_space_char,
                "ignore_space": self.ignore_space}

    @property
    def characters(self) -> tuple[str, ...]:
        return ("",) + self.dictionary + ((" ",) if self.use_space_char else ())

    def decode(self, outputs: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        probs = first_output(self.kind, outputs, 3, "CTC scores [N, steps, classes]")
        characters = self.characters
        if probs.shape[2] != len(characters):
            raise DataError(f"the model scores {probs.shape[2]} classes, the dictionary gives {len(characters)} "
                            f"(blank + {len(self.dictionary)} characters{' + space' if self.use_space_char else ''})",
                            "use the dictionary the recognition model was trained with (use_space_char as trained)")
        return [ctc_greedy_decode(p, characters) for p in probs]

    def evaluate(self, outputs: Sequence[np.ndarray], truth: Sequence) -> dict[str, float]:
        texts = self.predictions(outputs)
        check_count(self.kind, len(texts), truth)
        return recognition_scores(texts, truth, self.ignore_space)

    def postprocess(self, outputs: Sequence[np.ndarray]) -> list[dict]:
        return [{"text": text, "confidence": round(conf, 6)} for text, conf in self.decode(outputs)]

    def predictions(self, outputs: Sequence[np.ndarray]) -> list[str]:
        return [text for text, _ in self.decode(outputs)]

    def truth_from_json(self, raw: Any) -> list[str]:
        if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
            raise DataError("ocr_rec truth is not a list of strings", "write the text of each line as a string")
        known = {c for token in self.characters for c in token}    # the code points some token emits
        missing = sorted({c for t in raw for c in t if c not in known and not (self.ignore_space and c.isspace())})
        if missing:
            raise DataError(f"ocr_rec truth uses characters the dictionary lacks: {''.join(missing[:20])!r}",
                            "the model can never output them: render text from the dictionary's characters")
        return list(raw)


# --- direction classifier -------------------------------------------------------------------------

@dataclass(frozen=True)
class OcrCls(Task):
    labels: tuple[str, ...] = ("0", "180")     # class 0 upright, class 1 rotated by 180 degrees

    kind = TaskKind.ocr_cls
    primary = "accuracy"

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "OcrCls":
        check_options(cls.kind, options, ("labels",))
        labels = options.get("labels", ["0", "180"])
        if not isinstance(labels, (list, tuple)) or len(labels) < 2 or not all(isinstance(n, str) for n in labels):
            raise ConfigError("task ocr_cls option labels is not a list of at least two names", 'e.g. labels = ["0", "180"]')
        return cls(tuple(labels))

    def options(self) -> dict:
        return {"labels": list(self.labels)}

    def _scores(self, outputs: Sequence[np.ndarray]) -> np.ndarray:
        scores = first_output(self.kind, outputs, 2, f"direction scores [N, {len(self.labels)}]")
        if scores.shape[1] != len(self.labels):
            raise DataError(f"the model scores {scores.shape[1]} directions, the task names {len(self.labels)}",
                            "give one label per class (task option labels)")
        return scores

    def evaluate(self, outputs: Sequence[np.ndarray], truth: Sequence) -> dict[str, float]:
        predicted = np.asarray(self.predictions(outputs), np.int64)
        check_count(self.kind, len(predicted), truth)
        return {"accuracy": percent(np.mean(predicted == np.asarray(truth, np.int64))) if len(truth) else 0.0}

    def predictions(self, outputs: Sequence[np.ndarray]) -> list[int]:
        return [int(i) for i in self._scores(outputs).argmax(axis=1)]

    def postprocess(self, outputs: Sequence[np.ndarray]) -> list[dict]:
        scores = self._scores(outputs)
        return [{"label": self.labels[int(row.argmax())], "score": round(float(row.max()), 6)} for row in scores]

    def truth_from_json(self, raw: Any) -> list[int]:
        n = len(self.labels)
        if not isinstance(raw, list) or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < n for v in raw):
            raise DataError(f"ocr_cls truth is not a list of class indices 0..{n - 1}", "write 0 for upright, 1 for rotated")
        return list(raw)
