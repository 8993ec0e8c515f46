"""The pool and Ray executors with real worker processes: order, a worker killed mid-task retried, failures alone."""

import os
import signal
import sys
from pathlib import Path

import pytest

from edgekit.core import executors
from edgekit.core.executors import Resources, Task, WorkerLost

pytestmark = pytest.mark.e2e


def pid_and_square(x):
    return os.getpid(), x * x


def die_once(marker, x):
    """Kills its own worker process the first time (as the OOM killer or a kill -9 would), answers the second."""
    marker = Path(marker)
    if not marker.exists():
        marker.write_text("died once")
        os.kill(os.getpid(), signal.SIGKILL)
    return x


def always_die(x):
    os.kill(os.getpid(), signal.SIGKILL)


def raise_value_error(x):
    raise ValueError(f"bad input {x}")


def _check(executor, tmp_path, shared_loss=False):
    out = executor.map(pid_and_square, range(6))
    assert [o.value[1] for o in out] == [x * x for x in range(6)]
    assert all(pid != os.getpid() for pid, _ in (o.value for o in out))      # the work ran in other processes

    tasks = [Task(die_once, (str(tmp_path / "marker"), 5), retries=2), Task(raise_value_error, (3,), retries=2),
             Task(pid_and_square, (4,))]
    died, failed, fine = executor.run(tasks)
    assert died.ok and died.value == 5 and died.attempts >= 2
    assert isinstance(failed.error, ValueError) and "bad input 3" in str(failed.error)
    # the pool cannot tell which worker died: a task in flight beside the killed one counts a lost attempt too
    assert failed.attempts == 1 or (shared_loss and failed.attempts == 2)
    assert fine.ok and fine.value[1] == 16

    (gone,) = executor.run([Task(always_die, (1,), retries=1)])
    assert isinstance(gone.error, WorkerLost) and gone.attempts == 2


def test_pool_executor(tmp_path):
    with executors.PoolExecutor(workers=2) as pool:
        assert pool.workers == 2
        _check(pool, tmp_path, shared_loss=True)


def test_pool_counts_workers_from_memory():
    huge = executors.PoolExecutor(memory_mb=10**9)       # no machine holds two of these
    assert huge.workers == 1


def test_ray_local_executor(tmp_path):
    ray = pytest.importorskip("ray")     # the test extra installs it; CI runs this
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])     # Ray's workers cannot import test files
    with executors.RayExecutor("auto", workers=2) as on_ray:
        assert on_ray.workers == 2
        assert on_ray.slots(Resources(cpus=1)) == 2 and on_ray.slots(Resources(cpus=2)) == 1
        _check(on_ray, tmp_path)
    assert not ray.is_initialized()


def test_a_local_ray_cluster_listens_on_loopback_with_token_auth(monkeypatch):
    """Issue 32: `--ray auto` started a cluster listening on every interface; with RAY_AUTH_MODE=disabled (the test
    clusters' setting) any host could connect and run a task. Now: 127.0.0.1 only, token auth on regardless."""
    import socket

    ray = pytest.importorskip("ray")
    from ray._private.authentication.authentication_utils import is_token_auth_enabled

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with executors.RayExecutor("auto", workers=1):
        gcs = ray.get_runtime_context().gcs_address
        host, port = gcs.rsplit(":", 1)
        assert host == "127.0.0.1", gcs
        assert is_token_auth_enabled()
        socket.create_connection(("127.0.0.1", int(port)), timeout=5).close()
        from ray._private.services import node_ip_address_from_perspective

        reachable = node_ip_address_from_perspective()      # where Ray listened before (every interface)
        for address in [reachable] if not reachable.startswith("127.") else []:
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((address, int(port)), timeout=5).close()
    assert not ray.is_initialized()
    assert os.environ["RAY_AUTH_MODE"] == "disabled" and "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ


STUBBORN_POOL = """
import os, signal, sys, time
from edgekit.core import executors
from edgekit.core.executors import Task


def stubborn(seconds):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)    # stuck where a signal does not reach (C code, a lock, a full pipe)
    time.sleep(seconds)


def die_soon(seconds):
    time.sleep(seconds)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    pool = executors.PoolExecutor(workers=2)
    stuck, died = pool.run([Task(stubborn, (600,), retries=0), Task(die_soon, (2,), retries=0)])
    print(type(stuck.error).__name__, type(died.error).__name__, flush=True)
"""


def test_a_broken_pool_leaves_no_worker_to_hang_the_exit(tmp_path):
    """The CI run that passed its 1,319 tests and then hung at interpreter exit: a pool broken by a dead worker was
    dropped (shutdown(wait=False)) while its other worker was still in a task SIGTERM could not stop; Python's exit
    joins every pool's manager thread, which joins that worker for ever. A dropped pool's workers are now killed."""
    import subprocess

    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN_POOL)
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                              cwd=Path(__file__).resolve().parents[2])
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"the process did not exit: {error.stdout!r}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["WorkerLost", "WorkerLost"]
