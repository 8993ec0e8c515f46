"""DB (Differentiable Binarization) text boxes as PaddleOCR's `DBPostProcess` finds them.

    bitmap = map > thresh
    contours of the bitmap (OpenCV's Suzuki border following, every border: RETR_LIST, CHAIN_APPROX_SIMPLE)
    per contour, at most max_candidates:
        minimum-area rectangle of its convex hull      -> skip if its short side < min_size
        score = mean of the map inside that rectangle   -> skip if < box_thresh
                (score_mode "slow": inside the contour)
        unclip: Clipper offset by area * unclip_ratio / perimeter (round joins)
        minimum-area rectangle of the grown polygon     -> skip if its short side < min_size + 2
        corners scaled to the output size, rounded, clipped to [0, size]

Everything after the contours is computed here in float64 or integers with plain
operations (no OpenCV), so native/core/src/db_*.cc repeats it to the last bit: the hull
(monotone chain on integer points), the rectangle (each hull edge as a base, first minimum
wins), the pixels cv2.fillPoly would set for the score (8-connected edge lines plus 16.16
fixed-point spans; equal to cv2's on random polygons, tests/unit) and the offset through the
same Clipper (pyclipper 1.4 = Clipper 6.4.2, as Debian's libpolyclipping). The C++ side also
follows borders itself, as OpenCV does. The results match rapidocr's copy of PaddleOCR's code
within one pixel per corner except where cv2's float32 rectangle differs (tests/unit).

Quads are 4 integer corners: top-left, top-right, bottom-right, bottom-left (PaddleOCR's
`get_mini_boxes` order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

Quad = tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]]
SCORE_MODES = ("fast", "slow")


@dataclass(frozen=True)
class DbParams:
    thresh: float = 0.3
    box_thresh: float = 0.6
    unclip_ratio: float = 1.5
    min_size: int = 3
    max_candidates: int = 1000
    score_mode: str = "fast"             # fast: mean inside the rectangle; slow: mean inside the contour itself


def find_contours(bitmap: np.ndarray) -> list[np.ndarray]:
    """Every border of a 0/1 uint8 bitmap as OpenCV lists it: (n, 2) int32 (x, y) points each."""
    import cv2

    found = cv2.findContours(bitmap, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    return [c.reshape(-1, 2).astype(np.int64) for c in found[-2]]


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Andrew's monotone chain on integer points: the hull's corners from the smallest (x, y), collinear points
    dropped (the turning direction does not matter to min_area_rect). One or two points come back deduplicated."""
    pts = sorted(set((int(x), int(y)) for x, y in points))
    if len(pts) <= 2:
        return np.asarray(pts, np.int64).reshape(-1, 2)

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.asarray(lower[:-1] + upper[:-1], np.int64)


def min_area_rect(points: np.ndarray) -> tuple[np.ndarray, float]:
    """The minimum-area rectangle around integer points: its 4 corners (float64, in PaddleOCR's order) and its
    short side. Each hull edge is tried as a side (rotating calipers); the first smallest area wins."""
    hull = convex_hull(points).astype(np.float64)
    if len(hull) == 1:
        return order_corners(np.repeat(hull, 4, axis=0)), 0.0
    edges = np.roll(hull, -1, axis=0) - hull if len(hull) > 2 else (hull[1:] - hull[:1])
    best = None
    for i, (dx, dy) in enumerate(edges):
        length = math.sqrt(dx * dx + dy * dy)
        ux, uy = dx / length, dy / length
        rx, ry = hull[:, 0] - hull[i, 0], hull[:, 1] - hull[i, 1]
        s = rx * ux + ry * uy
        t = ry * ux - rx * uy
        s0, s1, t0, t1 = s.min(), s.max(), t.min(), t.max()
        area = (s1 - s0) * (t1 - t0)
        if best is None or area < best[0]:
            best = (area, i, ux, uy, s0, s1, t0, t1)
    _, i, ux, uy, s0, s1, t0, t1 = best
    ox, oy = hull[i]
    corners = np.array([[ox + ux * s - uy * t, oy + uy * s + ux * t] for s, t in ((s0, t0), (s1, t0), (s1, t1), (s0, t1))])
    return order_corners(corners), float(min(s1 - s0, t1 - t0))


def order_corners(corners: np.ndarray) -> np.ndarray:
    """PaddleOCR's get_mini_boxes order: sorted by x (stable); of the two left ones the upper is first (top-left),
    the lower last; of the two right ones the upper second, the lower third."""
    pts = sorted(corners.tolist(), key=lambda p: p[0])
    tl, bl = (pts[0], pts[1]) if pts[1][1] > pts[0][1] else (pts[1], pts[0])
    tr, br = (pts[2], pts[3]) if pts[3][1] > pts[2][1] else (pts[3], pts[2])
    return np.array([tl, tr, br, bl], np.float64)


XY_SHIFT = 16                        # OpenCV's polygon fill works in 16.16 fixed point
XY_ONE = 1 << XY_SHIFT


def _trunc_div(a: int, b: int) -> int:
    """C's integer division (towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def clip_line(width: int, height: int, x1: int, y1: int, x2: int, y2: int) -> tuple[int, int, int, int] | None:
    """A segment cut to the grid (Cohen-Sutherland with truncated intersections), None when it misses it."""
    right, bottom = width - 1, height - 1
    code = lambda x, y: (x < 0) + (x > right) * 2 + (y < 0) * 4 + (y > bottom) * 8   # noqa: E731
    c1, c2 = code(x1, y1), code(x2, y2)
    if (c1 & c2) == 0 and (c1 | c2) != 0:
        if c1 & 12:
            a = 0 if c1 < 8 else bottom
            x1 += int((a - y1) * (x2 - x1) / (y2 - y1))
            y1, c1 = a, (x1 < 0) + (x1 > right) * 2
        if c2 & 12:
            a = 0 if c2 < 8 else bottom
            x2 += int((a - y2) * (x2 - x1) / (y2 - y1))
            y2, c2 = a, (x2 < 0) + (x2 > right) * 2
        if (c1 & c2) == 0 and (c1 | c2) != 0:
            if c1:
                a = 0 if c1 == 1 else right
                y1 += int((a - x1) * (y2 - y1) / (x2 - x1))
                x1, c1 = a, 0
            if c2:
                a = 0 if c2 == 1 else right
                y2 += int((a - x2) * (y2 - y1) / (x2 - x1))
                x2, c2 = a, 0
    return (x1, y1, x2, y2) if (c1 | c2) == 0 else None


def draw_line(mask: np.ndarray, x1: int, y1: int, x2: int, y2: int) -> None:
    """An 8-connected Bresenham segment, drawn left to right after clipping (as cv2.line with LINE_8)."""
    height, width = mask.shape
    if not (0 <= x1 < width and 0 <= x2 < width and 0 <= y1 < height and 0 <= y2 < height):
        clipped = clip_line(width, height, x1, y1, x2, y2)
        if clipped is None:
            return
        x1, y1, x2, y2 = clipped
    if x2 < x1:
        x1, y1, x2, y2 = x2, y2, x1, y1
    dx, dy = x2 - x1, abs(y2 - y1)
    sy = 1 if y2 >= y1 else -1
    if dy > dx:                                      # steep: y is the major axis
        major, minor, step_major, step_minor = dy, dx, (0, sy), (1, 0)
    else:
        major, minor, step_major, step_minor = dx, dy, (1, 0), (0, sy)
    err, x, y = major - 2 * minor, x1, y1
    for _ in range(major + 1):
        mask[y, x] = True
        if err < 0:
            x, y = x + step_major[0] + step_minor[0], y + step_major[1] + step_minor[1]
            err += 2 * major - 2 * minor
        else:
            x, y = x + step_major[0], y + step_major[1]
            err -= 2 * minor


def polygon_mask(polygon: np.ndarray, height: int, width: int) -> np.ndarray:
    """The pixels cv2.fillPoly sets for an integer polygon: its edges as 8-connected lines, then each row
    between pairs of edge crossings (16.16 fixed point, edges half-open at their lower end)."""
    mask = np.zeros((height, width), bool)
    pts = [(int(x), int(y)) for x, y in np.asarray(polygon).reshape(-1, 2)]
    edges = []                                       # (top row, bottom row, x at the top << 16, x step per row)
    for (x0, y0), (x1, y1) in zip(pts[-1:] + pts[:-1], pts):
        draw_line(mask, x0, y0, x1, y1)
        if y0 != y1:
            step = _trunc_div((x1 - x0) << XY_SHIFT, y1 - y0)
            edges.append((y0, y1, x0 << XY_SHIFT, step) if y0 < y1 else (y1, y0, x1 << XY_SHIFT, step))
    if len(edges) < 2:
        return mask
    for y in range(max(0, min(e[0] for e in edges)), min(height, max(e[1] for e in edges))):
        xs = sorted(x + (y - top) * step for top, bottom, x, step in edges if top <= y < bottom)
        for a, b in zip(xs[0::2], xs[1::2]):
            left, right = (a + XY_ONE - 1) >> XY_SHIFT, b >> XY_SHIFT
            if left < width and right >= 0:
                left, right = max(left, 0), min(right, width - 1)
                if left <= right:
                    mask[y, left:right + 1] = True
    return mask


def _bounds(points: np.ndarray, height: int, width: int) -> tuple[int, int, int, int]:
    clip = lambda v, top: int(min(max(v, 0), top))     # noqa: E731
    return (clip(math.floor(points[:, 0].min()), width - 1), clip(math.floor(points[:, 1].min()), height - 1),
            clip(math.ceil(points[:, 0].max()), width - 1), clip(math.ceil(points[:, 1].max()), height - 1))


def region_score(prob: np.ndarray, polygon: np.ndarray) -> float:
    """Mean of the map inside a polygon: PaddleOCR's box_score_fast on the rectangle, box_score_slow on the
    contour. Corners are moved into the polygon's clipped bounding box and truncated to integers, as its
    fillPoly call does."""
    height, width = prob.shape
    x0, y0, x1, y1 = _bounds(polygon, height, width)
    local = np.trunc(polygon - np.array([x0, y0], np.float64))
    mask = polygon_mask(local, y1 - y0 + 1, x1 - x0 + 1)
    values = prob[y0:y1 + 1, x0:x1 + 1][mask].astype(np.float64)
    return float(values.sum() / values.size) if values.size else 0.0


def unclip(quad: np.ndarray, ratio: float) -> list[np.ndarray]:
    """The quad grown by area * ratio / perimeter through Clipper (round joins, closed polygon); corners
    truncated to integers first, as pyclipper converts them. The resulting polygons as (n, 2) int64."""
    import pyclipper

    area = 0.0
    perimeter = 0.0
    for (xa, ya), (xb, yb) in zip(quad, np.roll(quad, -1, axis=0)):
        area += xa * yb - xb * ya
        perimeter += math.sqrt((xb - xa) * (xb - xa) + (yb - ya) * (yb - ya))
    area = abs(area) / 2.0
    if perimeter == 0.0:
        return []
    offset = pyclipper.PyclipperOffset()
    offset.AddPath([[int(x), int(y)] for x, y in quad], pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    return [np.asarray(p, np.int64).reshape(-1, 2) for p in offset.Execute(area * ratio / perimeter)]


def scale_quad(quad: np.ndarray, size: tuple[int, int], dest: tuple[int, int]) -> Quad:
    """Map pixels -> output pixels: round half to even, clip to [0, dest side] (PaddleOCR's last step)."""
    (height, width), (dest_h, dest_w) = size, dest
    xs = np.clip(np.round(quad[:, 0] / width * dest_w), 0, dest_w)
    ys = np.clip(np.round(quad[:, 1] / height * dest_h), 0, dest_h)
    return tuple((int(x), int(y)) for x, y in zip(xs, ys))       # type: ignore[return-value]


def db_quads(prob: np.ndarray, params: DbParams = DbParams(),
             dest: tuple[int, int] | None = None) -> list[tuple[Quad, float]]:
    """One probability map (H x W float32) -> (quad, score) per text region, in contour order. `dest` is the
    (height, width) the quads are scaled to (default: the map's own size)."""
    prob = np.ascontiguousarray(prob, np.float32)
    height, width = prob.shape
    if height == 0 or width == 0:
        return []
    dest = dest or (height, width)
    bitmap = (prob > np.float32(params.thresh)).astype(np.uint8)
    found = []
    for contour in find_contours(bitmap)[:max(0, params.max_candidates)]:
        quad, short = min_area_rect(contour)
        if short < params.min_size:
            continue
        score = region_score(prob, quad if params.score_mode == "fast" else contour.astype(np.float64))
        if score < params.box_thresh:
            continue
        grown = unclip(quad, params.unclip_ratio)
        if not grown:
            continue
        quad, short = min_area_rect(np.concatenate(grown))
        if short < params.min_size + 2:
            continue
        found.append((scale_quad(quad, (height, width), dest), round(score, 6)))
    return found


def quad_bounds(quad: Sequence[Sequence[float]]) -> tuple[float, float, float, float]:
    """The axis-aligned box [x0, y0, x1, y1] around a quad."""
    xs, ys = [p[0] for p in quad], [p[1] for p in quad]
    return float(min(xs)), float(min(ys)), float(max(xs)), float(max(ys))
