"""Layers CV and OCR models use, written for Paddle 3 (imported by Paddle 3's interpreter, never by the tests).

Each `ZOO` entry is (factory, input shape): `test_paddle3.py` exports every entry with Paddle 3
(PIR), builds it with edgekit, and checks tier A against Paddle 3's own inference.
"""

import paddle
import paddle.nn as nn
import paddle.nn.functional as F


def _conv_bn(cin, cout, k=3, stride=1, groups=1, bias=False):
    return nn.Sequential(nn.Conv2D(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias_attr=bias),
                         nn.BatchNorm2D(cout))


class ConvBias(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(3, 8, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv(x))


class DepthwiseBNRelu6(nn.Layer):
    def __init__(self):
        super().__init__()
        self.pw = _conv_bn(3, 8, 1)
        self.dw = _conv_bn(8, 8, 3, stride=2, groups=8)

    def forward(self, x):
        return F.relu6(self.dw(F.relu6(self.pw(x))))


class ConvTranspose(nn.Layer):
    def __init__(self):
        super().__init__()
        self.up = nn.Conv2DTranspose(3, 4, 2, stride=2)
        self.bn = nn.BatchNorm2D(4)

    def forward(self, x):
        return F.sigmoid(self.bn(self.up(x)))


class Activations(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(3, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        parts = [F.sigmoid(y), F.tanh(y), F.silu(y), F.gelu(y), F.leaky_relu(y, 0.1), F.elu(y), F.hardsigmoid(y),
                 F.hardswish(y), F.mish(y), F.softplus(y), F.swish(y)]
        return paddle.concat(parts, axis=1)


class Pooling(nn.Layer):
    def forward(self, x):
        a = F.max_pool2d(x, 3, stride=2, padding=1)
        b = F.avg_pool2d(x, 2, stride=2)
        c = a + F.adaptive_avg_pool2d(x, 1)   # broadcast add
        return paddle.concat([a, b, c], axis=1)


class LinearHead(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3 * 16 * 16, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return F.softmax(self.fc2(F.relu(self.fc1(paddle.flatten(x, 1)))), axis=-1)


class ScaleTrap(nn.Layer):
    """conv-BN-hardswish then `y * 2 - 1`: opt 2.13 folds the scale into the conv before the activation."""

    def __init__(self):
        super().__init__()
        self.block = _conv_bn(3, 8)

    def forward(self, x):
        y = F.hardswish(self.block(x)) * 2.0 - 1.0
        return F.adaptive_avg_pool2d(y, 1)


class Interpolate(nn.Layer):
    def forward(self, x):
        a = F.interpolate(x, scale_factor=2, mode="nearest")
        b = F.interpolate(x, size=[32, 32], mode="bilinear", align_corners=False)
        c = F.interpolate(x, size=[32, 32], mode="bilinear", align_corners=True)
        return paddle.concat([a, b, c], axis=1)


class ConcatSplit(nn.Layer):
    def forward(self, x):
        a, b, c = paddle.split(x, 3, axis=1)
        d, e = paddle.split(x, [1, 2], axis=1)
        return paddle.concat([c, a, b, e, d], axis=1)


class TransposeReshape(nn.Layer):
    def forward(self, x):
        y = paddle.transpose(x, [0, 2, 3, 1])
        y = paddle.reshape(y, [0, -1, 3])
        y = paddle.unsqueeze(y, 1)
        return paddle.squeeze(y, 1)


class Softmaxes(nn.Layer):
    def forward(self, x):
        return paddle.concat([F.softmax(x, axis=1), F.log_softmax(x, axis=-1)], axis=1)


class Attention(nn.Layer):
    """An SVTR-style block: LayerNorm, multi-head self-attention, MLP, residuals, on [B, N, C] tokens."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))

    def forward(self, x):
        n, c = x.shape[1], x.shape[2]
        qkv = self.qkv(self.norm1(x)).reshape([-1, n, 3, self.heads, c // self.heads]).transpose([2, 0, 3, 1, 4])
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = F.softmax(paddle.matmul(q, k, transpose_y=True) * (c // self.heads) ** -0.5, axis=-1)
        y = paddle.matmul(attn, v).transpose([0, 2, 1, 3]).reshape([-1, n, c])
        x = x + self.proj(y)
        return x + self.mlp(self.norm2(x))


class Reductions(nn.Layer):
    def forward(self, x):
        m = paddle.mean(x, axis=[2, 3], keepdim=True)
        s = paddle.sum(x, axis=1, keepdim=True)
        mx = paddle.max(x, axis=1, keepdim=True)
        y = paddle.clip(x - m, -0.5, 0.5) + paddle.pow(paddle.abs(s), 2.0) * 0.01 + paddle.sqrt(paddle.abs(mx) + 1e-3)
        return y


class SliceAndPad(nn.Layer):
    def forward(self, x):
        y = x[:, 1:3, 2:14, :]
        return F.pad(y, [1, 1, 2, 2], mode="constant", value=0.5)


class Cumsum(nn.Layer):
    """An op edgekit's translation does not cover (pd_op.cumsum): the build must refuse it by name."""

    def forward(self, x):
        return paddle.cumsum(x, axis=1)


class ScaleAfterPool(nn.Layer):
    """A `scale` op of its own (`y - 1.0` after pooling) for the legacy-export slot check."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(3, 8, 3, padding=1)

    def forward(self, x):
        return F.adaptive_avg_pool2d(F.relu(self.conv(x)), 1) - 1.0


EXTRA = {"cumsum": (Cumsum, [-1, 3, 16, 16])}

ZOO = {
    "conv_bias": (ConvBias, [-1, 3, 16, 16]),
    "depthwise_bn_relu6": (DepthwiseBNRelu6, [-1, 3, 16, 16]),
    "conv_transpose": (ConvTranspose, [-1, 3, 16, 16]),
    "activations": (Activations, [-1, 3, 16, 16]),
    "pooling": (Pooling, [-1, 3, 16, 16]),
    "linear_head": (LinearHead, [-1, 3, 16, 16]),
    "scale_trap": (ScaleTrap, [-1, 3, 16, 16]),
    "interpolate": (Interpolate, [-1, 3, 16, 16]),
    "concat_split": (ConcatSplit, [-1, 3, 16, 16]),
    "transpose_reshape": (TransposeReshape, [-1, 3, 16, 16]),
    "softmax": (Softmaxes, [-1, 3, 16, 16]),
    "attention": (Attention, [-1, 8, 16]),
    "reductions": (Reductions, [-1, 3, 16, 16]),
    "slice_pad": (SliceAndPad, [-1, 3, 16, 16]),
}


def export_all(out_dir: str) -> None:
    """Export every entry as PIR (Paddle 3's default) into out_dir/<name>/ with random BN statistics."""
    import os

    for name, (cls, shape) in {**ZOO, **EXTRA}.items():
        paddle.seed(0)
        layer = cls()
        for sub in layer.sublayers():
            if isinstance(sub, nn.BatchNorm2D):   # non-trivial statistics, so BN folding is really exercised
                sub._mean.set_value(paddle.rand(sub._mean.shape) - 0.5)
                sub._variance.set_value(paddle.rand(sub._variance.shape) + 0.5)
        layer.eval()
        spec = [paddle.static.InputSpec([None] + shape[1:], "float32", "x")]
        paddle.jit.save(paddle.jit.to_static(layer, input_spec=spec, full_graph=True), os.path.join(out_dir, name, "model"))


if __name__ == "__main__":
    import sys

    export_all(sys.argv[1])
