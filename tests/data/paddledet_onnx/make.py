"""Writes detector_nms.onnx in this folder: the detector example as PaddleDetection exports it, through paddle2onnx.

The model is `edgekit.examples.detector.with_nms:create_paddledet` with the example's weights: inputs `image`
[1, 3, 96, 96], `im_shape` and `scale_factor` [1, 2]; the boxes divided by scale_factor and clipped to
im_shape / scale_factor, then `multiclass_nms3` (score 0.05, IoU 0.5, nms_top_k 1000, keep_top_k 100). Paddle 2.6.2
saves it (`jit.save`); paddle2onnx 1.3.1 converts it, as users do. paddle2onnx is not one of edgekit's packages:
install it beside, not into, the environment.

    ./run python tests/data/paddledet_onnx/make.py /tmp/paddledet       # the Paddle program
    .venv/bin/pip install --no-deps --target /tmp/p2o paddle2onnx==1.3.1
    PYTHONPATH=/tmp/p2o .venv/bin/python /tmp/p2o/bin/paddle2onnx --model_dir /tmp/paddledet \
        --model_filename model.pdmodel --params_filename model.pdiparams --opset_version 11 \
        --save_file tests/data/paddledet_onnx/detector_nms.onnx

paddle2onnx raises the opset to 13 itself (for reduce_sum) and writes the NMS as ONNX NonMaxSuppression with a
tail that gathers the rows (export/onnx_nms.py), for batch 1 only. The batch is fixed at 1 here on purpose: with a
dynamic batch ([-1, 3, 96, 96]) paddle2onnx 1.3.1 writes the scores' box count as -1 into the tail's index
(class * M + box), and the ONNX model's rows of classes 1 and 2 are wrong (max abs 42-86 against Paddle on 7 of 8
evaluation scenes); with batch 1 they equal Paddle's within 2.3e-5, in another order.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out: Path) -> None:
    import paddle
    from paddle.static import InputSpec

    from edgekit.examples import detector
    from edgekit.examples.detector import with_nms

    model = with_nms.create_paddledet()
    model.set_state_dict(paddle.load(str(Path(detector.__file__).parent / "detector.pdparams")))
    model.eval()
    specs = [InputSpec([1, 3, 96, 96], "float32", "image"), InputSpec([1, 2], "float32", "im_shape"),
             InputSpec([1, 2], "float32", "scale_factor")]
    paddle.jit.save(paddle.jit.to_static(model, input_spec=specs), str(out / "model"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
