"""One device for the whole suite: what is pushed, how the runner is launched, what comes back.

Layout on the device, under the transport's session folder (removed at the end):

    <session>/<abi>/edgekit-lite-run, libpaddle_light_api_shared.so   pushed once per ABI
    <session>/b<i>/model.nb, input_<k>.npy (the bundle's golden inputs), eval.npz
    <session>/b<i>/launch-<n>/, rerun-<n>/, eval/                       the runner's --out folders

A launch is one runner process: the golden pass, then `warmup` and `iterations` runs
of its first sample. Its record (schema edgekit.runner/1) and outputs are pulled to a
local scratch folder; a failing or killed runner becomes a one-line error carrying
the runner's last (provisional) record, so the result shows where it stopped.
"""

from __future__ import annotations

import hashlib
import shutil
import signal
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.contracts import runner as runner_contract
from edgekit.core.errors import ConfigError, DataError, DeviceError, EdgekitError, InputModelError
from edgekit.model.data import run_lines
from .facts import DeviceFacts
from .preflight import Prepared, Runtime
from .transports import NO_SPACE, DeviceSpec, Transport

RECORD_KEYS = ("status", "phase", "exit_code", "error", "runtime_version", "load_ms", "first_run_ms", "pass_ms",
               "warmup_ms", "iteration_ms", "peak_rss_kb", "cpu", "notes", "threads", "batch")


class DeviceSession:
    def __init__(self, spec: DeviceSpec, transport: Transport, facts: DeviceFacts, runtimes: dict[str, Runtime], *,
                 threads: int, env: dict[str, str], timeout: float, keep: bool) -> None:
        self.spec, self.transport, self.facts, self.runtimes = spec, transport, facts, runtimes
        self.threads, self.env, self.timeout, self.keep = threads, env, timeout, keep
        self.scratch = Path(tempfile.mkdtemp(prefix="edgekit-device-pull-"))
        self.runners: dict[str, str] = {}          # ABI -> the runner's path on the device
        self.made = False
        self.temperature: float | None = None       # the last reading, taken after a launch

    def close(self) -> None:
        self.transport.close(self.keep)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def check_abi(self, p: Prepared) -> None:
        if p.abi in self.facts.abis:
            return
        runs = ", ".join(self.facts.abis) or "no ARM runner"
        state = " (or state ?abi=)" if self.spec.kind != "qemu" else ""
        raise DeviceError(f"{self.spec.label} is {self.facts.reported_abi} (runs {runs}), but {p.key} needs {p.abi}",
                          f"test the bundle on a device of its ABI, or build it for this device's target{state}")

    def push(self, p: Prepared) -> str:
        """The runner (once per ABI) and the bundle's model and golden inputs; returns the bundle's folder."""
        t = self.transport
        folder = f"{t.session}/b{p.index}"
        new = [] if self.made else [t.session]
        new += [f"{t.session}/{p.abi}"] if p.abi not in self.runners else []
        t.mkdir(*new, folder)
        self.made = True
        if p.abi not in self.runners:
            runner, library = self._local_binaries(self.runtimes[p.abi])
            t.push([library, runner], f"{t.session}/{p.abi}", executable=True)
            self.runners[p.abi] = f"{t.session}/{p.abi}/{runner.name}"
        t.push([p.nb_file, *p.feeds.values(), *(f for w in p.wide for f in w.feeds.values())], folder)
        return folder

    def _local_binaries(self, runtime: Runtime) -> tuple[Path, Path]:
        runner = Path(self.spec.get("runner") or runtime.runner)
        library = Path(self.spec.get("lib") or runtime.library)
        for what, path in (("runner", runner), ("lib", library)):
            if not path.is_file():
                raise ConfigError(f"{self.spec.label}: {what}={path} does not exist",
                                  f"give the {what} file built for the device")
        return runner, library

    def launch(self, p: Prepared, folder: str, label: str, warmup: int, iterations: int,
               rerun: bool = False) -> tuple[dict, list[np.ndarray]]:
        """One runner process on the golden inputs: its record excerpt, digest, temperatures; and its outputs."""
        # the temperature after one launch is the one before the next; none on a device without thermal zones
        before = self.temperature if self.temperature is not None else self.facts.temperature_c
        inputs = [a for name, file in p.feeds.items() for a in ("--input", f"{name}={file.name}")]
        record, files, seconds = self._run(p, folder, label, inputs, warmup, iterations)
        after = self.temperature = self.transport.temperature() if self.facts.temperature_c is not None else None
        entry = {"label": label, "rerun": rerun, "seconds": round(seconds, 3), "temperature_before_c": before,
                 "temperature_after_c": after, "output_sha256": digest(files),
                 "record": {k: record.get(k) for k in RECORD_KEYS}}
        return entry, [np.load(f) for f in files]

    def evaluate(self, p: Prepared, folder: str) -> dict:
        """The --eval subset without timing, in one launch (text lines: one per width group, at the group's width, as
        the build's tiers read them: `run_lines`); its task metric."""
        evaluation = p.evaluation
        files: list[Path] = []

        def launch(inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            label = f"eval-{len(files)}" if files else "eval"
            local = self.scratch / f"b{p.index}" / f"{label}.npz"
            local.parent.mkdir(parents=True, exist_ok=True)
            np.savez(local, **{k: np.ascontiguousarray(v) for k, v in inputs.items()})
            self.transport.push([local], folder)
            found = self._run(p, folder, label, ["--inputs", local.name], 0, 0)[1]
            files.extend(found)
            return [np.load(f) for f in found]

        metrics = evaluation.evaluate(run_lines(launch, evaluation.samples))
        primary = evaluation.primary
        return {"metric": primary, "value": float(metrics[primary]), "metrics": metrics, "samples": len(evaluation),
                "data": p.eval_source, "data_sha256": evaluation.digest(), "output_sha256": digest(files)}

    def _run(self, p: Prepared, folder: str, label: str, inputs: Sequence[str], warmup: int,
             repeat: int) -> tuple[dict, list[Path], float]:
        argv = [self.runners[p.abi], "--model", p.nb_file.name, *inputs, "--out", label, "--warmup", str(warmup),
                "--repeat", str(repeat), "--threads", str(self.threads)] + (["--rows"] if p.rows else [])
        for e in p.expect:
            argv += ["--expect", e]
        done = self.transport.run(argv, abi=p.abi, cwd=folder, env=self.env, timeout=self.timeout)
        local = self.scratch / f"b{p.index}" / label
        local.mkdir(parents=True, exist_ok=True)
        record = None
        if self.transport.pull([f"{folder}/{label}/{runner_contract.RUNNER_RECORD}"], local):
            record = runner_contract.read_runner_record(local)
        if done.returncode == 0 and (record or {}).get("status") == "error":
            done = replace(done, returncode=int(record.get("exit_code") or 1))   # an adb that loses exit codes
        if done.returncode != 0:
            error = runner_failure(self.spec, done, record, label)
            error.launch = {"label": label, "failed": True, "exit_status": done.returncode,
                            "seconds": round(done.seconds, 3), "record": {k: (record or {}).get(k) for k in RECORD_KEYS}}
            raise error
        if not runner_contract.runner_finished(record) or record.get("status") != "ok":
            state = f"status {record.get('status')} in {record.get('phase')}" if record else "no record"
            raise DeviceError(f"{self.spec.label}: the runner ended {label} without a finished record ({state})",
                              "killed without an exit status, or a runner of another edgekit version: rerun, or "
                              "rebuild native/")
        names = [f"output_{i}.npy" for i in range(len(record["outputs"]))]
        if not self.transport.pull([f"{folder}/{label}/{n}" for n in names], local):
            raise DeviceError(f"{self.spec.label}: outputs of {label} are missing on the device",
                              "check the device's disk space and rerun")
        return record, [local / n for n in names], done.seconds


def digest(files: Sequence[Path]) -> str:
    """sha256 over the outputs' files (each .npy holds dtype and shape): equal digests, bit-identical outputs."""
    found = hashlib.sha256()
    for f in files:
        found.update(hashlib.sha256(f.read_bytes()).digest())
    return found.hexdigest()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def runner_failure(spec: DeviceSpec, done, record: dict | None, label: str) -> EdgekitError:
    """One line for a runner that did not finish: killed (signal), not startable, or its own error (exit 1..7)."""
    from ..lite.native import RUNNER_ERRORS

    phase = (record or {}).get("phase", "start")
    code = done.returncode
    # a local child dies with -N; a remote shell reports a child's death as 128 + N
    number = -code if code < 0 else code - 128 if 128 < code <= 128 + 64 else None
    if number is not None:
        return DeviceError(f"{spec.label}: the runner was killed by {_signal_name(number)} during {phase} ({label}); "
                           "this run has no result", "out of memory (see dmesg / logcat), or stopped from outside: rerun")
    if code in (126, 127):
        hint = ("Android needs an NDK build of edgekit-lite-run and Paddle-Lite's Android library: pass "
                "?runner=PATH&lib=PATH" if spec.kind == "adb" else
                "check the device's ABI and that the folder is not mounted noexec (pass ?dir=)")
        return DeviceError(f"{spec.label}: the runner could not start on the device (exit {code}: {done.tail(1)})", hint)
    if code == 125:
        return DeviceError(f"{spec.label}: the suite's folder vanished from the device", "something cleaned it; rerun")
    message = (record or {}).get("error") or "; ".join(filter(None, runner_contract.runner_error_line(done.stderr))) \
        or done.tail(2) or f"exit {code}"
    if NO_SPACE in message + done.stderr:
        return DeviceError(f"{spec.label}: the device's disk is full: the runner could not write its outputs ({label})",
                           "free space on the device and rerun")
    cls = RUNNER_ERRORS.get(code)
    cls = cls if cls in (InputModelError, DataError) else DeviceError     # version lock, inputs: their own kind
    return cls(f"{spec.label}: edgekit-lite-run failed in {phase} ({label}, exit {code}): {message}",
               (record or {}).get("fix") or "see the record in the JSON result")
