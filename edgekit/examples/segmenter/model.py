"""A small encoder-decoder segmenter in Paddle's dynamic-graph style: input 3x64x64, scores [N, 4, 64, 64].

Encoder of bias-free conv-BN-ReLU blocks to stride 4; the decoder upsamples (nearest) twice,
adding the stride-2 and full-resolution features, and a 1x1 conv scores background and the
three shape classes per pixel (argmax outside the graph, by the task).
"""

from __future__ import annotations

from paddle import nn

NUM_CLASSES = 4            # background, circle, square, triangle


def block(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2D(cin, cout, 3, stride=stride, padding=1, bias_attr=False), nn.BatchNorm2D(cout),
                         nn.ReLU())


class Segmenter(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.full = block(3, 16)
        self.half = nn.Sequential(block(16, 24, 2), block(24, 24))
        self.quarter = nn.Sequential(block(24, 48, 2), block(48, 48), block(48, 48))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.mix_half = block(48 + 24, 32)
        self.mix_full = block(32 + 16, 24)
        self.classify = nn.Conv2D(24, NUM_CLASSES, 1)

    def forward(self, image):
        import paddle

        f1 = self.full(image)
        f2 = self.half(f1)
        f4 = self.quarter(f2)
        x = self.mix_half(paddle.concat([self.up(f4), f2], axis=1))
        x = self.mix_full(paddle.concat([self.up(x), f1], axis=1))
        return self.classify(x)


def create() -> Segmenter:
    return Segmenter()
