"""The device farm's pure logic (no process, no Ray): resource names, what a task carries, lost cells and exit codes,
and the Ray executor's placement of tasks pinned to different custom resources. The real cluster:
tests/e2e/test_device_farm.py."""

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from edgekit.cli import app
from edgekit.device import farm
from edgekit.device.preflight import Prepared, Runtime
from edgekit.device.results import EXIT_LOST, CellResult, CheckResult, SuiteResult
from edgekit.device.transports import parse_device
from edgekit.core.executors import RayExecutor, Resources, Task
from edgekit.lite.native import Abi, LiteRuntime, NativeBuild


def test_a_device_is_advertised_under_its_id():
    assert farm.resource_name(parse_device("ssh:pi@pi4.lan:2222?name=pi4")) == "edgekit-device:pi4"
    assert farm.resource_name(parse_device("qemu")) == "edgekit-device:qemu-default"
    assert farm.node_resources([parse_device("adb:R58M"), parse_device("qemu:a55")]) == {
        "edgekit-device:adb-R58M": 1, "edgekit-device:qemu-a55": 1}
    result = CliRunner().invoke(app, ["device", "resources", "--device", "ssh:pi@pi4.lan?name=pi4", "--device", "qemu"])
    assert result.exit_code == 0 and json.loads(result.output) == {"edgekit-device:pi4": 1,
                                                                    "edgekit-device:qemu-default": 1}


def test_ray_flag_without_ray_is_one_line_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)      # import ray -> ImportError, as when it is not installed
    result = CliRunner().invoke(app, ["device", "test", str(tmp_path), "--device", "qemu", "--ray", "auto"])
    assert result.exit_code == 2 and "pip install edgekit[ray]" in result.output
    assert "Traceback" not in result.output


def test_the_payload_carries_the_files_and_repoints_the_records(tmp_path):
    here, there = tmp_path / "driver", tmp_path / "node"
    (here / "lib").mkdir(parents=True)
    files = {"runner": b"RUN", "lib/libpaddle_light_api_shared.so": b"LIB", "shim.so": b"SHIM", "model.nb": b"NB",
             "input_0.npy": b"IN"}
    for name, data in files.items():
        (here / name).write_bytes(data)
    lite = LiteRuntime(Abi.aarch64, here, here, here / "lib", here / "lib/libpaddle_light_api_shared.so", "0" * 64)
    build = NativeBuild(Abi.aarch64, here, here / "runner", here / "shim.so", here / "tests", "k" * 64, True, 0.0)
    runtime = Runtime("aarch64", lite, build, "v2.13-rc")
    ready = Prepared(0, {"key": "digits/arm64-int8"}, None, "ready", here / "model.nb", "aarch64",
                     {"image": here / "input_0.npy"})
    refused = Prepared(1, {"key": "bad"}, None, "integrity")
    runtimes, prepared = farm.pack([ready, refused], {"aarch64": runtime}).unpack(there)
    r = runtimes["aarch64"]
    assert r.runner.read_bytes() == b"RUN" and r.library.read_bytes() == b"LIB" and r.build.shim.read_bytes() == b"SHIM"
    assert r.lite.lib_dir == r.library.parent and r.runner.parent == there / "aarch64" and r.version == "v2.13-rc"
    assert r.build.key == "k" * 64                      # the records say which build ran, not where it lies
    assert prepared[0].nb_file == there / "b0" / "model.nb" and prepared[0].nb_file.read_bytes() == b"NB"
    assert prepared[0].feeds["image"].read_bytes() == b"IN" and prepared[0].info == ready.info
    assert prepared[1] == refused


def _cell(device, status="passed", lost=False):
    info = {"spec": device, "id": device, "kind": "ssh", "facts": None}
    if status == "passed":
        return CellResult({"key": "b"}, info, (CheckResult("golden", "passed", "ok"),))
    if status == "failed":
        return CellResult({"key": "b"}, info, (CheckResult("golden", "failed", "off"),))
    error = {"type": "DeviceError", "message": "m", "hint": "h", "exit_code": 14, "phase": "device"}
    if lost:
        error.update(lost=True, exit_code=EXIT_LOST, phase=farm.LOST_PHASE)
    return CellResult({"key": "b"}, info, (CheckResult("device", "error", "m", "device"),), error)


def test_lost_cells_do_not_hide_the_other_devices_results():
    def suite(*cells):
        return SuiteResult(tuple(cells), "now", {})

    lost = _cell("pi4", "error", lost=True)
    assert lost.status == "lost" and lost.exit_code == EXIT_LOST
    assert suite(_cell("a"), lost).exit_code == EXIT_LOST
    assert suite(_cell("a"), lost).counts() == {"passed": 1, "failed": 0, "error": 0, "lost": 1}
    assert suite(lost, _cell("a", "failed")).exit_code == 9          # a real failure decides first
    assert suite(lost, _cell("a", "error")).exit_code == 14
    assert suite(_cell("a"), _cell("b")).exit_code == 0


class FakeRay:
    def __init__(self, total):
        self.total = total

    def cluster_resources(self):
        return dict(self.total)


def _executor(total):
    ex = object.__new__(RayExecutor)
    ex._ray = FakeRay(total)
    return ex


def test_tasks_pinned_to_different_devices_run_at_once_and_one_device_holds_one():
    ex = _executor({"CPU": 1.0, "edgekit-device:a": 1.0, "edgekit-device:b": 1.0})
    a, b = (Task(len, (), Resources(cpus=0, custom={f"edgekit-device:{d}": 1})) for d in "ab")
    assert ex._fits(a, []) and ex._fits(b, [a])           # two devices, two nodes: both in flight
    assert not ex._fits(a, [a])                           # the same device: one lease at a time
    cpu = Task(len, (), Resources(cpus=1))
    assert ex._fits(cpu, [a, b]) and not ex._fits(cpu, [cpu])
    assert ex._fits(Task(len, (), Resources(cpus=0, custom={"edgekit-device:c": 1})), [])   # Ray queues it
    assert not ex._fits(Task(len, (), Resources(cpus=0, custom={"edgekit-device:c": 1})), [a])


def test_the_resource_scheme_is_documented():
    text = (Path(farm.__file__).parents[2] / "docs" / "device-suite.md").read_text()
    assert "edgekit-device:<device id>" in text and "ray start --address" in text
