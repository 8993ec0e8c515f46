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


def _batchnorm_statistics_from_data(model: nn.Module, size: int = 64, batches: int = 4) -> nn.Module:
    """Running statistics measured on seeded inputs, as training leaves them: with random statistics the
    activations drift in scale block after block, and a deep net gives every input the same scores."""
    generator = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None                      # a cumulative average over the batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            offsets = torch.randn(16, 3, 1, 1, generator=generator)
            model(torch.randn(16, 3, size, size, generator=generator) * 0.5 + offsets)
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
