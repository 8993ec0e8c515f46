"""edgekit.lite.opt.parse_supported_table on tables shaped like print_supported_ops output."""

from __future__ import annotations

import pytest

from edgekit.core.errors import ConversionError
from edgekit.lite.opt import parse_supported_table

COLUMNS = ("kUnk", "kHost", "kX86", "kARM", "kOpenCL")


def table(rows: dict[str, set[str]], columns=COLUMNS, preamble="") -> str:
    """Right-aligned like Paddle-Lite: setw(40) op name, setw(10) per target, `Y` under a column's last char."""
    lines = [preamble] if preamble else []
    lines.append(f"{'OP_name':>40}" + "".join(f"{c:>10}" for c in columns))
    for op, marks in rows.items():
        lines.append((f"{op:>40}" + "".join(f"{'Y' if c in marks else ' ':>10}" for c in columns)).rstrip())
    return "\n".join(lines) + "\n"


ROWS = {
    "conv2d": {"kARM", "kX86"},
    "feed": {"kHost"},
    "io_copy": {"kUnk"},
    "x86_only_op": {"kX86"},
    "gpu_only_op": {"kOpenCL"},
    "no_kernel": set(),
}


def test_arm_target():
    assert parse_supported_table(table(ROWS), "kARM") == {"conv2d", "feed", "io_copy"}


def test_x86_target():
    assert parse_supported_table(table(ROWS), "kX86") == {"conv2d", "feed", "io_copy", "x86_only_op"}


def test_short_header_from_the_brief():
    text = (
        "                                        OP_name  kARM  kHost  kUnk\n"
        "                                         conv2d     Y\n"
        "                                           feed            Y\n"
        "                                        io_copy                  Y\n"
        "                                        nothing\n"
    )
    assert parse_supported_table(text, "kARM") == {"conv2d", "feed", "io_copy"}
    assert parse_supported_table(text, "kX86") == {"feed", "io_copy"}


def test_y_off_the_column_end_does_not_count():
    text = (
        "   OP_name  kARM  kX86\n"
        "    conv2d    Y\n"        # under the 'R' of kARM, not its last character
        "      relu     Y\n"
    )
    assert parse_supported_table(text, "kARM") == {"relu"}


def test_preamble_and_blank_lines_are_ignored():
    text = table({"relu": {"kARM"}}, preamble="Paddle-Lite ops list:\nsome log line Y") + "\n\n"
    assert parse_supported_table(text, "kARM") == {"relu"}


def test_no_header_is_a_conversion_error():
    with pytest.raises(ConversionError, match="no supported-ops table") as info:
        parse_supported_table("segmentation fault\nconv2d Y\n", "kARM")
    assert info.value.exit_code == 8
