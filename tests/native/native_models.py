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
