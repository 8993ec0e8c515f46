"""Paddle 3 inference of one PIR program on tensors of different shapes (run by the Paddle 3 interpreter).

bench/bench_ocrv5_system.py starts it with `.venv-paddle3`'s python (numpy and paddle only, nothing from edgekit):

    python _ocrv5_paddle3.py PREFIX INPUTS.npz OUTPUTS.npz

loads PREFIX.json + PREFIX.pdiparams once with Paddle 3's static executor and writes, for every array `k` of
INPUTS.npz (one tensor [1, C, H, W] each, any H and W), the program's first output as OUTPUTS.npz's `k`. One
launch serves all pages (det) or all crops (rec): the program is loaded once.
"""

from __future__ import annotations

import sys

import numpy as np


def main(prefix: str, inputs: str, outputs: str) -> int:
    import paddle

    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        program, feeds, fetches = paddle.static.load_inference_model(prefix, exe)
        found = {}
        with np.load(inputs) as data:
            for key in data.files:
                found[key] = np.array(exe.run(program, feed={feeds[0]: data[key]}, fetch_list=fetches)[0])
    np.savez(outputs, **found)
    print(f"paddle {paddle.__version__}: {len(found)} runs", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:4]))
