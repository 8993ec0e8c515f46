"""PP-OCR-style text detector and recogniser in plain Paddle code that runs under Paddle 2.6 and Paddle 3 alike.

The detector follows PP-OCRv4 mobile det's shape (a PP-LCNet-like backbone with SE blocks,
a DB FPN neck, a DB head with transposed convs and a sigmoid map); the recogniser follows
PP-OCRv4 mobile rec's (an LCNet-like backbone pooled to a height of 1, an SVTR-style neck with
attention and LayerNorm, a CTC head with softmax). Small sizes keep the tests fast; the
weights are random: these models are for comparing the two export routes, not for accuracy.
"""

import paddle
import paddle.nn as nn
import paddle.nn.functional as F

from paddle3_zoo import Attention     # plain Paddle code too: the SVTR-style block of the layer zoo


class ConvBNAct(nn.Layer):
    def __init__(self, cin, cout, k=3, stride=1, groups=1, act=True):
        super().__init__()
        self.conv = nn.Conv2D(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias_attr=False)
        self.bn = nn.BatchNorm2D(cout)
        self.act = nn.Hardswish() if act else None

    def forward(self, x):
        x = self.bn(self.conv(x))
        return self.act(x) if self.act is not None else x


class SE(nn.Layer):
    def __init__(self, c):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2D(1)
        self.reduce = nn.Conv2D(c, c // 4, 1)
        self.expand = nn.Conv2D(c // 4, c, 1)

    def forward(self, x):
        s = F.hardsigmoid(self.expand(F.relu(self.reduce(self.pool(x)))))
        return x * s


class DepthwiseSeparable(nn.Layer):
    def __init__(self, cin, cout, stride, se=False):
        super().__init__()
        self.dw = ConvBNAct(cin, cin, 3, stride=stride, groups=cin)
        self.se = SE(cin) if se else None
        self.pw = ConvBNAct(cin, cout, 1)

    def forward(self, x):
        x = self.dw(x)
        if self.se is not None:
            x = self.se(x)
        return self.pw(x)


class Detector(nn.Layer):
    def __init__(self):
        super().__init__()
        self.stem = ConvBNAct(3, 16, 3, stride=2)
        self.stages = nn.LayerList([DepthwiseSeparable(16, 24, 2), DepthwiseSeparable(24, 32, 2),
                                    DepthwiseSeparable(32, 48, 2, se=True), DepthwiseSeparable(48, 64, 2, se=True)])
        self.lateral = nn.LayerList([nn.Conv2D(c, 32, 1, bias_attr=False) for c in (24, 32, 48, 64)])
        self.smooth = nn.LayerList([nn.Conv2D(32, 8, 3, padding=1, bias_attr=False) for _ in range(4)])
        self.head_conv = ConvBNAct(32, 16, 3)
        self.up1 = nn.Conv2DTranspose(16, 16, 2, stride=2)
        self.up1_bn = nn.BatchNorm2D(16)
        self.up2 = nn.Conv2DTranspose(16, 1, 2, stride=2)

    def forward(self, x):
        feats = []
        y = self.stem(x)
        for stage in self.stages:
            y = stage(y)
            feats.append(y)
        lat = [conv(f) for conv, f in zip(self.lateral, feats)]
        for i in range(3, 0, -1):      # top-down path
            lat[i - 1] = lat[i - 1] + F.interpolate(lat[i], scale_factor=2, mode="nearest")
        outs = [conv(t) for conv, t in zip(self.smooth, lat)]
        outs = [outs[0]] + [F.interpolate(o, scale_factor=2 ** i, mode="nearest") for i, o in enumerate(outs) if i > 0]
        fused = paddle.concat(outs, axis=1)
        y = self.head_conv(fused)
        y = F.relu(self.up1_bn(self.up1(y)))
        return F.sigmoid(self.up2(y))


class Recogniser(nn.Layer):
    def __init__(self, classes=64, width=128):
        super().__init__()
        self.stem = ConvBNAct(3, 16, 3, stride=2)
        self.blocks = nn.Sequential(DepthwiseSeparable(16, 32, 1), DepthwiseSeparable(32, 48, (2, 1)),
                                    DepthwiseSeparable(48, 64, (2, 1), se=True))
        self.pool = nn.AvgPool2D([4, 2], stride=[4, 2])
        self.neck = nn.Conv2D(64, 32, 1)
        self.mixer = Attention(32)
        self.head = nn.Linear(32, classes)
        self.steps = width // 4

    def forward(self, x):
        y = self.pool(self.blocks(self.stem(x)))          # [B, 64, 1, W/4]
        y = self.neck(y).squeeze(2).transpose([0, 2, 1])   # [B, W/4, 32]
        y = self.mixer(y)
        return F.softmax(self.head(y), axis=-1)


def detector():
    paddle.seed(0)
    return _with_statistics(Detector())


def recogniser():
    paddle.seed(0)
    return _with_statistics(Recogniser())


def _with_statistics(layer):
    """Non-trivial BN statistics, so that folding BN into the convs is really exercised."""
    for sub in layer.sublayers():
        if isinstance(sub, nn.BatchNorm2D):
            sub._mean.set_value(paddle.rand(sub._mean.shape) - 0.5)
            sub._variance.set_value(paddle.rand(sub._variance.shape) + 0.5)
    layer.eval()
    return layer
