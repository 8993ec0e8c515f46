"""paddle2onnx's multiclass_nms3 pattern in an ONNX graph (export/onnx_nms.py): found with the attributes paddle2onnx
read from the Paddle op, on the export tests/data/paddledet_onnx holds; anything else is left to X2Paddle. Pure
ONNX; the op written into the program and its rows against ONNX Runtime run in tests/e2e/test_detection_paddledet.py."""

from __future__ import annotations

from pathlib import Path

import onnx

from edgekit.examples.detector import with_nms
from edgekit.export import onnx_nms

EXPORT = Path(__file__).resolve().parents[1] / "data" / "paddledet_onnx" / "detector_nms.onnx"


def test_the_pattern_is_found_with_the_paddle_ops_attributes():
    model = onnx.load(str(EXPORT))
    lift = onnx_nms.find(model)
    assert lift is not None and (lift.boxes, lift.scores) == ("Min.1", "sigmoid_0.tmp_0")   # clipped boxes, sigmoid
    assert [lift.rows, lift.count] == [o.name for o in model.graph.output]
    assert lift.attrs == {"score_threshold": with_nms.SCORE_THRESHOLD, "nms_top_k": with_nms.NMS_TOP_K,
                          "nms_threshold": with_nms.NMS_IOU, "keep_top_k": with_nms.KEEP_TOP_K, "normalized": True,
                          "nms_eta": 1.0, "background_label": -1}
    network = onnx_nms.network(model, lift)
    assert [o.name for o in network.graph.output] == ["Min.1", "sigmoid_0.tmp_0"]
    assert not {"NonMaxSuppression", "TopK"} & {n.op_type for n in network.graph.node}
    assert onnx_nms.find(network) is None                          # no NMS: nothing to write back


def test_a_tail_that_filters_a_background_class_is_left_to_x2paddle():
    model = onnx.load(str(EXPORT))
    topk = next(n for n in model.graph.node if n.op_type == "TopK")
    model.graph.node.append(onnx.helper.make_node("NonZero", [topk.output[1]], ["background_filter"]))
    assert onnx_nms.find(model) is None
