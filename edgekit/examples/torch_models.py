"""PyTorch models for the ONNX import tests: the ops current exporters emit that X2Paddle 1.6 lacks.

Run in a PyTorch environment, through `torch_to_onnx.py --factory torch_models:NAME`
(the script's folder is on sys.path). Every factory seeds its weights, so an export is
reproducible.

- `mobilenet_v3_small`: torchvision's MobileNetV3-Small architecture (inverted residuals,
  squeeze-excitation with Hardsigmoid, Hardswish), written in plain torch because
  torchvision's wheels do not import beside the CPU build of torch; random weights,
  non-trivial BN statistics. Exported at opset 14+ it carries ONNX `HardSwish`.
- `layernorm_net`: a patch-embedding + LayerNorm + MLP block (ViT/SVTR style): ONNX
  `LayerNormalization` at opset 17+.
- `gelu_net`: a conv + GELU block: ONNX `Gelu` at opset 20+, `Erf` arithmetic below.
- `ppocrv5_style_rec`: a small PP-OCRv5-style recogniser (PP-LCNetV3-like backbone, SVTR neck with
  attention and LayerNorm, CTC head) for 3x48x320 lines: at opset 13+ its Squeeze/Unsqueeze take axes
  as inputs, which stops X2Paddle's own shape inference (edgekit.export.simplify says what is done).
- `near_zero_db`: a DB-style detector whose map is ~1e-5 on noise and ~1 on dark strokes, with float
  rounding in its logits: the case edgekit's import gate judges on data (export/import_gate.py).
"""

from __future__ import annotations

import torch
from torch import nn


def _divisible(value: float, divisor: int = 8) -> int:
    """torchvision's _make_divisible: round to a multiple of `divisor`, never below 90 % of `value`."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, act: type | None = None) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class _SqueezeExcite(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        squeeze = _divisible(channels // 4)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        scale = nn.functional.adaptive_avg_pool2d(x, 1)
        scale = nn.functional.hardsigmoid(self.fc2(nn.functional.relu(self.fc1(scale))))
        return x * scale


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, kernel: int, expanded: int, cout: int, se: bool, act: type, stride: int):
        super().__init__()
        layers = []
        if expanded != cin:
            layers.append(_conv_bn(cin, expanded, 1, act=act))
        layers.append(_conv_bn(expanded, expanded, kernel, stride, groups=expanded, act=act))
        if se:
            layers.append(_SqueezeExcite(expanded))
        layers.append(_conv_bn(expanded, cout, 1))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


# torchvision's mobilenet_v3_small settings: in, kernel, expanded, out, SE, activation, stride
_SMALL = [(16, 3, 16, 16, True, "RE", 2), (16, 3, 72, 24, False, "RE", 2), (24, 3, 88, 24, False, "RE", 1),
          (24, 5, 96, 40, True, "HS", 2), (40, 5, 240, 40, True, "HS", 1), (40, 5, 240, 40, True, "HS", 1),
          (40, 5, 120, 48, True, "HS", 1), (48, 5, 144, 48, True, "HS", 1), (48, 5, 288, 96, True, "HS", 2),
          (96, 5, 576, 96, True, "HS", 1), (96, 5, 576, 96, True, "HS", 1)]


class MobileNetV3Small(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        acts = {"RE": nn.ReLU, "HS": nn.Hardswish}
        blocks = [_conv_bn(3, 16, 3, 2, act=nn.Hardswish)]
        blocks += [_InvertedResidual(cin, k, e, cout, se, acts[a], s) for cin, k, e, cout, se, a, s in _SMALL]
        blocks.append(_conv_bn(96, 576, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*blocks)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(1024, num_classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def _seeded_statistics(model: nn.Module) -> nn.Module:
    """torchvision's initialisation, plus BN running statistics that are not the identity."""
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out")
            if module.bias is not None:
                nn.init.uniform_(module.bias, -0.1, 0.1)
        elif isinstance(module, nn.BatchNorm2d):
            with torch.no_grad():
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
        elif isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0, 0.05)
            nn.init.uniform_(module.bias, -0.1, 0.1)
    return model


def _batchnorm_statistics_from_data(model: nn.Module, size=64, batches: int = 4) -> nn.Module:
    """Running statistics measured on seeded inputs, as training leaves them: with random statistics the
    activations drift in scale block after block, and a deep net gives every input the same scores."""
    height, width = size if isinstance(size, tuple) else (size, size)
    generator = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None                      # a cumulative average over the batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            offsets = torch.randn(16, 3, 1, 1, generator=generator)
            model(torch.randn(16, 3, height, width, generator=generator) * 0.5 + offsets)
    return model.eval()


def mobilenet_v3_small() -> nn.Module:
    torch.manual_seed(0)
    return _batchnorm_statistics_from_data(_seeded_statistics(MobileNetV3Small(num_classes=10)))


class _PatchMixer(nn.Module):
    """Patch embedding, then a pre-norm MLP block with a residual, then LayerNorm and a linear head."""

    def __init__(self, act: type, dim: int = 32, patch: int = 8, classes: int = 10):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, patch)
        self.norm1 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), act(), nn.Linear(2 * dim, dim))
        self.norm2 = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        tokens = self.embed(x).flatten(2).transpose(1, 2)          # N, patches, dim
        tokens = tokens + self.mlp(self.norm1(tokens))
        return self.head(self.norm2(tokens).mean(1))


def layernorm_net() -> nn.Module:
    torch.manual_seed(0)
    net = _PatchMixer(nn.ReLU)
    with torch.no_grad():
        for norm in (net.norm1, net.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.2, 0.2)
    return net


def gelu_net() -> nn.Module:
    torch.manual_seed(0)
    return _PatchMixer(nn.GELU)


# --- a PP-OCRv5-style text recogniser: PP-LCNetV3-like backbone, SVTR neck, CTC head ----------------

REC_CLASSES = 36       # CTC blank + the 34 characters of edgekit.examples.ppocr.make_data.ALPHABET + space


class _DepthwiseSeparable(nn.Module):
    """PP-LCNet's block: depthwise conv-BN-hardswish, optional squeeze-excitation, pointwise conv-BN-hardswish."""

    def __init__(self, cin: int, cout: int, stride, se: bool = False, kernel: int = 3):
        super().__init__()
        self.dw = _conv_bn(cin, cin, kernel, 1, groups=cin, act=nn.Hardswish)
        self.dw[0].stride = stride if isinstance(stride, tuple) else (stride, stride)
        self.se = _SqueezeExcite(cin) if se else nn.Identity()
        self.pw = _conv_bn(cin, cout, 1, act=nn.Hardswish)

    def forward(self, x):
        return self.pw(self.se(self.dw(x)))


class _Attention(nn.Module):
    """SVTR's global mixer: one qkv projection, heads split by reshape/permute, softmax(q k^T * scale) v."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        n, tokens, dim = x.shape
        qkv = self.qkv(x).reshape(n, tokens, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1) * self.scale).softmax(-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(n, tokens, dim))


class _SvtrBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.mixer = _Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PPOCRv5StyleRec(nn.Module):
    """A small PP-OCRv5-style recogniser (about 0.2 M parameters) for 3x48x320 lines: [N, 40, classes] CTC probabilities.

    As PaddleOCR's exports have it: the backbone's features, reshaped to the run-time batch, are pooled to
    height 1 (AveragePool), a learnt position term is added through Unsqueeze -> Add -> Squeeze, and PaddleOCR's EncoderWithSVTR (conv
    1x3, conv 1x1, SVTR blocks on the 40 tokens, conv 1x1, concat with the shortcut, conv 1x3, conv 1x1)
    feeds a linear CTC head with softmax.
    """

    def __init__(self, classes: int = REC_CLASSES, width: int = 96, dims: int = 64, heads: int = 4, depth: int = 2):
        super().__init__()
        self.stem = _conv_bn(3, 16, 3, 2, act=nn.Hardswish)                                   # 24 x 160
        self.blocks = nn.Sequential(
            _DepthwiseSeparable(16, 32, 1), _DepthwiseSeparable(32, 48, (2, 2)),              # 12 x 80
            _DepthwiseSeparable(48, 64, (2, 1)), _DepthwiseSeparable(64, width, (2, 2), se=True),   # 3 x 40
            _DepthwiseSeparable(width, width, 1, se=True, kernel=5))
        self.position = nn.Parameter(torch.zeros(1, 1, width, 1, 40))
        swish = nn.SiLU
        self.conv1 = self._conv(width, width // 8, (1, 3), swish)
        self.conv2 = self._conv(width // 8, dims, 1, swish)
        self.svtr = nn.Sequential(*[_SvtrBlock(dims, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dims, eps=1e-6)
        self.conv3 = self._conv(dims, width, 1, swish)
        self.conv4 = self._conv(2 * width, width // 8, (1, 3), swish)
        self.conv1x1 = self._conv(width // 8, dims, 1, swish)
        self.head = nn.Linear(dims, classes)

    @staticmethod
    def _conv(cin: int, cout: int, kernel, act: type) -> nn.Sequential:
        kernel = kernel if isinstance(kernel, tuple) else (kernel, kernel)
        return nn.Sequential(nn.Conv2d(cin, cout, kernel, 1, (kernel[0] // 2, kernel[1] // 2), bias=False),
                             nn.BatchNorm2d(cout), act())

    def forward(self, x):
        x = self.blocks(self.stem(x))
        x = x.reshape(x.shape[0], -1, 3, 40)                                    # a reshape to the run-time batch
        x = nn.functional.avg_pool2d(x, (3, 1))                                  # N, C, 1, 40
        x = (x.unsqueeze(1) + self.position).squeeze(1)                         # Unsqueeze -> Add -> Squeeze
        shortcut = x
        z = self.conv2(self.conv1(x))
        n, c, h, w = z.shape
        z = self.norm(self.svtr(z.flatten(2).transpose(1, 2)))                  # N, 40, dims
        z = self.conv3(z.transpose(1, 2).reshape(n, c, h, w))
        z = self.conv1x1(self.conv4(torch.cat([shortcut, z], dim=1)))
        logits = self.head(z.squeeze(2).transpose(1, 2))                        # N, 40, classes
        return logits.softmax(-1)


def ppocrv5_style_rec() -> nn.Module:
    torch.manual_seed(0)
    net = _seeded_statistics(PPOCRv5StyleRec())
    with torch.no_grad():
        net.position.normal_(0, 0.1)
        for module in net.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
        net.head.weight.normal_(0, 0.3)           # decisive per-step scores: random weights read a stable "text"
    return _batchnorm_statistics_from_data(net, size=(48, 320))


# --- a DB-style text detector whose probability map is near zero on noise --------------------------

class NearZeroDB(nn.Module):
    """A tiny DB-style detector: [N, 1, H, W] text probability, ~1 on dark strokes of a light page and ~1e-5 on noise.

    The map is sigmoid(160 * relu(-mean3x3(x) - 0.9) - 11 + (a - b)), where a and b are the same 3x3 conv of the
    input at the scale of 1e5, once as one conv and once as the sum of two: a - b is float rounding only, which
    differs between engines as it does in a real detector's deep, large-valued features. On seeded noise the map
    then stays near sigmoid(-11) = 1.7e-5 and the engines differ in direction (cosine ~0.999 in the measured
    import); on pages the strokes read ~1.
    """

    def __init__(self):
        super().__init__()
        self.mean = nn.Conv2d(3, 1, 3, padding=1, bias=False)
        self.whole = nn.Conv2d(3, 1, 3, padding=1, bias=False)
        self.part1 = nn.Conv2d(3, 1, 3, padding=1, bias=False)
        self.part2 = nn.Conv2d(3, 1, 3, padding=1, bias=False)

    def forward(self, x):
        stroke = nn.functional.relu(-self.mean(x) - 0.9)
        rounding = self.whole(x) - (self.part1(x) + self.part2(x))
        return torch.sigmoid(160.0 * stroke - 11.0 + rounding)


def near_zero_db() -> nn.Module:
    torch.manual_seed(0)
    net = NearZeroDB()
    with torch.no_grad():
        net.mean.weight.fill_(1.0 / 27)
        big = torch.randn_like(net.whole.weight) * 1e5
        split = torch.rand_like(big)
        net.whole.weight.copy_(big)
        net.part1.weight.copy_(big * split)
        net.part2.weight.copy_(big - big * split)
    return net.eval()
