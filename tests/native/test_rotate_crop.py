"""The app core's rotated line crop (native/app/src/ocr.cc rotate_crop) against edgekit/consumers/predict.py's rotate_crop
(PaddleOCR's get_rotate_crop_image with bilinear sampling): the same crop sizes and pixels within 1 grey level
(measured: 0), for tilted, tall (turned 90 degrees), border-crossing and degenerate quads, gray and BGR."""

from __future__ import annotations

import json
import subprocess

import cv2
import numpy as np

from edgekit.consumers.predict import rotate_crop


def quads(rng, height, width):
    for _ in range(40):
        centre = (rng.uniform(0, width), rng.uniform(0, height))
        size = (rng.uniform(2, 80), rng.uniform(2, 30))
        corners = cv2.boxPoints((centre, size, rng.uniform(-90, 90)))
        order = np.argsort(corners[:, 0] + corners[:, 1])[0]           # start near the top-left, as DB quads do
        yield [[round(float(x), 2), round(float(y), 2)] for x, y in np.roll(corners, -order, axis=0)]
    yield [[10, 10], [20, 10], [20, 40], [10, 40]]                      # tall: turned
    yield [[5, 5], [5.5, 5], [5.5, 9], [5, 9]]                          # narrower than a pixel: empty
    yield [[-10, -5], [60, -3], [58, 20], [-12, 18]]                    # beyond the image: replicated border


def test_rotate_crop_equals_python(emulation, tmp_path):
    _, build = emulation("host")
    rng = np.random.default_rng(3)
    cases, want = [], []
    for i, channels in enumerate((1, 3)):
        smooth = cv2.GaussianBlur(rng.integers(0, 256, (90, 140, channels)).astype(np.uint8), (7, 7), 2)
        image = smooth.reshape(90, 140) if channels == 1 else smooth
        np.save(tmp_path / f"image{i}.npy", image)
        for j, quad in enumerate(quads(rng, 90, 140)):
            out = tmp_path / f"crop{i}_{j}.npy"
            cases.append({"image": str(tmp_path / f"image{i}.npy"), "quad": quad, "out": str(out)})
            want.append(rotate_crop(image, quad))
    (tmp_path / "in.json").write_text(json.dumps({"sort": [], "crop": [], "scale": [], "rotate": cases}))
    done = subprocess.run([str(build.root / "edgekit-app-tests"), "--ocr-geometry", str(tmp_path / "in.json"),
                           str(tmp_path / "out.json")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    worst, turned, empty = 0, 0, 0
    for case, expected in zip(cases, want):
        got = np.load(case["out"])
        assert got.shape == expected.shape, case
        if got.size:
            worst = max(worst, int(np.abs(got.astype(int) - expected).max()))
        turned += expected.shape[0] > expected.shape[1] * 1.5 or (case["quad"][0] == [10, 10])
        empty += expected.size == 0
    assert worst <= 1 and turned >= 2 and empty >= 2, (worst, turned, empty)
