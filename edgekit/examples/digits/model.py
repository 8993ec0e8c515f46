"""A small image classifier in Paddle's dynamic-graph style (the factory `edgekit build` uses)."""

from __future__ import annotations

import paddle
from paddle import nn


class DigitsCNN(nn.Layer):
    """Three conv blocks, global pooling and a linear head; input 1x32x32 grayscale."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            # no conv bias before a batch norm: conv->bn pairs are what opt folds into one conv
            nn.Conv2D(1, 16, 3, padding=1, bias_attr=False), nn.BatchNorm2D(16), nn.ReLU(), nn.MaxPool2D(2),   # 16x16
            nn.Conv2D(16, 32, 3, padding=1, bias_attr=False), nn.BatchNorm2D(32), nn.ReLU(), nn.MaxPool2D(2),  # 8x8
            nn.Conv2D(32, 64, 3, padding=1, bias_attr=False), nn.BatchNorm2D(64), nn.ReLU(),
            nn.AdaptiveAvgPool2D(1),
        )
        self.head = nn.Linear(64, num_classes)

    def forward(self, image):
        x = self.features(image)
        x = paddle.flatten(x, 1)    # flatten_contiguous_range: the op opt 2.13rc0 crashes on for x86
        return self.head(x)


def create() -> DigitsCNN:
    return DigitsCNN()
