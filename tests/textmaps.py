"""Synthetic DB probability maps shared by the Python (tests/unit) and C++ (tests/native) DB post-processing tests."""

from __future__ import annotations

import cv2
import numpy as np


def rotated_map(rng, height, width, count, small=False):
    """Text-like regions at random angles (cv2.boxPoints + fillPoly), possibly touching."""
    prob = (rng.random((height, width)) * 0.1).astype(np.float32)
    for _ in range(count):
        centre = (rng.uniform(5, width - 5), rng.uniform(5, height - 5))
        size = (rng.uniform(8, 40), rng.uniform(4, 9)) if small else (rng.uniform(20, 120), rng.uniform(6, 20))
        corners = cv2.boxPoints((centre, size, rng.uniform(-80, 80)))
        layer = np.zeros((height, width), np.float32)
        cv2.fillPoly(layer, [np.round(corners).astype(np.int32)], float(rng.uniform(0.62, 0.99)))
        prob = np.maximum(prob, layer)
    return prob
