"""Images whose header claims more pixels than the file can hold (issue 22): edgekit.core.images.decode_image applies the
pixels-per-byte limits of edgekit/core/limits.py, the twins of native/'s limits.h that the C++ decoder applies (the
same crafted files through both sides: tests/native/test_image_refusals.py)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from edgekit.core import limits
from edgekit.core.images import decode_image, image_format, image_size
from edgekit.core.errors import DataError

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "native" / "fuzz" / "corpus" / "image"
LIMITS_H = REPO / "native" / "core" / "include" / "edgekit" / "limits.h"


def _make():
    """tests/data/untrusted/make.py, whose header makers write the crafted images."""
    spec = importlib.util.spec_from_file_location("untrusted_make", REPO / "tests" / "data" / "untrusted" / "make.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_limits_are_the_twins_of_limits_h():
    """Every `// MAX_...` constant of limits.h has the value of its namesake here."""
    found = {}
    for value, name in re.findall(r"=\s*([^;]+);\s*//\s*(MAX_[A-Z_]+)", LIMITS_H.read_text()):
        expression = re.sub(r"std::uint64_t\{(\d+)\}", r"\1", value)
        assert re.fullmatch(r"[\d\s<]+", expression), (name, value)
        found[name] = eval(expression)          # digits and shifts only (checked above)
    assert {"MAX_JPEG_PIXELS_PER_BYTE", "MAX_BMP_PIXELS_PER_BYTE", "MAX_IMAGE_PIXELS", "MAX_IMAGE_SIDE"} <= set(found)
    assert found == {name: getattr(limits, name) for name in found}


@pytest.mark.parametrize("kind, ratio", [("jpeg", 512), ("bmp", 8)])
def test_the_pixels_per_byte_bound_is_exact(kind, ratio):
    """area > ratio x bytes is refused, area == ratio x bytes is not: the integer rule decode_stb.cc applies."""
    limits.check_image(DataError, "x", ratio * 100, 1, image_format=kind, file_bytes=100)
    with pytest.raises(DataError) as info:
        limits.check_image(DataError, "image x", ratio * 100 + 1, 1, image_format=kind, file_bytes=100)
    name = f"MAX_{kind.upper()}_PIXELS_PER_BYTE"
    assert f"beyond the limit {name} = {ratio}" in info.value.message
    assert f"image x ({ratio * 100 + 1}x1 pixels in 100 bytes) in pixels per byte is " in info.value.message
    # PNG and WebP have no such bound (deflate and VP8 have no minimum size per pixel); nor does a header alone
    limits.check_image(DataError, "x", 8000, 8000, image_format="png", file_bytes=100)
    limits.check_image(DataError, "x", 8000, 8000, image_format="webp", file_bytes=100)
    limits.check_image(DataError, "x", 8000, 8000)


@pytest.mark.parametrize("name, limit", [("jpeg_740_bytes_claiming_64mpx.jpg", "MAX_JPEG_PIXELS_PER_BYTE"),
                                         ("bmp_70_bytes_claiming_16mpx.bmp", "MAX_BMP_PIXELS_PER_BYTE"),
                                         ("huge_70_bytes.bmp", "MAX_IMAGE_PIXELS"),
                                         ("huge_header.jpg", "MAX_IMAGE_PIXELS")])
def test_crafted_files_of_the_fuzz_corpus_are_refused_by_name(name, limit):
    data = (CORPUS / name).read_bytes()
    width, height = image_size(data)
    assert width * height <= limits.MAX_IMAGE_PIXELS or limit == "MAX_IMAGE_PIXELS"
    with pytest.raises(DataError, match=f"beyond the limit {limit} = "):
        decode_image(CORPUS / name)


def test_one_pixel_beyond_the_bound_is_refused_before_decoding(tmp_path):
    """Files one pixel beyond the bound are refused by the limit; at the bound the decoder decides."""
    make = _make()
    bmp, jpg = len(make.bmp_header(1, 1)), len(make.jpeg_header(1, 1))       # 70 and 35 bytes
    cases = {"over.bmp": make.bmp_header(8 * bmp + 1, 1), "over.jpg": make.jpeg_header(512 * jpg + 1, 1),
             "at.bmp": make.bmp_header(8 * bmp, 1), "at.jpg": make.jpeg_header(512 * jpg, 1),
             "top_down_over.bmp": make.bmp_header(1, -(8 * bmp + 1))}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert image_format(data) == ("bmp" if name.endswith(".bmp") else "jpeg")
        with pytest.raises(DataError) as info:      # the "at" files are headers without pixels: cv2 refuses them
            decode_image(tmp_path / name)
        assert ("PIXELS_PER_BYTE" in info.value.message) == ("over" in name), (name, info.value.message)


def test_genuine_small_files_still_decode():
    for name in ("rgb.jpg", "progressive.jpg", "rgb.bmp", "top_down.bmp", "rgb.png", "gray.png"):
        image = decode_image(CORPUS / name)
        assert image.shape[:2] == (9, 7), name
