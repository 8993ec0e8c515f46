"""One interface for independent work, three ways to run it: serial, a local process pool, or a Ray cluster.

A caller hands `Executor.run` a list of `Task`s (a picklable callable, its arguments, the
resources one run needs, how many times a lost worker may be replaced) and gets one
`Outcome` per task back, in submission order, whatever order they finished in. Every
executor keeps at most as many tasks in flight as it has slots, so a task that has been
started is running (that is what progress reports), and Ctrl-C (or SIGTERM) cancels what
runs and raises.

Callers ask an executor what it can do, never which class it is: `concurrent` (runs more
than one task at once), `ships_files` (tasks may run on hosts that cannot read this one's
files, so they carry the bytes they need), `cluster_resources()` (the CPUs, memory and
custom resources it holds in total) and `nodes()` (the hosts it runs tasks on).

A task is retried only when its worker was lost: the pool's process died, a Ray worker
or node died, or the task itself raised `WorkerLost` (a child it ran was killed by a
signal). Any other exception is the task's result; running it again would fail again.

- `SerialExecutor`: in this process, one task at a time (what a build does by default).
- `ThreadExecutor`: threads of this process, for tasks that wait on a child process (tier C's emulator
  shards when the build's executor is serial: what a build did before executors existed).
- `PoolExecutor`: separate worker processes (spawned, so no inherited toolchain state);
  as many as the cores and the available memory allow for the tasks' `memory_mb`.
- `RayExecutor`: `ray.init(num_cpus=...)` on this machine (address `auto` or None), or a
  running cluster (`ray start --head`; address `HOST:PORT`). `ray` is an optional extra.
"""

from __future__ import annotations

import concurrent.futures as futures
import logging
import multiprocessing
import os
import signal
import sys
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from edgekit.core.errors import ConfigError

log = logging.getLogger(__name__)

KINDS = ("serial", "pool", "ray")
RAY_HINT = "pip install edgekit[ray]"
DEFAULT_RETRIES = 2


class WorkerLost(Exception):
    """The process doing a task died (killed, out of memory, node gone): the task may run again elsewhere."""


@dataclass(frozen=True)
class Resources:
    """What one run of a task holds while it runs; `custom` names Ray custom resources (a device lease)."""

    cpus: float = 1.0
    memory_mb: int = 0
    custom: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    fn: Callable[..., Any]          # picklable: a module-level function (pool and Ray send it to another process)
    args: tuple = ()
    resources: Resources = Resources()
    retries: int = DEFAULT_RETRIES   # replacements of a lost worker, not reruns of a failure


@dataclass(frozen=True)
class Outcome:
    index: int                      # the task's position in the submitted list
    value: Any = None
    error: BaseException | None = None
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.error is None


# on_event(kind, index, attempt, outcome): kind is "running", "retry", "done" or "failed"
Event = Callable[[str, int, int, "Outcome | None"], None]


def _ignore(kind: str, index: int, attempt: int, outcome: Outcome | None) -> None:
    pass


class Executor:
    """The scheduling loop every executor shares; subclasses start, wait for and cancel single runs."""

    name = "executor"
    concurrent = True            # more than one task in flight at once (serial: one, in the caller's process)
    ships_files = False          # tasks may run where this host's files are not: they must carry them as bytes

    def run(self, tasks: Sequence[Task], on_event: Event = _ignore) -> list[Outcome]:
        tasks = list(tasks)
        outcomes: list[Outcome | None] = [None] * len(tasks)
        attempts = [0] * len(tasks)
        pending = deque(range(len(tasks)))
        running: dict[Any, int] = {}
        try:
            while pending or running:
                while pending and self._fits(tasks[pending[0]], [tasks[j] for j in running.values()]):
                    i = pending.popleft()
                    attempts[i] += 1
                    on_event("running", i, attempts[i], None)
                    running[self._start(tasks[i])] = i
                for handle, value, error in self._wait(list(running)):
                    i = running.pop(handle)
                    if isinstance(error, WorkerLost) and attempts[i] <= tasks[i].retries:
                        log.warning("task %d lost its worker (%s); running it again (attempt %d of %d)",
                                    i, error, attempts[i] + 1, tasks[i].retries + 1)
                        on_event("retry", i, attempts[i], None)
                        pending.appendleft(i)
                        continue
                    outcomes[i] = Outcome(i, value, error, attempts[i])
                    on_event("done" if error is None else "failed", i, attempts[i], outcomes[i])
        except BaseException:
            self._cancel(list(running))
            raise
        return outcomes  # type: ignore[return-value]

    def map(self, fn: Callable[..., Any], items: Iterable[Any], *, resources: Resources = Resources(),
            retries: int = DEFAULT_RETRIES, on_event: Event = _ignore) -> list[Outcome]:
        return self.run([Task(fn, (item,), resources, retries) for item in items], on_event)

    def slots(self, resources: Resources) -> int:
        raise NotImplementedError

    def cluster_resources(self) -> dict[str, float]:
        """Everything the executor holds, in Ray's terms: "CPU" (its slots for one-CPU tasks), "memory" (bytes
        available, absent when unknown) and custom resources (none on this host's executors)."""
        found = {"CPU": float(self.slots(Resources()))}
        memory = available_memory_mb()
        if memory is not None:
            found["memory"] = float(memory * 2**20)
        return found

    def nodes(self) -> list[dict]:
        """The hosts tasks run on: id, IP and the resources each advertises (here: this host alone)."""
        import socket

        return [{"id": f"local:{socket.gethostname()}", "ip": "127.0.0.1", "resources": self.cluster_resources()}]

    def _fits(self, task: Task, running: list[Task]) -> bool:
        """Whether `task` may start beside `running` (the ones in flight)."""
        return len(running) < self.slots(task.resources)

    def _start(self, task: Task) -> Any:
        raise NotImplementedError

    def _wait(self, handles: list) -> list[tuple[Any, Any, BaseException | None]]:
        raise NotImplementedError

    def _cancel(self, handles: list) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SerialExecutor(Executor):
    """Each task in this process when it is started; a `WorkerLost` it raises is retried like anywhere else."""

    name = "serial"
    workers = 1
    concurrent = False

    def slots(self, resources: Resources) -> int:
        return 1

    def _start(self, task: Task) -> Any:
        try:
            return _Finished(task.fn(*task.args), None)
        except Exception as error:      # a task's failure is its outcome; KeyboardInterrupt still stops the run
            return _Finished(None, error)

    def _wait(self, handles: list) -> list:
        return [(h, h.value, h.error) for h in handles]


class _Finished:
    """A serial run's handle: hashable whatever the task returned."""

    __slots__ = ("value", "error")

    def __init__(self, value: Any, error: BaseException | None) -> None:
        self.value, self.error = value, error


class ThreadExecutor(Executor):
    """Threads of this process, `workers` at a time: for tasks that wait on a child process of their own (an
    emulator run), where a worker process would only add a Python interpreter. A lost worker is a task's
    `WorkerLost` (its child killed by a signal)."""

    name = "threads"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers if workers and workers > 0 else usable_cores()
        self._pool: futures.ThreadPoolExecutor | None = None

    def slots(self, resources: Resources) -> int:
        return self.workers

    def _start(self, task: Task) -> Any:
        if self._pool is None:
            self._pool = futures.ThreadPoolExecutor(self.workers)
        return self._pool.submit(task.fn, *task.args)

    def _wait(self, handles: list) -> list:
        return _first_done(handles, lambda error: error)

    def _cancel(self, handles: list) -> None:
        for future in handles:       # a running thread cannot be stopped; its child ends with its timeout
            future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _first_done(handles: list, translate: Callable[[Exception], Exception]) -> list:
    """(future, value, error) for the futures that finished first; `translate` maps a raised error (e.g. a broken
    pool to WorkerLost)."""
    done, _ = futures.wait(handles, return_when=futures.FIRST_COMPLETED)
    out = []
    for future in done:
        try:
            out.append((future, future.result(), None))
        except Exception as error:
            out.append((future, None, translate(error)))
    return out


# ---------------------------------------------------------------- local process pool


MEMINFO = "/proc/meminfo"


def _meminfo_mb(field: str) -> int | None:
    """One field of /proc/meminfo (Linux) in MiB; None where it cannot be read."""
    try:
        with open(MEMINFO, encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_memory_mb() -> int | None:
    """MemAvailable: what the host can give now (it moves with every other job)."""
    return _meminfo_mb("MemAvailable")


# a container's memory limit, cgroup v2 then v1 (MemTotal inside a container is the whole host's)
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def _cgroup_limit_mb() -> int | None:
    for path in CGROUP_LIMITS:
        try:
            text = Path(path).read_text(encoding="ascii").strip()
        except (OSError, ValueError):
            continue
        if text.isdigit():
            return int(text) >> 20
        return None          # "max": no limit
    return None


def total_memory_mb() -> int | None:
    """The memory this machine gives us, the same from run to run: MemTotal, or the container's limit when smaller."""
    total, limit = _meminfo_mb("MemTotal"), _cgroup_limit_mb()
    if total is None or limit is None:
        return total if limit is None else limit
    return min(total, limit)


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:     # not Linux
        return max(1, os.cpu_count() or 1)


def default_workers(memory_mb: int = 0, cores: int | None = None, available_mb: int | None = None) -> int:
    """As many workers as cores, and no more than the available memory holds at `memory_mb` each."""
    cores = usable_cores() if cores is None else cores
    if memory_mb <= 0:
        return max(1, cores)
    available_mb = available_memory_mb() if available_mb is None else available_mb
    if available_mb is None:
        return max(1, cores)
    return max(1, min(cores, available_mb // memory_mb))


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _worker_init(threads: int) -> None:
    """A pool worker turns SIGTERM into SystemExit, so a child it runs (subprocess.run) is killed with it, and
    uses its share of the cores for math threads (as Ray's workers do), unless the environment says otherwise."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    for name in THREAD_VARS:
        os.environ.setdefault(name, str(threads))


STOP_GRACE_S = 10.0      # a terminated worker's time to end its task's children and clean up before it is killed


def _stop(pool: futures.ProcessPoolExecutor, grace: float = STOP_GRACE_S) -> None:
    """Stop a pool and every worker it has, whatever they are doing. The executor has no public way to stop running
    work: its processes are terminated (a worker turns SIGTERM into SystemExit and so kills its task's children), and
    any still alive after `grace` seconds are killed, so the pool's manager thread can end."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            log.warning("pool worker %s did not stop on SIGTERM within %.0f s; killing it", process.pid, grace)
            process.kill()
            process.join(timeout=grace)
    pool.shutdown(wait=False, cancel_futures=True)


class PoolExecutor(Executor):
    """Spawned worker processes; a dead worker breaks the pool, which is made anew, and its tasks are retried.

    The pool cannot tell which of its workers died, so every task in flight at that
    moment counts a lost attempt.
    """

    name = "pool"

    def __init__(self, workers: int | None = None, memory_mb: int = 0) -> None:
        self.workers = workers if workers and workers > 0 else default_workers(memory_mb)
        self._pool: futures.ProcessPoolExecutor | None = None

    def slots(self, resources: Resources) -> int:
        return self.workers

    def _ensure(self) -> futures.ProcessPoolExecutor:
        if self._pool is None:
            threads = max(1, usable_cores() // self.workers)
            self._pool = futures.ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                                     initializer=_worker_init, initargs=(threads,))
        return self._pool

    def _start(self, task: Task) -> Any:
        try:
            return self._ensure().submit(task.fn, *task.args)
        except futures.process.BrokenProcessPool:
            self._discard()
            return self._ensure().submit(task.fn, *task.args)

    def _wait(self, handles: list) -> list:
        def lost(error: Exception) -> Exception:
            if not isinstance(error, futures.process.BrokenProcessPool):
                return error
            self._discard()
            return WorkerLost(f"a pool worker process died ({error})")

        return _first_done(handles, lost)

    def _discard(self) -> None:
        """Drop a broken pool. Its workers are stopped here, not left to the pool's manager thread: a worker SIGTERM
        does not stop (in C code, ignoring it, blocked on a full pipe) would keep that thread, which Python's exit
        joins, alive for ever."""
        pool, self._pool = self._pool, None
        if pool is not None:
            _stop(pool)

    def _cancel(self, handles: list) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for future in handles:
            future.cancel()
        _stop(pool)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


# ---------------------------------------------------------------- Ray


def _call(fn: Callable[..., Any], args: tuple) -> Any:
    return fn(*args)


# `--ray auto` starts a cluster on this machine for this run: it listens on the loopback interface only, with Ray's
# token authentication on whatever RAY_AUTH_MODE says (docs/security.md). Ray resolves 127.0.0.1 to the host's
# reachable address unless it runs in its single-machine mode, which RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 selects;
# RAY_AUTH_MODE unset (None here) makes ray.init turn token authentication on for a new local cluster, in this
# process too.
LOOPBACK = "127.0.0.1"
LOCAL_RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": None}


@contextmanager
def _local_ray_env(local: bool):
    """LOCAL_RAY_ENV while a local cluster starts (its processes inherit it), then the environment as it was."""
    if not local:
        yield
        return
    saved = {name: os.environ.get(name) for name in LOCAL_RAY_ENV}
    for name, value in LOCAL_RAY_ENV.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    constants = sys.modules.get("ray._private.ray_constants")
    cluster = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if cluster:                     # ray was imported before: its flag was read from the environment then
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if cluster:
            constants.ENABLE_RAY_CLUSTER = cluster
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _check_loopback(ray) -> None:
    """The local cluster's GCS listens on the loopback address, or it is stopped and refused (fail closed)."""
    gcs = str(ray.get_runtime_context().gcs_address)
    if gcs.rsplit(":", 1)[0] not in (LOOPBACK, "localhost"):
        ray.shutdown()
        raise ConfigError(f"the local Ray cluster listens on {gcs}, not on {LOOPBACK}",
                          "start a cluster yourself (docs/security.md: Ray) and pass its address with --ray HOST:PORT")


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the Ray executor needs the ray package, which is not installed", RAY_HINT) from exc
    return ray


class RayExecutor(Executor):
    """Tasks as Ray tasks with the tasks' CPUs, memory and custom resources; lost workers retried here, not by Ray.

    `address` None or "auto" starts a local Ray on this machine with `workers` CPUs
    (default: cores and memory as the pool counts them) and the custom `resources` given
    (the device farm's leases of this host's devices); any other address joins that
    cluster, whose nodes must run the same edgekit and reach the same output folder.

    Tasks start while their CPUs and custom resources fit beside those in flight, so tasks
    pinned to different custom resources (devices on different nodes) run at once.
    """

    name = "ray"
    ships_files = True           # a node other than this one gets no file of the driver's

    def __init__(self, address: str | None = None, workers: int | None = None, memory_mb: int = 0,
                 resources: Mapping[str, float] | None = None) -> None:
        self.address = address or "auto"
        self.local = self.address in ("auto", "local")
        self._started = False
        with _local_ray_env(self.local):
            ray = self._ray = import_ray()
        if not ray.is_initialized():
            try:
                if self.local:
                    cpus = workers if workers and workers > 0 else default_workers(memory_mb)
                    with _local_ray_env(True):
                        ray.init(num_cpus=cpus, resources=dict(resources or {}), include_dashboard=False,
                                 configure_logging=False, log_to_driver=False, _node_ip_address=LOOPBACK)
                    self._started = True
                    _check_loopback(ray)
                else:
                    ray.init(address=self.address, configure_logging=False, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError(f"cannot connect to the Ray cluster at {self.address}: {str(exc).splitlines()[0]}",
                                  "start one with `ray start --head` and pass its address (HOST:PORT), "
                                  "or --ray auto for a local one") from exc
            self._started = True
        self._remote = ray.remote(_call)

    @property
    def workers(self) -> int:
        """The cluster's CPUs now (nodes may join or leave while it runs)."""
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def cluster_resources(self) -> dict[str, float]:
        """The cluster's totals now, as Ray counts them (nodes may join or leave while it runs)."""
        return {name: float(amount) for name, amount in self._ray.cluster_resources().items()}

    def nodes(self) -> list[dict]:
        return alive_nodes(self._ray)

    def slots(self, resources: Resources) -> int:
        total = self._ray.cluster_resources()
        fit = [total.get("CPU", 1) / resources.cpus] if resources.cpus > 0 else []
        fit += [total.get(name, 0) / amount for name, amount in resources.custom.items() if amount > 0]
        return max(1, int(min(fit))) if fit else max(1, int(total.get("CPU", 1)))

    def _fits(self, task: Task, running: list[Task]) -> bool:
        """Every resource `task` holds, beside what the running tasks hold, within the cluster's total (the first
        task always starts: Ray queues one that fits nowhere yet, until a node that can hold it joins)."""
        if not running:
            return True
        total = self._ray.cluster_resources()
        need = _demand(task.resources)
        if not need:
            return len(running) < max(1, int(total.get("CPU", 1)))
        for name, amount in need.items():
            used = sum(_demand(t.resources).get(name, 0.0) for t in running)
            if used + amount > total.get(name, 0.0) + 1e-9:
                return False
        return True

    def _start(self, task: Task) -> Any:
        r = task.resources
        options: dict = {"num_cpus": r.cpus, "max_retries": 0, "retry_exceptions": False}
        if r.memory_mb > 0:
            options["memory"] = r.memory_mb * 1024 * 1024
        if r.custom:
            options["resources"] = dict(r.custom)
        return self._remote.options(**options).remote(task.fn, task.args)

    def _wait(self, handles: list) -> list:
        ray = self._ray
        ready, _ = ray.wait(handles, num_returns=1)
        out = []
        for ref in ready:
            try:
                out.append((ref, ray.get(ref), None))
            except ray.exceptions.RayTaskError as error:    # the task raised: hand on its own exception
                cause = error.cause if getattr(error, "cause", None) is not None else error
                if isinstance(cause, ray.exceptions.ObjectLostError):
                    # the worker could not fetch the task's arguments from the object store (seen once as
                    # OwnerDiedError in a fresh-clone CI run, with the driver alive): Ray's fault, not the task's
                    cause = WorkerLost(f"the Ray worker could not get the task's arguments ({type(cause).__name__})")
                out.append((ref, None, cause))
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                    ray.exceptions.ObjectLostError, ray.exceptions.RaySystemError) as error:
                out.append((ref, None, WorkerLost(f"the Ray worker died ({type(error).__name__})")))
        return out

    def _cancel(self, handles: list) -> None:
        for ref in handles:
            try:
                self._ray.cancel(ref, force=True)
            except Exception as error:   # already finished or gone: nothing left to stop
                log.debug("ray.cancel: %s", error)

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False


def _demand(resources: Resources) -> dict[str, float]:
    """What a task holds in Ray's terms: CPU and its custom resources (memory is Ray's to place, not counted here)."""
    need = {"CPU": float(resources.cpus)} if resources.cpus > 0 else {}
    need.update({name: float(amount) for name, amount in resources.custom.items() if amount > 0})
    return need


def ray_node() -> dict:
    """Inside a Ray task: the node it runs on (Ray's node id, this host's name and IP)."""
    import socket

    ray = import_ray()
    return {"id": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname(),
            "ip": ray.util.get_node_ip_address()}


def alive_nodes(ray) -> list[dict]:
    """The cluster's live nodes: id, IP and the resources each advertises."""
    return [{"id": n["NodeID"], "ip": n.get("NodeManagerAddress"), "resources": dict(n.get("Resources") or {})}
            for n in ray.nodes() if n.get("Alive")]


# ---------------------------------------------------------------- choosing one


def make(kind: str = "pool", *, ray_address: str | None = None, workers: int | None = None,
         memory_mb: int = 0) -> Executor:
    if kind not in KINDS:
        raise ConfigError(f"executor {kind!r} is unknown", f"use one of {', '.join(KINDS)}")
    if kind == "serial":
        return SerialExecutor()
    if kind == "pool":
        return PoolExecutor(workers, memory_mb)
    return RayExecutor(ray_address, workers, memory_mb)


def parse_spec(spec: str) -> tuple[str, str | None]:
    """`serial`, `pool`, `ray` or `ray:ADDRESS` (EDGEKIT_EXECUTOR) -> (kind, ray address)."""
    kind, _, address = spec.strip().partition(":")
    kind = kind.lower()
    if kind not in KINDS or (address and kind != "ray"):
        raise ConfigError(f"EDGEKIT_EXECUTOR={spec!r} is not an executor", "use serial, pool, ray or ray:HOST:PORT")
    return kind, address or None


def from_environment(environ: Mapping[str, str] | None = None, *, memory_mb: int = 0) -> Executor:
    """Inside one build: EDGEKIT_EXECUTOR (default serial, so a build alone behaves as it always did)."""
    environ = os.environ if environ is None else environ
    kind, address = parse_spec(environ.get("EDGEKIT_EXECUTOR") or "serial")
    return make(kind, ray_address=address, memory_mb=memory_mb)


__all__ = ["Executor", "SerialExecutor", "ThreadExecutor", "PoolExecutor", "RayExecutor", "Task", "Outcome", "Resources", "WorkerLost",
           "make", "parse_spec", "from_environment", "default_workers", "ray_node", "alive_nodes", "KINDS"]
