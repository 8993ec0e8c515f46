"""What a dead x86 twin child said last (lite/runtime.py: last_words): Paddle-Lite's fatal check, shortened to
`file.cc:line function: message`, is what the build's and `edgekit run`'s one error line carry."""

from __future__ import annotations

import io

from edgekit.lite.runtime import LAST_WORDS_BYTES, last_words

ABORT = (b"[I 12/ 6 12:56: 6.100 ...Paddle-Lite/lite/api/light_api.cc:25 Build] load model\n"
         b"[F 12/ 6 12:56: 6.676 ...Paddle-Lite/lite/operators/reshape_op.cc:135 InferShapeImpl] Input shape error\n\n")


def test_lite_fatal_check_is_named_without_its_timestamp():
    assert last_words(io.BytesIO(ABORT)) == "reshape_op.cc:135 InferShapeImpl: Input shape error"


def test_without_a_fatal_line_the_last_line_is_kept():
    assert last_words(io.BytesIO(b"Traceback (most recent call last):\n  ...\nMemoryError: out\n")) == "MemoryError: out"
    assert last_words(io.BytesIO(b"")) == ""


def test_only_the_tail_is_read_and_a_line_is_bounded():
    noise = b"[I chatter]\n" * (2 * LAST_WORDS_BYTES // 12)
    assert last_words(io.BytesIO(noise + ABORT)) == "reshape_op.cc:135 InferShapeImpl: Input shape error"
    assert len(last_words(io.BytesIO(b"x" * 5000))) == 240
