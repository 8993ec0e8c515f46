"""Synthetic scenes for the detector and segmenter examples: filled shapes of three classes on textured clutter.

Each scene is a pure function of its seed: a noisy gradient background, thin clutter
lines and rings (which are not objects), then up to `max_objects` shapes (circle,
square, triangle) of 8 px up to half the scene's shorter side, in random colours,
placed so that no two objects overlap by more than a third. The truth is each shape's
tight box and class, and a per-pixel class mask (0 = background, 1 + class).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

CLASSES = ("circle", "square", "triangle")


@dataclass(frozen=True)
class Scene:
    image: np.ndarray          # uint8 BGR, H x W x 3
    boxes: np.ndarray          # [K, 4] float64 x0, y0, x1, y1 (x1, y1 exclusive), tight around the drawn pixels
    classes: np.ndarray        # [K] int64
    mask: np.ndarray           # uint8 H x W: 0 background, 1 + class


def _background(rng: np.random.Generator, height: int, width: int):
    import cv2

    base = rng.uniform(40, 215, 3)
    tilt = rng.uniform(-50, 50, 3)
    ramp = np.linspace(-0.5, 0.5, width)[None, :, None] * tilt[None, None, :]
    image = base[None, None, :] + ramp + rng.normal(0, 10, (height, width, 3))
    image = np.clip(image, 0, 255).astype(np.uint8)
    for _ in range(int(rng.integers(2, 7))):          # clutter: lines and thin rings
        color = tuple(int(c) for c in rng.integers(0, 256, 3))
        if rng.uniform() < 0.6:
            p, q = rng.integers(0, [width, height], 2), rng.integers(0, [width, height], 2)
            cv2.line(image, (int(p[0]), int(p[1])), (int(q[0]), int(q[1])), color, 1, cv2.LINE_AA)
        else:
            c = rng.integers(0, [width, height], 2)
            cv2.circle(image, (int(c[0]), int(c[1])), int(rng.integers(4, max(5, min(height, width) // 3))), color, 1,
                       cv2.LINE_AA)
    return image


def _draw(klass: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """A size x size coverage mask (uint8 0/1) of one shape."""
    import cv2

    mask = np.zeros((size, size), np.uint8)
    if klass == 0:
        cv2.circle(mask, (size // 2, size // 2), max(1, (size - 1) // 2), 1, -1)
    elif klass == 1:
        inset = int(rng.integers(0, max(1, size // 8)))
        mask[inset:size - inset, :] = 1
    else:
        pts = np.array([[size // 2, 0], [size - 1, size - 1], [0, size - 1]], np.int32)
        cv2.fillPoly(mask, [pts], 1)
    return mask


def make_scene(seed: int, height: int = 96, width: int = 96, max_objects: int = 6, min_size: int = 8) -> Scene:
    rng = np.random.default_rng(seed)
    image = _background(rng, height, width)
    mask = np.zeros((height, width), np.uint8)
    boxes, classes = [], []
    largest = max(min_size, min(height, width) // 2)
    for _ in range(int(rng.integers(1, max_objects + 1))):
        # sizes spread evenly over log scale: as many small objects as large ones
        size = int(round(np.exp(rng.uniform(np.log(min_size), np.log(largest)))))
        klass = int(rng.integers(len(CLASSES)))
        for _attempt in range(10):
            x, y = int(rng.integers(0, width - size + 1)), int(rng.integers(0, height - size + 1))
            box = np.array([x, y, x + size, y + size], np.float64)
            if all(_overlap(box, b) < 1 / 3 for b in boxes):
                break
        else:
            continue
        shape = _draw(klass, size, rng)
        ys, xs = np.nonzero(shape)
        tight = np.array([x + xs.min(), y + ys.min(), x + xs.max() + 1, y + ys.max() + 1], np.float64)
        color = rng.integers(0, 256, 3)
        while np.abs(color.astype(int) - image[y:y + size, x:x + size].reshape(-1, 3).mean(0)).max() < 60:
            color = rng.integers(0, 256, 3)
        region = image[y:y + size, x:x + size]
        region[shape > 0] = color
        mask[y:y + size, x:x + size][shape > 0] = klass + 1
        boxes.append(tight)
        classes.append(klass)
    # a drawn-over object keeps its box only while most of it is still visible
    keep = [i for i, b in enumerate(boxes)
            if (mask[int(b[1]):int(b[3]), int(b[0]):int(b[2])] == classes[i] + 1).sum() >= 0.5 * _filled(classes[i], b)]
    return Scene(image, np.asarray([boxes[i] for i in keep], np.float64).reshape(-1, 4),
                 np.asarray([classes[i] for i in keep], np.int64), mask)


def _filled(klass: int, box: np.ndarray) -> float:
    area = (box[2] - box[0]) * (box[3] - box[1])
    return area * (np.pi / 4 if klass == 0 else 0.5 if klass == 2 else 1.0)


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    return ix * iy / min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))


def train_main(description: str, steps: int, write_data, train, data: Path) -> None:
    """The examples' training scripts: `--steps N`, the data written to `data`, then the training on CPU."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=steps)
    args = parser.parse_args()
    import paddle

    paddle.set_device("cpu")
    write_data(data)
    train(args.steps)
