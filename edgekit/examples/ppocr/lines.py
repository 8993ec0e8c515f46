"""Text lines in a TrueType face (DejaVu), short and long, for the variable-width measurements (issue 23), and
document pages of such lines (`page`, bench/bench_ocrv5_system.py).

make_data draws with OpenCV's Hershey fonts so its pixels depend only on the pinned OpenCV; these lines are
what a page scanned or rendered elsewhere looks like: DejaVu Sans, Serif or Sans Mono through Pillow's
FreeType, words and numbers, dark on light. `bench/bench_long_lines.py` and tests/e2e/test_long_lines.py
read them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgekit.core.errors import DataError

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")          # Debian's fonts-dejavu-core
FONTS = ("DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf")
WORDS = ("invoice", "total", "amount", "due", "confirmed", "by", "the", "manager", "order", "shipped", "to",
         "warehouse", "north", "station", "before", "noon", "river", "quick", "brown", "fox", "jumps", "over",
         "lazy", "dog", "report", "page", "price", "paid", "account", "number", "delivery", "address", "street",
         "market", "city", "phone", "office", "open", "daily", "from", "until", "please", "keep", "receipt",
         "Monday", "Friday", "March", "June", "Paris", "Berlin", "London", "Tokyo")


def fonts_missing() -> str | None:
    """Why the lines cannot be drawn here, or None."""
    missing = [f for f in FONTS if not (FONT_DIR / f).is_file()]
    return f"no {', '.join(missing)} in {FONT_DIR} (apt-get install fonts-dejavu-core)" if missing else None


def texts(rng: np.random.Generator, count: int, low: int, high: int) -> list[str]:
    """`count` lines of words and numbers, low <= len(text) <= high."""
    out = []
    while len(out) < count:
        words: list[str] = []
        while len(" ".join(words)) < low:
            words.append(str(rng.integers(10, 9999)) if rng.random() < 0.15 else str(rng.choice(WORDS)))
        line = " ".join(words)
        if len(line) <= high:
            out.append(line)
    return out


def render(rng: np.random.Generator, text: str) -> np.ndarray:
    """A BGR uint8 crop of one line in a DejaVu face (24-36 px), with a margin, dark on light."""
    from PIL import Image, ImageDraw, ImageFont

    why = fonts_missing()
    if why:
        raise DataError(f"cannot draw DejaVu lines: {why}", "install the fonts, or use make_data's Hershey lines")
    font = ImageFont.truetype(str(FONT_DIR / FONTS[int(rng.integers(len(FONTS)))]), int(rng.integers(24, 37)))
    x0, y0, x1, y1 = font.getbbox(text)
    mx, my = int(rng.integers(4, 14)), int(rng.integers(3, 9))
    paper = tuple(int(v) for v in rng.integers(205, 256, 3))
    ink = tuple(int(v) for v in rng.integers(0, 60, 3))
    image = Image.new("RGB", (x1 - x0 + 2 * mx, y1 - y0 + 2 * my), paper)
    ImageDraw.Draw(image).text((mx - x0, my - y0), text, font=font, fill=ink)
    return np.ascontiguousarray(np.asarray(image)[:, :, ::-1])


def page(rng: np.random.Generator, size: tuple[int, int] = (1300, 1000), count: tuple[int, int] = (10, 16)
         ) -> tuple[np.ndarray, list[str], list[list[float]]]:
    """A BGR document page (height x width; the default is an A4 scan at about 120 dpi) with `count` lines of
    words and numbers in DejaVu faces (20-32 px), left-aligned in one column, dark on light. Returns the page,
    the lines' texts and their ink boxes [x0, y0, x1, y1) in page pixels, top to bottom."""
    from PIL import Image, ImageDraw, ImageFont

    why = fonts_missing()
    if why:
        raise DataError(f"cannot draw DejaVu pages: {why}", "install the fonts, or use make_data's Hershey pages")
    height, width = size
    paper = tuple(int(v) for v in rng.integers(225, 256, 3))
    image = Image.new("RGB", (width, height), paper)
    draw = ImageDraw.Draw(image)
    margin = int(rng.integers(width // 16, width // 8))
    top = int(rng.integers(height // 20, height // 10))
    lines, boxes = [], []
    for _ in range(int(rng.integers(count[0], count[1] + 1))):
        font = ImageFont.truetype(str(FONT_DIR / FONTS[int(rng.integers(len(FONTS)))]), int(rng.integers(20, 33)))
        text = texts(rng, 1, int(rng.integers(8, 40)), 56)[0]
        x0, y0, x1, y1 = font.getbbox(text)
        while x1 - x0 > width - 2 * margin and " " in text:      # too wide for the column: drop the last word
            text = text.rsplit(" ", 1)[0]
            x0, y0, x1, y1 = font.getbbox(text)
        if top + (y1 - y0) > height - height // 20:
            break
        left = margin + int(rng.integers(0, width // 10))
        ink = tuple(int(v) for v in rng.integers(0, 70, 3))
        draw.text((left - x0, top - y0), text, font=font, fill=ink)
        lines.append(text)
        boxes.append([float(left), float(top), float(left + x1 - x0), float(top + y1 - y0)])
        top += int((y1 - y0) * rng.uniform(1.8, 3.4))
    return np.ascontiguousarray(np.asarray(image)[:, :, ::-1]), lines, boxes
