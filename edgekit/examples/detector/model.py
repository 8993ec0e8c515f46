"""A small anchor-free detector (PicoDet-style head) in Paddle's dynamic-graph style.

Input 3x96x96. Backbone of bias-free conv-BN-ReLU blocks down to stride 8 (12x12) and
stride 16 (6x6); a light top-down path adds the stride-16 features (nearest upsampled)
to stride 8. Per stride a shared 3x3 conv feeds a class-logit map [N, 3, h, w] and a box
map [N, 4 x (REG_MAX + 1), h, w] (distribution-focal sides in stride units). Outputs: the
class maps of strides 8 and 16, then their box maps: the layout task.json's
`anchor_free` head reads, with NMS outside the graph.
"""

from __future__ import annotations

import paddle
from paddle import nn

STRIDES = (8, 16)
REG_MAX = 7
NUM_CLASSES = 3


def block(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2D(cin, cout, 3, stride=stride, padding=1, bias_attr=False), nn.BatchNorm2D(cout),
                         nn.ReLU())


class Head(nn.Layer):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.stem = block(channels, channels)
        self.cls = nn.Conv2D(channels, NUM_CLASSES, 1)
        self.reg = nn.Conv2D(channels, 4 * (REG_MAX + 1), 1)

    def forward(self, x):
        x = self.stem(x)
        return self.cls(x), self.reg(x)


class Detector(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.stage8 = nn.Sequential(block(3, 16, 2), block(16, 24, 2), block(24, 24), block(24, 48, 2), block(48, 48))
        self.stage16 = nn.Sequential(block(48, 64, 2), block(64, 64))
        self.lateral = nn.Conv2D(64, 48, 1, bias_attr=False)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.head8 = Head(48)
        self.head16 = Head(64)
        with paddle.no_grad():       # a low prior on every class: training starts from "nothing here"
            for head in (self.head8, self.head16):
                head.cls.bias.set_value(paddle.full([NUM_CLASSES], -4.0))

    def forward(self, image):
        c8 = self.stage8(image)
        c16 = self.stage16(c8)
        p8 = c8 + self.up(self.lateral(c16))
        cls8, reg8 = self.head8(p8)
        cls16, reg16 = self.head16(c16)
        return cls8, cls16, reg8, reg16


def create() -> Detector:
    return Detector()
