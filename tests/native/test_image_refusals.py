"""Python and C++ refuse the same images (issue 22): the crafted files of native/fuzz/corpus/image and
tests/data/untrusted, plus files one pixel beyond the pixels-per-byte bounds, through edgekit.core.images.decode_image
(cv2 behind edgekit/core/limits.py) and the app core's decoder (stb_image behind limits.h, via edgekit-app-tests
--decode). A refusal by a limit names the same limit on both sides."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pytest

from edgekit.core.images import decode_image, image_format
from edgekit.core.errors import DataError

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "native" / "fuzz" / "corpus" / "image"
UNTRUSTED = REPO / "tests" / "data" / "untrusted"
# The formats each side decodes differ by design: stb also reads PNM, cv2 behind edgekit.model.data also WebP.
COMMON_FORMATS = ("png", "jpeg", "bmp")
# Fuzz regressions inside the limits, where the decoders decide and differ by design (docs/security.md, "What
# remains"): a damaged JPEG scan stb decodes to garbage pixels and cv2 refuses. The fuzz harness replays them.
DECODERS_DIFFER = {"jpeg_bit_reader_negative_shift.jpg"}


def crafted_files(folder: Path) -> list[Path]:
    """The corpus images, the untrusted images, and headers one pixel beyond each pixels-per-byte bound, written with
    tests/data/untrusted/make.py's header makers. (Headers at the bound are left out: within the limits the decoders
    decide, and stb pads a truncated BMP or JPEG with zeros where cv2 refuses it.)"""
    spec = importlib.util.spec_from_file_location("untrusted_make", UNTRUSTED / "make.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    bmp, jpg = len(make.bmp_header(1, 1)), len(make.jpeg_header(1, 1))
    written = {"bmp_over.bmp": make.bmp_header(8 * bmp + 1, 1),
               "bmp_top_down_over.bmp": make.bmp_header(1, -(8 * bmp + 1)),
               "bmp_over_square.bmp": make.bmp_header(24, 24),
               "jpeg_over.jpg": make.jpeg_header(512 * jpg + 1, 1),
               "jpeg_over_square.jpg": make.jpeg_header(135, 135),
               "png_header_only.png": make.png_header(4000, 4000)}
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in written.items():
        (folder / name).write_bytes(data)
    corpus = [p for p in sorted(CORPUS.iterdir()) if p.name not in DECODERS_DIFFER]
    return corpus + sorted(UNTRUSTED.glob("huge_*")) + [folder / n for n in written]


def _python(path: Path):
    try:
        image = decode_image(path)
    except DataError as exc:
        return False, exc.message
    return True, f"{image.shape[1]}x{image.shape[0]}"


def _limit(message: str) -> str | None:
    found = re.search(r"beyond the limit (MAX_[A-Z_]+)", message)
    return found.group(1) if found else None


def test_both_sides_refuse_the_same_crafted_images(emulation, tmp_path):
    _, build = emulation("host")
    files = [p for p in crafted_files(tmp_path) if image_format(p.read_bytes()[:16]) in COMMON_FORMATS]
    assert len(files) >= 20
    done = subprocess.run([str(build.root / "edgekit-app-tests"), "--decode", *map(str, files)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    native = {Path(r["file"]).name: r for r in map(json.loads, done.stdout.splitlines())}
    if not native or all("no image decoder" in r.get("error", "") for r in native.values()):
        pytest.skip("this host build has no stb_image (apt-get install libstb-dev)")
    refused_by_limit = 0
    for path in files:
        ok, message = _python(path)
        got = native[path.name]
        assert ok == got["ok"], (path.name, message, got)
        if not ok:
            # a limit named on one side is the same limit on the other (or the other's decoder refused first)
            python_limit, native_limit = _limit(message), _limit(got["error"])
            if python_limit and native_limit:
                assert python_limit == native_limit, (path.name, message, got["error"])
                refused_by_limit += 1
        else:
            assert message == f"{got['width']}x{got['height']}", path.name
    assert refused_by_limit >= 8
