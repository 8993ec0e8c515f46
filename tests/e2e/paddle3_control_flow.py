"""A model with a tensor-dependent branch, written so Paddle 2.6 and Paddle 3 both trace it.

`forward` takes `branch_a` when the input's mean is above `threshold`, else `branch_b`: two
different conv/activation stacks with the same output shape. Paddle 3 exports the `if` as
`pd_op.if` (PIR), Paddle 2.6 as `conditional_block`. Imported by Paddle 3's interpreter (the
test's PIR export, and `--paddle 3` builds) and by edgekit's Paddle 2.6 factory route.
"""

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F

THRESHOLD = 0.0
SHAPE = (3, 16, 16)   # one sample, CHW


class BranchA(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(3, 8, 3, padding=1, bias_attr=False)
        self.bn = nn.BatchNorm2D(8)
        self.proj = nn.Conv2D(8, 4, 1)

    def forward(self, x):
        return F.sigmoid(self.proj(F.relu(self.bn(self.conv(x)))))


class BranchB(nn.Layer):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2D(3, 3, 3, padding=1, groups=3)
        self.pw = nn.Conv2D(3, 4, 1)

    def forward(self, x):
        return F.hardswish(self.pw(F.relu6(self.dw(x)))) * 0.5


class MeanGate(nn.Layer):
    def __init__(self, threshold=THRESHOLD, as_tensor=False):
        super().__init__()
        if as_tensor:
            self.register_buffer("threshold", paddle.to_tensor([float(threshold)], dtype="float32"))
        else:
            self.threshold = threshold
        self.branch_a = BranchA()
        self.branch_b = BranchB()

    def forward(self, x):
        if x.mean() > self.threshold:
            y = self.branch_a(x)
        else:
            y = self.branch_b(x)
        return y


def _seeded(layer):
    """Weights (and BN statistics) from numpy with a fixed seed: the same model under either Paddle version."""
    rng = np.random.RandomState(7)
    for name, tensor in sorted(layer.state_dict().items()):
        if name == "threshold":
            continue
        values = rng.uniform(-0.5, 0.5, tensor.shape)
        if name.endswith("_variance"):
            values = rng.uniform(0.5, 1.5, tensor.shape)
        tensor.set_value(values.astype("float32"))
    layer.eval()
    return layer


def mean_gate():
    """The seed model: `if x.mean() > self.threshold` with a Python float threshold."""
    return _seeded(MeanGate())


def mean_gate_tensor_threshold():
    """The same model and weights with the threshold held as a [1] buffer (the float threshold's 0-D
    `fill_constant` made Paddle-Lite 2.13 abort before `lite_safe` rewrote it)."""
    return _seeded(MeanGate(as_tensor=True))


def export(out_dir):
    """Under Paddle 3: the seed model as PIR (`out_dir/pir/model.json`), evaluation data that takes each branch
    (`high.npz`: every mean above the threshold, `low.npz`: below) and the dynamic model's outputs on it, with
    each branch's own outputs beside them (`expected.npz`), so a test can tell which branch a program took."""
    import os

    from paddle.static import InputSpec

    layer = mean_gate()
    rng = np.random.RandomState(0)
    base = rng.standard_normal((4,) + SHAPE).astype("float32")
    expected = {}
    for name, shift in (("high", 1.0), ("low", -1.0)):
        x = base + np.float32(shift)
        np.savez(os.path.join(out_dir, name + ".npz"), x=x)
        with paddle.no_grad():
            tensor = paddle.to_tensor(x)
            expected[name] = layer(tensor).numpy()
            expected[name + "_branch_a"] = layer.branch_a(tensor).numpy()
            expected[name + "_branch_b"] = layer.branch_b(tensor).numpy()
    np.savez(os.path.join(out_dir, "expected.npz"), **expected)
    spec = [InputSpec([None, *SHAPE], "float32", "x")]
    paddle.jit.save(paddle.jit.to_static(layer, input_spec=spec, full_graph=True), os.path.join(out_dir, "pir", "model"))


if __name__ == "__main__":
    import sys

    export(sys.argv[1])
