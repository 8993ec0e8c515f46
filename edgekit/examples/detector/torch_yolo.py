"""The detector example as a PyTorch model exported YOLOv8-style: box decoding in the graph, no NMS.

Run it with a Python that has torch and onnx (not edgekit's):

    python torch_yolo.py WEIGHTS.npz SAMPLES.npz OUT

WEIGHTS.npz holds the Paddle example's state dict as numpy arrays (`edgekit.examples.detector.
torch_yolo.paddle_weights` writes it from edgekit's environment); SAMPLES.npz an `eval` array of
preprocessed inputs. Writes OUT/model.onnx (input `x` [-1, 3, 96, 96]; outputs `boxes` [N, 180, 4]
in input pixels and `scores` [N, 180, 3] after the sigmoid: task.json head "decoded", activation
"none") and OUT/eval_torch.npz (PyTorch's own boxes and scores on `eval`). The architecture mirrors
model.py layer for layer, so the same weights give the same detections in both frameworks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

STRIDES = (8, 16)
REG_MAX = 7
NUM_CLASSES = 3


def paddle_weights(pdparams: Path, out: Path) -> Path:
    """The Paddle state dict as .npz (run in edgekit's environment, where paddle is)."""
    import paddle

    state = paddle.load(str(pdparams))
    np.savez(out, **{k: np.asarray(v) for k, v in state.items()})
    return out


def build():
    import torch
    from torch import nn

    def block(cin, cout, stride=1):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    class Head(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.stem = block(channels, channels)
            self.cls = nn.Conv2d(channels, NUM_CLASSES, 1)
            self.reg = nn.Conv2d(channels, 4 * (REG_MAX + 1), 1)

        def forward(self, x):
            x = self.stem(x)
            return self.cls(x), self.reg(x)

    class Yolo(nn.Module):
        def __init__(self):
            super().__init__()
            self.stage8 = nn.Sequential(block(3, 16, 2), block(16, 24, 2), block(24, 24), block(24, 48, 2), block(48, 48))
            self.stage16 = nn.Sequential(block(48, 64, 2), block(64, 64))
            self.lateral = nn.Conv2d(64, 48, 1, bias=False)
            self.head8, self.head16 = Head(48), Head(64)
            centres, strides = [], []
            for s in STRIDES:
                n = 96 // s
                ys, xs = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
                centres.append(np.stack([(xs.ravel() + 0.5) * s, (ys.ravel() + 0.5) * s], 1))
                strides.append(np.full((n * n, 1), s))
            self.register_buffer("centres", torch.tensor(np.concatenate(centres), dtype=torch.float32))
            self.register_buffer("strides", torch.tensor(np.concatenate(strides), dtype=torch.float32))
            self.register_buffer("bins", torch.arange(REG_MAX + 1, dtype=torch.float32))

        def forward(self, x):
            c8 = self.stage8(x)
            c16 = self.stage16(c8)
            p8 = c8 + nn.functional.interpolate(self.lateral(c16), scale_factor=2.0, mode="nearest")
            outs = [self.head8(p8), self.head16(c16)]
            n = x.shape[0]
            cls = torch.cat([c.reshape(n, NUM_CLASSES, -1) for c, _ in outs], 2).permute(0, 2, 1)
            reg = torch.cat([r.reshape(n, 4 * (REG_MAX + 1), -1) for _, r in outs], 2).permute(0, 2, 1)
            sides = (reg.reshape(n, -1, 4, REG_MAX + 1).softmax(-1) * self.bins).sum(-1) * self.strides
            boxes = torch.cat([self.centres - sides[..., :2], self.centres + sides[..., 2:]], -1)
            return boxes, cls.sigmoid()

    return Yolo()


def load(model, weights: Path):
    import torch

    names = {"_mean": "running_mean", "_variance": "running_var"}
    with np.load(weights) as state:
        mapped = {}
        for key in state.files:
            head, _, leaf = key.rpartition(".")
            mapped[f"{head}.{names.get(leaf, leaf)}"] = torch.from_numpy(state[key])
    own = model.state_dict()
    missing = {k for k in set(own) - set(mapped) - {"centres", "strides", "bins"} if "num_batches_tracked" not in k}
    if missing:
        raise SystemExit(f"error: weights lack {sorted(missing)[:5]}")
    own.update({k: v for k, v in mapped.items() if k in own})
    model.load_state_dict(own)
    return model.eval()


def main(argv: list[str]) -> int:
    import torch

    weights, samples, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    model = load(build(), weights)
    with np.load(samples) as loaded:
        x = loaded["eval"].astype(np.float32)
    torch.onnx.export(model, (torch.from_numpy(x[:1]),), str(out / "model.onnx"), dynamo=False, opset_version=13,
                      input_names=["x"], output_names=["boxes", "scores"],
                      dynamic_axes={"x": {0: "batch"}, "boxes": {0: "batch"}, "scores": {0: "batch"}})
    with torch.no_grad():
        boxes, scores = model(torch.from_numpy(x))
    np.savez(out / "eval_torch.npz", boxes=boxes.numpy(), scores=scores.numpy())
    print({"onnx": str(out / "model.onnx"), "torch": torch.__version__, "samples": len(x)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
