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
