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
