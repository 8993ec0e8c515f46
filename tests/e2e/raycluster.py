"""A real Ray cluster on 127.0.0.1 for tests: a head and more node processes (`ray start --block`), each with its
own custom resource, stopped by their process groups (only what the test started)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Ray 2.60 turns on token authentication for `ray start` clusters; a loopback test cluster opts out (the nodes and
# the driver alike), as Ray's message says to
NO_AUTH = {"RAY_AUTH_MODE": "disabled"}


def _start(argv: list[str], log: Path) -> subprocess.Popen:
    # TMPDIR below the cluster's folder: what its tasks leave in temporary folders (a killed node's) goes with it
    scratch = log.parent / "tmp"
    scratch.mkdir(exist_ok=True)
    return subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
                            env=dict(os.environ, **NO_AUTH, TMPDIR=str(scratch)))


def _stop(process: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
        if process.poll() is not None:
            break
        try:
            os.killpg(process.pid, sig)     # the group this test made: ray start and the raylet/GCS it started
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(process.pid, signal.SIGKILL)    # children left in the group after ray start itself exited
    except ProcessLookupError:
        pass


@contextmanager
def cluster(resources: list[str], cpus: int = 1, timeout: float = 120, nodes: list | None = None):
    """Yield the head's address; node i advertises {resources[i]: 1} and `cpus` CPUs (node 0 is the head).
    `nodes`, when given, receives each node's `ray start` process (for `kill_node`)."""
    ray_bin = str(Path(sys.executable).parent / "ray")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    temp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))     # short: Ray's socket paths live below it
    common = [f"--num-cpus={cpus}", "--disable-usage-stats", "--block"]
    processes = nodes if nodes is not None else []
    saved = {name: os.environ.get(name) for name in NO_AUTH}
    os.environ.update(NO_AUTH)
    try:
        processes.append(_start([ray_bin, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                                 "--include-dashboard=false", f"--temp-dir={temp}",
                                 f"--resources={json.dumps({resources[0]: 1})}", *common], temp / "head.log"))
        _wait_port(port, timeout, processes[0], temp / "head.log")
        for name in resources[1:]:
            processes.append(_start([ray_bin, "start", f"--address={address}", "--node-ip-address=127.0.0.1",
                                     f"--resources={json.dumps({name: 1})}", *common], temp / f"{name}.log"))
        yield address
    finally:
        for process in reversed(processes):
            _stop(process)
        shutil.rmtree(temp, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (Ray's workers are session leaders of their own, so not in the node's group)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_node(process: subprocess.Popen) -> list[int]:
    """A host that loses power: SIGKILL a node's `ray start`, its raylet and every process below them (workers and
    what they run), all started by this test. Returns the pids killed."""
    pids = [process.pid, *_descendants(process.pid)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)
    return pids


def _wait_port(port: int, timeout: float, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ray start --head exited: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"the Ray head did not listen on {port} within {timeout:.0f} s")


def wait_nodes(ray, count: int, timeout: float = 120) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        if len(alive) >= count:
            return alive
        time.sleep(0.5)
    raise RuntimeError(f"only {len(alive)} of {count} Ray nodes joined within {timeout:.0f} s")
