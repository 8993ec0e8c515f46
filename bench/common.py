"""What the bench scripts share: the example builds' configs and flags, and the PP-OCR data they run on."""

from __future__ import annotations

from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "edgekit" / "examples"


def ocr_data(given: Path | None, examples: list[str], root: Path) -> Path | None:
    """`given`, else PP-OCR data rendered into `root/data` when an OCR example is asked for (make_data)."""
    if given is not None or all(e == "digits" for e in examples):
        return given
    from edgekit.examples.ppocr.make_data import make_data

    make_data(root / "data")
    return root / "data"


def example_flags(example: str, precision: str, data: Path | None) -> tuple[Path | None, dict]:
    """The config file and build flags of a bundled example: digits builds from its own toml, PP-OCR from
    `ppocr/<example>.toml` with the rendered data's evaluation (and, for int8, calibration) set."""
    config, flags = None, {"precision": precision}
    if example != "digits":
        from edgekit.examples.ppocr import models

        config = EXAMPLES_DIR / "ppocr" / f"{example}.toml"
        flags.update(model=str(models.model_path(example)), evaluation=data / f"{example}_eval.npz")
        if precision == "int8":
            flags["calibration"] = data / f"{example}_calib.npz"
    return config, flags
