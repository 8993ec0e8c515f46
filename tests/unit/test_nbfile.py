"""edgekit.lite.nbfile: the .nb header and reproducible version padding."""

from __future__ import annotations

import struct

import pytest

from edgekit.core.errors import InputModelError
from edgekit.lite.nbfile import HEADER, NbHeader, read_header, zero_version_padding


def nb_bytes(fmt=2, version=b"v2.13-rc", program=100, params=50, program_len=None) -> bytes:
    head = struct.pack("<H16sQ", fmt, version, program if program_len is None else program_len)
    return head + b"\x01" * program + b"\x02" * params


def test_header_size_is_26_bytes():
    assert HEADER.size == 26


def test_read_header(tmp_path):
    path = tmp_path / "m.nb"
    path.write_bytes(nb_bytes())
    assert read_header(path) == NbHeader(format_version=2, opt_version="v2.13-rc", program_bytes=100,
                                         params_bytes=50, file_bytes=176)


def test_read_header_ignores_garbage_after_nul(tmp_path):
    path = tmp_path / "m.nb"
    path.write_bytes(nb_bytes(version=b"v2.13-rc\0\x90\x7f\x00\x00\x01", program=4, params=0))
    header = read_header(path)
    assert header.opt_version == "v2.13-rc"
    assert (header.program_bytes, header.params_bytes, header.file_bytes) == (4, 0, 30)


@pytest.mark.parametrize("data, fragment", [
    (b"\x02\x00v2.13", "too short"),
    (nb_bytes(fmt=1), "format 1"),
    (nb_bytes(version=b"2.13-rc"), "version '2.13-rc'"),
    (nb_bytes(program=10, params=0, program_len=11), "not a naive_buffer"),
])
def test_read_header_rejects(tmp_path, data, fragment):
    path = tmp_path / "bad.nb"
    path.write_bytes(data)
    with pytest.raises(InputModelError) as info:
        read_header(path)
    assert fragment in info.value.message
    assert info.value.exit_code == 3


def test_read_header_missing_file(tmp_path):
    with pytest.raises(InputModelError, match="cannot read"):
        read_header(tmp_path / "missing.nb")


def test_zero_version_padding(tmp_path):
    path = tmp_path / "m.nb"
    garbage = b"v2.13-rc\0\x11\x22\x00\x33\x44\x55\x66"
    assert len(garbage) == 16
    path.write_bytes(nb_bytes(version=garbage))
    before = path.read_bytes()
    assert zero_version_padding(path) == 6
    after = path.read_bytes()
    assert len(after) == len(before) == 176
    assert after[2:18] == b"v2.13-rc" + bytes(8)
    assert after[:2] == before[:2] and after[18:] == before[18:]
    assert read_header(path).opt_version == "v2.13-rc"
    assert zero_version_padding(path) == 0
    assert path.read_bytes() == after


def test_zero_version_padding_noop_cases(tmp_path):
    clean = tmp_path / "clean.nb"
    clean.write_bytes(nb_bytes())
    original = clean.read_bytes()
    assert zero_version_padding(clean) == 0
    assert clean.read_bytes() == original

    full = tmp_path / "full.nb"             # no NUL in the 16-byte field: nothing to zero
    full.write_bytes(nb_bytes(version=b"v2.13.0-rc12345x"))
    assert zero_version_padding(full) == 0

    short = tmp_path / "short.nb"
    short.write_bytes(b"\x02\x00v2")
    assert zero_version_padding(short) == 0
    assert short.read_bytes() == b"\x02\x00v2"


def fb_string(text: bytes) -> bytes:
    """A flatbuffers string: uint32 LE length, the bytes, a NUL."""
    return struct.pack("<I", len(text)) + text + b"\0"


def test_kernels_reads_length_prefixed_kernel_strings(tmp_path):
    from edgekit.lite.nbfile import Kernel, kernels

    program = (b"\x00" * 3 + fb_string(b"conv2d/fp32_out/4/2/1") + b"\x07junk"
               + struct.pack("<I", 99) + b"relu/def/4/1/1\0"          # wrong length prefix: not a string
               + fb_string(b"feed/def/1/4/1") + fb_string(b"custom/def/30/12/1"))
    path = tmp_path / "m.nb"
    path.write_bytes(struct.pack("<H16sQ", 2, b"v2.13-rc", len(program)) + program + b"params")
    assert kernels(path) == [
        Kernel("conv2d", "fp32_out", "ARM", "INT8"),
        Kernel("feed", "def", "Host", "Any"),
        Kernel("custom", "def", "target30", "precision12"),
    ]
