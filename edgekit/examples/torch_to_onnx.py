"""PyTorch -> ONNX for edgekit. Run it with your PyTorch environment's Python, not edgekit's.

    python torch_to_onnx.py OUT [--factory package.module:function] [--shape 1x3x32x32] [--samples 64]
    edgekit build -m OUT/model.onnx --calib OUT/calib.npz --eval OUT/eval.npz --quant int8

edgekit needs Python 3.8-3.10 (Paddle-Lite's wheels), PyTorch's current releases need
a newer one, so the two live in separate environments and meet at an ONNX file. This
script does the torch side the way edgekit's importer (X2Paddle 1.6) reads best:

- the TorchScript exporter (`dynamo=False`) at opset 13, with a dynamic batch but fixed
  C/H/W (X2Paddle cannot carry dynamic H/W through every op), the model in eval mode;
- the input named `x` and the output `scores`, valid identifiers both;
- `calib.npz` / `eval.npz` holding inputs under `x`, and `eval_torch.npz` holding
  PyTorch's own outputs on `eval.npz` (`scores`), so the bundle can be checked
  against PyTorch itself, not only against ONNX Runtime.

`--samples-from FILE.npz` (arrays `calib` and `eval`) writes those preprocessed samples instead of
random ones, with PyTorch's outputs on `eval`. Without `--factory` it exports a small seeded CNN (`demo_net`). The random inputs
written here only check the conversion: calibrate INT8 with real, preprocessed
samples of your data (`--calib`), as for any edgekit build.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import numpy as np


def demo_net():
    """A small classifier (conv-BN-ReLU x2, pooling, linear) with seeded weights and non-trivial BN statistics."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
    return net


def _factory(spec: str):
    module_name, _, function = spec.partition(":")
    if not module_name or not function:
        raise SystemExit(f"error: --factory {spec!r} is not package.module:function")
    return getattr(importlib.import_module(module_name), function)


def _inputs(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Noise plus a per-sample, per-channel offset: i.i.d. noise alone averages out in global pooling, so every
    sample would reach a pooled classifier with the same features and get the same scores."""
    offsets = rng.standard_normal((shape[0], shape[1]) + (1,) * (len(shape) - 2))
    return (rng.standard_normal(shape) * 0.5 + offsets).astype(np.float32)


def export(out: Path, model, shape: tuple[int, ...], samples: int, seed: int = 0, opset: int = 13,
           given: Path | None = None) -> dict:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    rng = np.random.default_rng(seed)
    example = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    # only the batch stays dynamic: X2Paddle carries a dynamic batch, not every op carries dynamic H/W
    options = dict(input_names=["x"], output_names=["scores"], opset_version=opset,
                   dynamic_axes={"x": {0: "batch"}, "scores": {0: "batch"}})
    try:
        torch.onnx.export(model, (example,), str(out / "model.onnx"), dynamo=False, **options)
    except TypeError:                         # torch < 2.5 has no `dynamo` argument: the TorchScript exporter is the only one
        torch.onnx.export(model, (example,), str(out / "model.onnx"), **options)
    per_sample = (samples, *shape[1:])
    calib, evaluation = _inputs(rng, per_sample), _inputs(rng, per_sample)
    if given is not None:                     # real, preprocessed samples: `calib` and `eval` arrays of one .npz
        with np.load(given) as loaded:
            calib, evaluation = loaded["calib"].astype(np.float32), loaded["eval"].astype(np.float32)
        samples = len(evaluation)
    np.savez(out / "calib.npz", x=calib)
    np.savez(out / "eval.npz", x=evaluation)
    with torch.no_grad():
        scores = torch.cat([model(torch.from_numpy(evaluation[i:i + shape[0]])) for i in range(0, samples, shape[0])])
    np.savez(out / "eval_torch.npz", scores=scores.numpy())
    return {"onnx": str(out / "model.onnx"), "torch": torch.__version__, "samples": samples, "opset": opset}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--factory", help="package.module:function returning the torch.nn.Module (default: demo_net)")
    parser.add_argument("--shape", default="1x3x32x32", help="the fixed input shape, NxCxHxW (default 1x3x32x32)")
    parser.add_argument("--samples", type=int, default=64, help="random samples per .npz (default 64)")
    parser.add_argument("--opset", type=int, default=13, help="ONNX opset (default 13; edgekit legalises 14+ ops "
                        "such as HardSwish, LayerNormalization and Gelu for X2Paddle)")
    parser.add_argument("--samples-from", type=Path, help=".npz with `calib` and `eval` arrays of preprocessed "
                        "samples to write instead of random ones (PyTorch's outputs on `eval` go to eval_torch.npz)")
    args = parser.parse_args(argv)
    try:
        shape = tuple(int(d) for d in args.shape.lower().split("x"))
    except ValueError:
        parser.error(f"--shape {args.shape!r} is not like 1x3x32x32")
    if args.samples < shape[0] or args.samples % shape[0]:
        parser.error(f"--samples {args.samples} must be a multiple of the batch size {shape[0]}")
    model = _factory(args.factory)() if args.factory else demo_net()
    print(export(args.out, model, shape, args.samples, opset=args.opset, given=args.samples_from))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
