"""edgekit.consumers.predict: the host's twin of the apps' OCR system (reading order and crops are pure logic)."""

from __future__ import annotations

import numpy as np

from edgekit.consumers.predict import crop, sort_boxes


def test_reading_order_is_top_to_bottom_then_left_to_right_within_a_line():
    boxes = [[300, 52, 400, 70],    # line 2, right
             [10, 10, 90, 30],      # line 1, left
             [20, 55, 120, 75],     # line 2, left (3 px lower than its neighbour: same line)
             [200, 14, 280, 34]]    # line 1, right
    assert sort_boxes(boxes) == [1, 3, 2, 0]


def test_boxes_more_than_ten_pixels_apart_are_separate_lines():
    assert sort_boxes([[100, 40, 150, 60], [0, 25, 50, 45]]) == [1, 0]
    assert sort_boxes([]) == []


def test_crop_rounds_outwards_and_clamps():
    image = np.arange(10 * 20 * 3, dtype=np.uint8).reshape(10, 20, 3)
    piece = crop(image, [2.4, 1.6, 5.2, 4.0])
    assert piece.shape == (3, 4, 3)                          # rows 1..3, columns 2..5
    np.testing.assert_array_equal(piece, image[1:4, 2:6])
    assert crop(image, [-3.0, -1.0, 25.0, 12.5]).shape == (10, 20, 3)
