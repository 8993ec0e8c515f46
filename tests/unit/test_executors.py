"""The executor's scheduling loop (serial: in this process, no subprocess): order, bounded retries, events, sizing."""

import sys

import pytest

from edgekit.core import executors
from edgekit.core.errors import ConfigError
from edgekit.core.executors import Outcome, Resources, SerialExecutor, Task, WorkerLost


def square(x):
    return x * x


def test_results_come_back_in_submission_order_with_events():
    events = []
    out = SerialExecutor().map(square, [3, 1, 2], on_event=lambda kind, i, attempt, o: events.append((kind, i, attempt)))
    assert [o.value for o in out] == [9, 1, 4] and [o.index for o in out] == [0, 1, 2]
    assert all(o.ok and o.attempts == 1 for o in out)
    assert events == [("running", 0, 1), ("done", 0, 1), ("running", 1, 1), ("done", 1, 1), ("running", 2, 1),
                      ("done", 2, 1)]


class Flaky:
    """Loses its worker `losses` times, then answers."""

    def __init__(self, losses):
        self.losses = losses
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        if self.calls <= self.losses:
            raise WorkerLost("killed")
        return x


def test_a_lost_worker_is_retried_within_the_bound():
    flaky = Flaky(2)
    events = []
    (out,) = SerialExecutor().run([Task(flaky, (7,), retries=2)], lambda kind, i, a, o: events.append(kind))
    assert out.ok and out.value == 7 and out.attempts == 3
    assert events == ["running", "retry", "running", "retry", "running", "done"]


def test_retries_are_bounded():
    flaky = Flaky(5)
    (out,) = SerialExecutor().run([Task(flaky, (7,), retries=1)])
    assert not out.ok and isinstance(out.error, WorkerLost) and out.attempts == 2 and flaky.calls == 2


def fails(x):
    raise ValueError(f"bad {x}")


def test_a_real_failure_is_the_outcome_and_is_not_retried():
    calls = []

    def counted(x):
        calls.append(x)
        return fails(x)

    out = SerialExecutor().run([Task(counted, (1,), retries=3), Task(square, (4,))])
    assert isinstance(out[0].error, ValueError) and out[0].attempts == 1 and calls == [1]
    assert out[1].ok and out[1].value == 16      # the other task still ran


def test_ctrl_c_stops_the_run():
    def interrupted(x):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        SerialExecutor().map(interrupted, [1, 2])


def test_workers_follow_cores_and_memory():
    assert executors.default_workers(0, cores=8, available_mb=1000) == 8
    assert executors.default_workers(2000, cores=8, available_mb=7000) == 3
    assert executors.default_workers(4000, cores=8, available_mb=1000) == 1     # always at least one
    assert executors.default_workers(100, cores=2, available_mb=None) == 2


def test_specs_and_kinds():
    assert executors.parse_spec("serial") == ("serial", None)
    assert executors.parse_spec("ray:10.0.0.1:6379") == ("ray", "10.0.0.1:6379")
    for bad in ("threads", "pool:3", ""):
        with pytest.raises(ConfigError):
            executors.parse_spec(bad)
    with pytest.raises(ConfigError):
        executors.make("threads")
    assert isinstance(executors.from_environment({}), SerialExecutor)


def test_asking_for_ray_without_it_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)      # import ray -> ImportError, as when it is not installed
    with pytest.raises(ConfigError) as caught:
        executors.make("ray")
    assert "pip install edgekit[ray]" in caught.value.hint


def test_outcome_and_resources_defaults():
    assert Outcome(0, 1).ok and not Outcome(0, error=ValueError()).ok
    assert Resources().cpus == 1.0 and Resources().custom == {}


# ---------------------------------------------------------------- what callers ask of an executor

class FakeRay:
    """What RayExecutor asks of the ray module for its totals and nodes."""

    def cluster_resources(self):
        return {"CPU": 6.0, "memory": 8.0 * 2**30, "edgekit-device:pi4": 1.0}

    def nodes(self):
        return [{"NodeID": "n1", "NodeManagerAddress": "10.0.0.1", "Alive": True, "Resources": {"CPU": 4.0}},
                {"NodeID": "n2", "NodeManagerAddress": "10.0.0.2", "Alive": False, "Resources": {"CPU": 2.0}},
                {"NodeID": "n3", "NodeManagerAddress": "10.0.0.3", "Alive": True,
                 "Resources": {"CPU": 2.0, "edgekit-device:pi4": 1.0}}]


def fake_ray_executor():
    ex = object.__new__(executors.RayExecutor)       # no ray.init: the capabilities are read from `ray` alone
    ex._ray = FakeRay()
    return ex


def test_capabilities_say_how_tasks_run_not_which_class_runs_them():
    serial, threads, pool, ray = SerialExecutor(), executors.ThreadExecutor(3), executors.PoolExecutor(2), \
        fake_ray_executor()
    assert [e.concurrent for e in (serial, threads, pool, ray)] == [False, True, True, True]
    assert [e.ships_files for e in (serial, threads, pool, ray)] == [False, False, False, True]
    assert [e.cluster_resources()["CPU"] for e in (serial, threads, pool, ray)] == [1.0, 3.0, 2.0, 6.0]
    available = executors.available_memory_mb()
    for local in (serial, threads, pool):        # this host's memory, as the pool sizes itself with it
        assert local.cluster_resources().get("memory") == (None if available is None else available * 2**20)
    assert ray.cluster_resources() == FakeRay().cluster_resources()


def test_nodes_are_this_host_locally_and_the_live_nodes_on_ray():
    (node,) = executors.ThreadExecutor(2).nodes()
    assert node["resources"]["CPU"] == 2.0 and node["ip"] == "127.0.0.1"
    assert fake_ray_executor().nodes() == [
        {"id": "n1", "ip": "10.0.0.1", "resources": {"CPU": 4.0}},
        {"id": "n3", "ip": "10.0.0.3", "resources": {"CPU": 2.0, "edgekit-device:pi4": 1.0}}]


def test_tier_c_shards_are_sized_by_what_the_executor_holds(monkeypatch):
    from edgekit.verify import shards

    # the host's MemAvailable, held still: read twice on a busy machine it moved by 2 MB between the reads
    monkeypatch.setattr(executors, "available_memory_mb", lambda: 17_000)
    one = Resources(cpus=1, memory_mb=100)
    assert shards.capacity(fake_ray_executor(), one) == (6, 8192, "cluster CPUs")
    assert shards.capacity(executors.ThreadExecutor(2), one) == (2, 17_000, "cores")


def test_a_thread_executor_runs_tasks_at_once():
    import threading

    barrier = threading.Barrier(3, timeout=10)     # every task waits for the other two: only concurrent runs pass
    with executors.ThreadExecutor(3) as threads:
        out = threads.map(lambda x: (barrier.wait(), x)[1], [1, 2, 3], retries=0)
    assert [o.value for o in out] == [1, 2, 3]


def test_the_local_device_suite_runs_one_executor_task_per_device(monkeypatch):
    """`suite._on_threads`: every device's worker at once, results in device order, a worker's bug raised."""
    import threading

    from edgekit.device import suite
    from edgekit.device.transports import parse_device

    barrier = threading.Barrier(2, timeout=10)

    def worker(cfg, spec, prepared, runtimes, doc, say):
        barrier.wait()
        if spec.id == "broken":
            raise RuntimeError("a bug in the worker")
        return [f"{spec.id}:{p}" for p in prepared]

    monkeypatch.setattr(suite, "device_worker", worker)

    class Cfg:
        devices = (parse_device("qemu:a55"), parse_device("qemu"))

    docs = {d.id: None for d in Cfg.devices}
    assert suite._on_threads(Cfg, ["b0", "b1"], {}, docs, print) == [["qemu-a55:b0", "qemu-a55:b1"],
                                                                     ["qemu-default:b0", "qemu-default:b1"]]
    Cfg.devices = (parse_device("qemu?name=broken"), parse_device("qemu"))
    docs = {d.id: None for d in Cfg.devices}
    with pytest.raises(RuntimeError, match="a bug in the worker"):
        suite._on_threads(Cfg, ["b0"], {}, docs, print)


def test_fan_out_goes_through_the_executors():
    """No module of edgekit's packages starts its own thread or process pool, checks an executor's class or reaches
    into its Ray handle: it asks the executor (concurrent, ships_files, cluster_resources, nodes)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = []
    for folder in ("edgekit", "export", "lite", "quantize", "prune"):
        for path in sorted((root / folder).rglob("*.py")):
            if path == root / "edgekit" / "core" / "executors.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
                if isinstance(node, (ast.Name, ast.Attribute)):
                    name = node.id if isinstance(node, ast.Name) else node.attr
                    if name in ("ThreadPoolExecutor", "ProcessPoolExecutor"):
                        found.append(f"{where} starts its own pool ({name})")
                    if isinstance(node, ast.Attribute) and name == "_ray":
                        found.append(f"{where} reaches into an executor's Ray handle")
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                    kinds = ast.unparse(node.args[1])
                    if any(k in kinds for k in ("SerialExecutor", "ThreadExecutor", "PoolExecutor", "RayExecutor")):
                        found.append(f"{where} checks an executor's class ({kinds})")
    assert found == [], "\n".join(found)
