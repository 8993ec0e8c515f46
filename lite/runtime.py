"""Run an x86 `.nb` on the host through the paddlelite wheel (the twin of the ARM model)."""

from __future__ import annotations

import io
import logging
import re
import signal
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from edgekit.core.errors import EdgekitError, InputModelError
from edgekit.model.runners import run_batched

log = logging.getLogger(__name__)


class LiteRunner:
    def __init__(self, nb_file: Path, feed_names: Sequence[str]) -> None:
        from paddlelite.lite import MobileConfig, create_paddle_predictor

        config = MobileConfig()
        config.set_model_from_file(str(nb_file))
        try:
            self.predictor = create_paddle_predictor(config)
        except Exception as exc:
            raise InputModelError(f"Paddle-Lite cannot load {nb_file} on this host ({exc})",
                                  "only x86 .nb files run on the host; ARM ones run on devices") from exc
        self.feed_names = list(feed_names)

    def run_one(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        for name in self.feed_names:
            self.predictor.get_input_by_name(name).from_numpy(np.ascontiguousarray(feeds[name]))
        self.predictor.run()
        # numpy() is a view into the predictor's buffer: the next run() overwrites it
        return [np.array(self.predictor.get_output_by_name(n).numpy(), copy=True)
                for n in self.predictor.get_output_names()]

    def run(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return run_batched(self.run_one, inputs, 1)


class PerShapeRunner:
    """The twin with one Paddle-Lite predictor per input shape (see the module's note on dynamic widths); the
    `keep` most recently used stay loaded (each holds the model's weights)."""

    def __init__(self, nb_file: Path, feeds: Sequence[str], keep: int = 8) -> None:
        self.nb_file, self.feeds, self.keep, self.predictors = nb_file, list(feeds), keep, {}

    def run(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        key = tuple(tuple(inputs[name].shape[1:]) for name in self.feeds)
        runner = self.predictors.pop(key, None) or LiteRunner(self.nb_file, self.feeds)
        self.predictors[key] = runner                 # most recent last
        while len(self.predictors) > self.keep:
            self.predictors.pop(next(iter(self.predictors)))
        return runner.run(inputs)


TWIN_HINT = ("the bundle's x86 twin (host_twin.file) is damaged or crafted: rebuild the bundle with `edgekit build`, "
             "or run its model.nb with --engine arm")


CHUNK_SAMPLES = 16         # samples per exchange with the twin's child (its answer: 16 x 3 MB for a PP-OCR recogniser)
CHUNK_BYTES = 8 << 20      # and at most this many bytes of inputs


class TwinProcess:
    """The x86 twin in a child process (lite/_twin_child.py): a crash of Paddle-Lite's native code ends the child, not
    the CLI, and becomes one error line with Lite's own last words (its fatal check, e.g. `reshape_op.cc:135
    InferShapeImpl: Input shape error`). What runs an untrusted bundle's twin (`run`, `ocr`, `parity`: an
    InputModelError, exit 3, by default) and the build's tiers (`crashed` makes the build's error).
    `per_shape`: one predictor per input shape, as PerShapeRunner (dynamic widths)."""

    def __init__(self, nb_file: Path, feed_names: Sequence[str], *, per_shape: bool = False,
                 crashed: Callable[[str], EdgekitError] | None = None) -> None:
        self.nb_file, self.feed_names = Path(nb_file), list(feed_names)
        self.crashed = crashed or self._bundle_crashed
        argv = [sys.executable, "-m", "edgekit.lite._twin_child", str(self.nb_file),
                "per-shape" if per_shape else "one", *self.feed_names]
        # Lite logs a line on stderr for every predictor it makes: not the user's business, but its fatal check is
        self.stderr = tempfile.TemporaryFile()
        try:
            self.child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        except OSError as exc:
            self.stderr.close()
            raise InputModelError(f"cannot start the x86 twin's process: {exc.strerror}",
                                  "check the installation (./run recreates the venv)") from exc
        self._answer()                     # the predictor loaded, or the reason it did not

    def __enter__(self) -> "TwinProcess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _bundle_crashed(self, how: str) -> EdgekitError:
        return InputModelError(f"Paddle-Lite's x86 runtime crashed on {self.nb_file} ({how})", TWIN_HINT)

    def _died(self) -> EdgekitError:
        code = self.child.wait()
        try:
            how = f"died from {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
        except ValueError:
            how = f"died from signal {-code}"
        why = last_words(self.stderr)
        return self.crashed(f"{how}: {why}" if why else how)

    def _answer(self) -> list[np.ndarray]:
        head = self.child.stdout.read(9)
        if len(head) != 9:
            raise self._died()
        kind, size = head[:1], struct.unpack("<Q", head[1:])[0]
        payload = self.child.stdout.read(size)
        if len(payload) != size:
            raise self._died()
        if kind == b"E":
            raise InputModelError(f"Paddle-Lite cannot run {self.nb_file} on this host "
                                  f"({payload.decode(errors='replace')[:300]})",
                                  "only x86 .nb files run on the host; ARM ones run on devices")
        with np.load(io.BytesIO(payload), allow_pickle=False) as arrays:
            return [arrays[f"arr_{i}"] for i in range(len(arrays.files))]

    def run_one(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        buffer = io.BytesIO()
        np.savez(buffer, **{name: np.ascontiguousarray(feeds[name]) for name in self.feed_names})
        data = buffer.getvalue()
        try:
            self.child.stdin.write(struct.pack("<Q", len(data)) + data)
            self.child.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None
        return self._answer()

    def run(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Every sample, sent a few at a time (the child runs them one by one): one exchange per sample cost 1.7 ms
        on the digits example, more than Lite's inference."""
        per_sample = sum(int(np.asarray(v[:1]).nbytes) for v in inputs.values()) or 1
        return run_batched(self.run_one, inputs, max(1, min(CHUNK_SAMPLES, CHUNK_BYTES // per_sample)))

    def close(self) -> None:
        if self.child.poll() is None:
            try:
                self.child.stdin.close()
                self.child.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.child.kill()
                self.child.wait()
        self.stderr.close()

    def __del__(self) -> None:
        child = getattr(self, "child", None)
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()


# Paddle-Lite's fatal log line: "[F 12/ 6 12:56: 6.676 ...Paddle-Lite/lite/operators/reshape_op.cc:135 InferShapeImpl]
# Input shape error" (glog-like: level, date, time, source file:line function, message)
LITE_FATAL = re.compile(r"^\[F [^\]]*?([\w.+-]+\.(?:cc|h|cpp)):(\d+) ?([^\]]*)\]\s*(.*)$")
LAST_WORDS_BYTES = 8192


def last_words(stderr) -> str:
    """What a dead child last said on `stderr` (a file): Lite's last fatal check as `file.cc:line function: message`,
    else its last non-empty line; "" when it said nothing."""
    stderr.seek(0, io.SEEK_END)
    stderr.seek(max(0, stderr.tell() - LAST_WORDS_BYTES))
    lines = [line.strip() for line in stderr.read().decode(errors="replace").splitlines() if line.strip()]
    for line in reversed(lines):
        found = LITE_FATAL.match(line)
        if found:
            source, number, function, message = found.groups()
            return f"{source}:{number} {function.strip()}: {message}".replace(" :", ":")[:240]
    return lines[-1][:240] if lines else ""
