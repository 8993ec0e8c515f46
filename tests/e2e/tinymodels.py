"""Tiny dynamic-graph models the end-to-end tests build through `package.module:factory`."""

import paddle
from paddle import nn


class FlattenNet(nn.Layer):
    """conv -> relu -> paddle.flatten -> linear: the op opt 2.13rc0 crashes on for x86."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 5)

    def forward(self, x):
        return self.fc(paddle.flatten(nn.functional.relu(self.conv(x)), 1))


class LogSumExpNet(nn.Layer):
    """Uses logsumexp, which Paddle-Lite 2.13rc0 has no ARM kernel for."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(3, 4, 3, padding=1)

    def forward(self, x):
        return paddle.logsumexp(self.conv(x), axis=1)


class NaNNet(nn.Layer):
    """Produces NaN for every input: sqrt of a strictly negative tensor."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return paddle.sqrt(-paddle.abs(self.fc(x)) - 1.0)


class ZeroDReshapeNet(nn.Layer):
    """A reshape target built from a width read as a 0-D value, as X2Paddle imports ONNX `Reshape(x, [])` (the public
    PP-OCRv6 rec): Paddle runs the reshape to 0-D; Paddle-Lite 2.13's runtime aborts on it (SIGABRT)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        width = paddle.reshape(paddle.shape(x)[2:3], [])                                  # 0-D
        target = paddle.concat([paddle.to_tensor([-1, 2], "int32"), paddle.reshape(width, [1])])   # [-1, 2, width]
        return self.fc(nn.functional.relu(paddle.reshape(x, target)))


class ConvStack(nn.Layer):
    """`convs` 3x3 convolutions with ReLU, a spatial mean and a linear head: one more conv is one more op for the
    device suite's instruction-count gate (tests/e2e/test_count_baseline.py)."""

    def __init__(self, convs):
        super().__init__()
        self.convs = nn.LayerList([nn.Conv2D(3 if i == 0 else 8, 8, 3, padding=1) for i in range(convs)])
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        for conv in self.convs:
            x = nn.functional.relu(conv(x))
        return self.fc(paddle.mean(x, axis=[2, 3]))


def conv_stack_1():
    paddle.seed(1)
    return ConvStack(1)


def conv_stack_2():
    paddle.seed(1)
    return ConvStack(2)


def flatten_net():
    paddle.seed(1)
    return FlattenNet()


def logsumexp_net():
    paddle.seed(1)
    return LogSumExpNet()


def zero_d_reshape_net():
    paddle.seed(1)
    return ZeroDReshapeNet()


def nan_net():
    paddle.seed(1)
    return NaNNet()


def mobilenet_v3_small():
    paddle.seed(1)
    return paddle.vision.models.mobilenet_v3_small(num_classes=10)


def not_a_layer():
    return 42


def needs_arguments(num_classes):
    return FlattenNet()
