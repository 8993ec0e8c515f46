"""The PP-OCR example models as PaddleOCR 3.x ships them: PIR programs written by Paddle 3, each with an inference.yml.

    python -m edgekit.examples.ppocr.paddle3 OUT [det rec cls]

PaddleOCR 3.x and PaddleX 3.x distribute `inference.json` + `inference.pdiparams` + `inference.yml`.
The official files cannot be downloaded here, so this makes the same layout from the trained
networks the example already has: the rapidocr ONNX models imported (X2Paddle), then loaded and
saved again by Paddle 3 (`_resave_pir.py`, run in Paddle 3's interpreter), which writes PIR. The
inference.yml is written in PaddleOCR's own layout, with the same preprocessing as the example's
toml (RGB: the rapidocr models are fed RGB), the DB settings, the CTC dictionary or the labels.
OUT/<role>/ then builds with `edgekit build -m OUT/<role>`, and OUT/<role>-legacy/ holds the legacy
program it was made from (the same network, for comparisons).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from edgekit.core import proc
from edgekit.core.errors import EdgekitError, ToolError

from . import models

RESAVE = Path(__file__).with_name("_resave_pir.py")
SHAPES = {"det": [-1, 3, 320, 640], "rec": [-1, 3, 48, 320], "cls": [-1, 3, 48, 192]}
NORMALIZE = "  - NormalizeImage: {channel_num: 3, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], scale: 1./255., order: hwc}\n"


def inference_yml(role: str) -> str:
    """What PaddleOCR's exporter writes for the role (preprocessing, post-processing), with this example's sizes."""
    head = f"Global:\n  model_name: rapidocr-{role}\nPreProcess:\n  transform_ops:\n" \
           "  - DecodeImage: {channel_first: false, img_mode: RGB}\n"
    if role == "det":
        return (head + "  - DetResizeForTest: {image_shape: [320, 640]}\n" + NORMALIZE + "  - ToCHWImage: null\n"
                "  - KeepKeys: {keep_keys: [image, shape, polys, ignore_tags]}\n"
                "PostProcess:\n  name: DBPostProcess\n  thresh: 0.3\n  box_thresh: 0.6\n  max_candidates: 1000\n"
                "  unclip_ratio: 1.5\n")
    if role == "rec":
        characters = "".join(f"  - {_quoted(c)}\n" for c in models.rec_dictionary())
        return (head + "  - RecResizeImg: {image_shape: [3, 48, 320]}\n  - KeepKeys: {keep_keys: [image, label]}\n"
                "PostProcess:\n  name: CTCLabelDecode\n  character_dict:\n" + characters)
    return (head + "  - ClsResizeImg: {image_shape: [3, 48, 192]}\n  - KeepKeys: {keep_keys: [image, label]}\n"
            "PostProcess:\n  name: ClsPostProcess\n  label_list: ['0', '180']\n")


def _quoted(character: str) -> str:
    return "'" + character.replace("'", "''") + "'"


def make(out: Path, roles: list[str], timeout: float = 900.0) -> dict[str, Path]:
    """OUT/<role>/ (PIR + inference.yml) and OUT/<role>-legacy/ for each role; returns the PIR folders."""
    from edgekit.export import paddle3
    from edgekit.export.onnx_import import import_onnx

    p3 = paddle3.find()
    made = {}
    for role in roles:
        legacy = out / f"{role}-legacy"
        legacy.mkdir(parents=True, exist_ok=True)
        import_onnx(models.model_path(role), legacy, {"x": tuple(SHAPES[role])}, timeout=timeout)
        env = dict(os.environ, FLAGS_enable_pir_api="0", FLAGS_enable_pir_in_executor="1", GLOG_minloglevel="2")
        env.pop("PYTHONPATH", None)
        record = proc.run([p3.python, str(RESAVE), str(legacy / "model"), str(out / role / "inference")], timeout=timeout,
                          env=env, what=f"Paddle 3 re-saving {role} as PIR")
        if record.returncode != 0 or not (out / role / "inference.json").is_file():
            raise ToolError(f"Paddle 3 could not re-save the {role} model as PIR: {record.tail(3)}",
                            "check the Paddle 3 interpreter (EDGEKIT_PADDLE3_PYTHON)")
        (out / role / "inference.yml").write_text(inference_yml(role), encoding="utf-8")
        made[role] = out / role
    return made


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("roles", nargs="*", help="det, rec, cls (default: all three)")
    args = parser.parse_args(argv)
    unknown = [r for r in args.roles if r not in SHAPES]
    if unknown:
        parser.error(f"unknown role(s) {', '.join(unknown)}: use det, rec, cls")
    try:
        for role, folder in make(args.out, args.roles or ["det", "rec", "cls"]).items():
            print(f"{role}: {folder}")
    except EdgekitError as error:
        print("\n".join(error.lines()), file=sys.stderr)
        return error.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
