"""Tiny dynamic-graph models the native tests export (to_static reads this module's globals)."""

import paddle
from paddle import nn


class TinyConv(nn.Layer):
    """conv -> relu -> strided conv -> mean -> linear: one input [-1, 3, 8, 8], one output [-1, 5]."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2D(3, 6, 3, padding=1)
        self.c2 = nn.Conv2D(6, 8, 3, stride=2, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = self.c2(nn.functional.relu(self.c1(x)))
        return self.fc(y.mean(axis=[2, 3]))


def tiny_conv():
    paddle.disable_static()     # an earlier test's static executor may have left static mode on
    paddle.seed(3)
    return TinyConv()


class UnevenDepthwise(paddle.nn.Layer):
    """A depthwise conv with strides (2, 1), as PP-OCR's backbones have, between two 1x1 convs."""

    def __init__(self, stride=(2, 1)):
        super().__init__()
        self.expand = paddle.nn.Conv2D(3, 32, 1)
        self.depthwise = paddle.nn.Conv2D(32, 32, 3, stride=stride, padding=1, groups=32)
        self.act = paddle.nn.Hardswish()
        self.project = paddle.nn.Conv2D(32, 16, 1)

    def forward(self, x):
        return self.project(self.act(self.depthwise(self.expand(x))))


def uneven_depthwise(stride=(2, 1)):
    paddle.disable_static()
    paddle.seed(5)
    return UnevenDepthwise(stride)


class LearnableAffine(paddle.nn.Layer):
    """conv -> hard_swish -> a * x + b with learned one-element a, b (PP-LCNetV3's learnable affine block, in every
    layer of PP-OCRv4 det and rec) -> 1x1 conv."""

    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 32, 3, padding=1)
        self.act = paddle.nn.Hardswish()
        self.scale = self.create_parameter([1], default_initializer=paddle.nn.initializer.Constant(1.3))
        self.bias = self.create_parameter([1], default_initializer=paddle.nn.initializer.Constant(-0.2))
        self.project = paddle.nn.Conv2D(32, 8, 1)

    def forward(self, x):
        return self.project(self.scale * self.act(self.conv(x)) + self.bias)


def learnable_affine():
    paddle.disable_static()
    paddle.seed(1)
    return LearnableAffine()


class TwoRowPool(paddle.nn.Layer):
    """conv (3, 2) stride (2, 1) to two rows -> a 2x2 stride-2 pool over them (PP-OCR cls's last max pool, on
    [N, 200, 2, 96]) -> 1x1 conv."""

    def __init__(self, kind="max"):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 32, (3, 3), stride=(2, 1), padding=(0, 1))
        self.pool = paddle.nn.MaxPool2D(2, 2) if kind == "max" else paddle.nn.AvgPool2D(2, 2)
        self.project = paddle.nn.Conv2D(32, 8, 1)

    def forward(self, x):
        return self.project(self.pool(paddle.nn.functional.relu(self.conv(x))))


def two_row_pool(kind="max"):
    paddle.disable_static()
    paddle.seed(7)
    return TwoRowPool(kind)
