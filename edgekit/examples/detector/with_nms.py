"""The detector example exported as PaddleDetection exports its detectors: box decoding and `multiclass_nms3` in the graph.

The same architecture and weights as `model.py` (the state dict is unchanged: `weights = "detector.pdparams"`
loads), with a forward that ends the way PaddleDetection's PicoDet/PP-YOLOE export does: the distribution-focal
sides are decoded into boxes [N, M, 4] (x0, y0, x1, y1 in input pixels), the class logits go through a sigmoid
into scores [N, C, M] (class-major, the layout `multiclass_nms3` reads), and `multiclass_nms3` keeps the best
boxes. Outputs: rows [K, 6] of (class, score, x0, y0, x1, y1) over the batch, best first per image, and the
per-image count `bbox_num` [N] (int32).

    ./run edgekit build -c edgekit/examples/detector/with_nms.toml --target arm64 --quant int8

The build finds the NMS op and decides whether Lite keeps it (lite/nms.py); the manifest's `model.nms`
says what it decided and why. `create_matrix` ends in `matrix_nms` instead (PP-YOLOv2-style decayed scores);
`create_paddledet` takes PaddleDetection's `im_shape` and `scale_factor` inputs as well (`paddledet.toml`); saved by
Paddle 3 as PIR with PaddleX's inference.yml, it is the PaddleX 3 detector folder of `paddlex3.py`.
"""

from __future__ import annotations

import numpy as np
import paddle

from .model import NUM_CLASSES, REG_MAX, STRIDES, Detector

SIZE = 96                      # the example's input side
# PaddleDetection's MultiClassNMS parameters, set to what the bundle's task.json NMS does (docs/detection.md)
SCORE_THRESHOLD = 0.05
NMS_IOU = 0.5
NMS_TOP_K = 1000
KEEP_TOP_K = 100


def anchor_points() -> tuple[np.ndarray, np.ndarray]:
    """Cell centres [M, 2] (x, y in input pixels) and strides [M, 1] of every anchor, stride by stride, row-major."""
    centres, strides = [], []
    for stride in STRIDES:
        n = SIZE // stride
        rows, cols = np.divmod(np.arange(n * n), n)
        centres.append(np.stack([(cols + 0.5) * stride, (rows + 0.5) * stride], 1))
        strides.append(np.full((n * n, 1), stride))
    return np.concatenate(centres).astype(np.float32), np.concatenate(strides).astype(np.float32)


def multiclass_nms3(boxes, scores, score_threshold: float, nms_top_k: int, keep_top_k: int, nms_iou: float):
    """Paddle's `multiclass_nms3` op (no public Python API in Paddle 2.6): rows [K, 6] and the count per image.
    Called as PaddleDetection's `ops.multiclass_nms` calls it: the `_C_ops` function in dynamic mode and when Paddle 3
    traces into a PIR program, the legacy op otherwise (Paddle 2.6's static graph)."""
    attrs = {"background_label": -1, "score_threshold": score_threshold, "nms_top_k": nms_top_k,
             "nms_threshold": nms_iou, "keep_top_k": keep_top_k, "nms_eta": 1.0, "normalized": True}
    if getattr(paddle.framework, "in_dynamic_or_pir_mode", paddle.in_dynamic_mode)():
        out, _, count = paddle._C_ops.multiclass_nms3(boxes, scores, None, score_threshold, nms_top_k, keep_top_k,
                                                      nms_iou, True, 1.0, -1)
        return out, count
    from paddle.base.layer_helper import LayerHelper

    helper = LayerHelper("multiclass_nms3")
    out = helper.create_variable_for_type_inference(dtype=boxes.dtype)
    index = helper.create_variable_for_type_inference(dtype="int32")
    count = helper.create_variable_for_type_inference(dtype="int32")
    helper.append_op(type="multiclass_nms3", inputs={"BBoxes": boxes, "Scores": scores},
                     outputs={"Out": out, "Index": index, "NmsRoisNum": count}, attrs=attrs)
    out.stop_gradient = index.stop_gradient = count.stop_gradient = True
    return out, count


class DetectorWithNMS(Detector):
    def forward(self, image):
        boxes, scores = self.decode(image)
        return multiclass_nms3(boxes, scores, SCORE_THRESHOLD, NMS_TOP_K, KEEP_TOP_K, NMS_IOU)

    def decode(self, image):
        """Boxes [N, M, 4] in input pixels and class scores [N, C, M] (after the sigmoid)."""
        cls8, cls16, reg8, reg16 = Detector.forward(self, image)   # (to_static cannot trace super())
        n = 0                                   # reshape keeps the batch dimension
        scores = paddle.nn.functional.sigmoid(paddle.concat(
            [paddle.reshape(c, [n, NUM_CLASSES, -1]) for c in (cls8, cls16)], axis=2))          # [N, C, M]
        reg = paddle.concat([paddle.reshape(r, [n, 4 * (REG_MAX + 1), -1]) for r in (reg8, reg16)], axis=2)
        bins = paddle.reshape(paddle.transpose(reg, [0, 2, 1]), [n, -1, 4, REG_MAX + 1])
        weights = paddle.to_tensor(np.arange(REG_MAX + 1, dtype=np.float32))
        centres, strides = (paddle.to_tensor(a) for a in anchor_points())
        sides = paddle.sum(paddle.nn.functional.softmax(bins, axis=-1) * weights, axis=-1) * strides   # [N, M, 4]
        boxes = paddle.concat([centres - sides[:, :, :2], centres + sides[:, :, 2:]], axis=-1)        # [N, M, 4]
        return boxes, scores


class DetectorWithMatrixNMS(DetectorWithNMS):
    """The same, ending in `matrix_nms` (PP-YOLOv2's and SOLOv2's soft, decay-based NMS) instead."""

    def forward(self, image):
        boxes, scores = self.decode(image)
        out, count, _ = paddle.vision.ops.matrix_nms(boxes, scores, SCORE_THRESHOLD, SCORE_THRESHOLD, NMS_TOP_K,
                                                     KEEP_TOP_K, background_label=-1, normalized=True)
        return out, count


class DetectorPaddleDetInputs(DetectorWithNMS):
    """The same, with PaddleDetection's three inputs: `image`, `im_shape` and `scale_factor` ([N, 2] each, the
    resized (h, w) and the (y, x) resize factors). As PaddleDetection's post-processing does, the boxes are divided
    by the scale factors and clipped to the source image (`im_shape / scale_factor`) before `multiclass_nms3`."""

    def forward(self, image, im_shape, scale_factor):
        boxes, scores = self.decode(image)
        scale_y, scale_x = paddle.split(scale_factor, 2, axis=-1)                      # [N, 1] each
        scale = paddle.reshape(paddle.concat([scale_x, scale_y, scale_x, scale_y], axis=-1), [-1, 1, 4])
        origin = paddle.floor(im_shape / scale_factor + 0.5)                           # the source (h, w)
        height, width = paddle.split(origin, 2, axis=-1)
        upper = paddle.reshape(paddle.concat([width, height, width, height], axis=-1), [-1, 1, 4])
        boxes = paddle.minimum(paddle.maximum(boxes / scale, paddle.zeros_like(upper)), upper)
        return multiclass_nms3(boxes, scores, SCORE_THRESHOLD, NMS_TOP_K, KEEP_TOP_K, NMS_IOU)


def create() -> DetectorWithNMS:
    return DetectorWithNMS()


def create_matrix() -> DetectorWithMatrixNMS:
    return DetectorWithMatrixNMS()


def create_paddledet() -> DetectorPaddleDetInputs:
    return DetectorPaddleDetInputs()
