"""The x86 twin of a bundle in a process of its own (lite/runtime.py: TwinProcess).

Paddle-Lite's x86 predictor is native code edgekit does not control: a crafted or damaged
`host/model_x86.nb` can crash it (SIGSEGV). Run here, a crash ends this child, and the CLI
reports it in one line. Protocol on stdin/stdout, one exchange per call, no pickle:

    request:  8-byte little-endian length, then an .npz of the feeds (np.savez)
    answer:   b"K" + length + .npz of the outputs (arr_0, arr_1, ... in fetch order)
              b"E" + length + a UTF-8 message (an error this child caught: the runner raises it)

The first answer comes before any request: b"K" with an empty .npz once the predictor loaded.
"""

from __future__ import annotations

import io
import os
import struct
import sys

import numpy as np


def _read(stream, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return data


def _send(stream, kind: bytes, payload: bytes) -> None:
    stream.write(kind + struct.pack("<Q", len(payload)) + payload)
    stream.flush()


def _npz(arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, *arrays)
    return buffer.getvalue()


def main(argv: list[str]) -> int:
    from edgekit.core.errors import EdgekitError
    from edgekit.lite.runtime import LiteRunner, PerShapeRunner

    nb_file, per_shape, feeds = argv[0], argv[1] == "per-shape", argv[2:]
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr          # nothing but the protocol on the real stdout
    try:
        runner = PerShapeRunner(nb_file, feeds) if per_shape else LiteRunner(nb_file, feeds)
    except EdgekitError as exc:
        _send(stdout, b"E", exc.message.encode())
        return 0
    _send(stdout, b"K", _npz([]))
    while True:
        try:
            size = struct.unpack("<Q", _read(stdin, 8))[0]
            request = np.load(io.BytesIO(_read(stdin, size)), allow_pickle=False)
        except EOFError:
            # the parent is done: end now, without the interpreter's and Lite's teardown (a build's tier A waits for
            # this exit)
            stdout.flush()
            os._exit(0)
        try:
            outputs = runner.run({name: request[name] for name in feeds})
        except (EdgekitError, KeyError, ValueError, RuntimeError) as exc:
            _send(stdout, b"E", (getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}").encode())
            continue
        _send(stdout, b"K", _npz(outputs))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
