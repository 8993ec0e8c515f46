"""The PP-OCRv4 rec ONNX with width-free reshapes, so its Paddle-Lite `.nb` reads lines of any width.

    python -m edgekit.examples.ppocr.free_width OUT.onnx     # writes OUT.onnx, prints its path

The rapidocr 1.4.4 rec model computes its six Reshape targets from Shape ops. X2Paddle
cannot convert it with a dynamic width (layer_norm sees [-1, -1, -1]), and with the width
fixed at 320 it folds those targets into constants holding the 40 CTC steps of a 320-wide
input ([1, 120, -1], [0, 40, 3, 8, 15], ..., [0, 1, 40, 120]); the `.nb` then stops at
any other width (Lite: `reshape_op.cc ValidateShape ... Invalid shape is given`).

This rewrite measures each target in ONNX Runtime at three (batch, width) probes and writes
it as a constant that holds for all of them: a dim that never changes stays, one that
follows the input dim at its index becomes 0 (copy), the one left becomes -1 (infer). The
shape computations die and are dropped. The result is checked against the source model in
ONNX Runtime at widths the probes did not use. No weight changes; no retraining.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from edgekit import atomic
from edgekit.errors import EdgekitError, InputModelError

from . import models

PROBES = ((1, 320), (2, 480), (1, 640))          # (batch, width) at height 48
CHECKS = ((1, 320), (3, 800), (1, 1280), (2, 96))
MAX_ABS = 1e-4                                   # measured 1.4e-6 on the checks


def free_width(source: Path, out: Path) -> Path:
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    reshapes = [n for n in graph.node if n.op_type == "Reshape"]
    watched = [name for n in reshapes for name in n.input[:2]]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for name in watched:
        probe.graph.output.append(onnx.ValueInfoProto(name=name))
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    seen = [dict(zip(watched, session.run(watched, {models.INPUT_NAME: rng.standard_normal((b, 3, 48, w), np.float32)})))
            for b, w in PROBES]
    for k, node in enumerate(reshapes):
        targets = [s[node.input[1]].tolist() for s in seen]
        shapes = [s[node.input[0]].shape for s in seen]
        fixed = []
        for d in range(len(targets[0])):
            values = {t[d] for t in targets}
            if len(values) == 1 and not values & {0, -1}:
                fixed.append(targets[0][d])
            elif all(d < len(s) and t[d] in (s[d], 0) for t, s in zip(targets, shapes)):
                fixed.append(0)
            else:
                fixed.append(-1)
        if fixed.count(-1) > 1:
            raise InputModelError(f"{source}: Reshape {node.name} has targets {targets} at (batch, width) {PROBES}: "
                                  "no single width-free constant", "this rewrite fits the PP-OCRv4 rec model only")
        name = f"edgekit_free_width_shape_{k}"
        graph.initializer.append(numpy_helper.from_array(np.array(fixed, np.int64), name))
        node.input[1] = name
    needed = {o.name for o in graph.output}
    keep = []
    for node in reversed(list(graph.node)):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(node.input)
    del graph.node[:]
    graph.node.extend(reversed(keep))
    used = {i for n in graph.node for i in n.input}
    initializers = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    onnx.checker.check_model(model)
    reference = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    rewritten = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for b, w in CHECKS:
        x = rng.standard_normal((b, 3, 48, w), np.float32)
        a, c = reference.run(None, {models.INPUT_NAME: x})[0], rewritten.run(None, {models.INPUT_NAME: x})[0]
        if a.shape != c.shape or float(np.abs(a - c).max()) > MAX_ABS:
            raise InputModelError(f"{source}: the width-free rewrite changes the output at batch {b}, width {w}",
                                  "this rewrite fits the PP-OCRv4 rec model only")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic.replacing(out) as tmp:
        onnx.save(model, str(tmp))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m edgekit.examples.ppocr.free_width OUT.onnx", file=sys.stderr)
        return 2
    try:
        print(free_width(models.model_path("rec"), Path(argv[0])))
    except EdgekitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
