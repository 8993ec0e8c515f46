"""`edgekit device test --ray` for real: a two-node Ray cluster on 127.0.0.1, the head advertising the qemu device and
the second node the loopback ssh board of test_device.py. The farm's results equal a local run's, each cell ran on
the node holding its device, and a node killed mid-run makes its device `lost` while the other device's results stand.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import raycluster
import test_device

from edgekit.device import farm
from edgekit.device.results import EXIT_LOST
from edgekit.device.transports import parse_device

pytestmark = pytest.mark.e2e

# test_device.py's fixtures (the digits INT8 bundle, the loopback ssh board) and its short run settings
bundle, board, FAST = test_device.bundle, test_device.board, test_device.FAST


def _kill_when_running(files: Path, node, stop: threading.Event, killed: list) -> None:
    """Kill the board's Ray node (a host losing power) once the board's runner has started its first launch."""
    deadline = time.monotonic() + 120
    while not stop.is_set() and time.monotonic() < deadline:
        if list(files.glob("edgekit-*/b0/launch-1/record.json")):
            killed.extend(raycluster.kill_node(node))
            return
        time.sleep(0.05)


def _end_board_master(spec) -> None:
    """What power loss would have cut: the killed node's ssh master connection to the board (a daemon of its own,
    so not below the node's processes; it would idle out after ControlPersist). Found by its socket to the board."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == spec.port:
                inodes.add(f"socket:[{fields[9]}]")
    for entry in Path("/proc").iterdir():
        try:
            name = (entry / "cmdline").read_bytes().split(b"\0")[0]
            if not (name.startswith(b"ssh: ") and name.endswith(b"[mux]")):
                continue
            if any(os.readlink(fd) in inodes for fd in (entry / "fd").iterdir()):
                os.kill(int(entry.name), signal.SIGTERM)
        except OSError:
            continue


@pytest.fixture(scope="module")
def runs(tmp_path_factory, bundle, board, lite_arm, cli):
    import ray

    root = tmp_path_factory.mktemp("farm")
    files = root / "board-files"
    board_spec = board(files)
    devices = ("--device", "qemu", "--device", board_spec)
    out = {"board": parse_device(board_spec), "root": root}

    def record(name):           # every run records its baselines: the node makes the entries, the driver writes them
        return ("--baseline-dir", root / f"{name}-baselines", "--update-baseline")

    nodes: list = []
    names = [farm.resource_name(parse_device("qemu")), farm.resource_name(out["board"])]
    with raycluster.cluster(names, nodes=nodes) as address:
        # the local run, the reference, while the second node joins
        cli("device", "test", bundle, *devices, *FAST, *record("local"), "--json", root / "local.json",
            "--lite-arm", lite_arm, "--quiet")
        out["local"] = json.loads((root / "local.json").read_text())
        ray.init(address=address, configure_logging=False, log_to_driver=False)
        try:                                 # both nodes joined; what each advertises
            out["nodes"] = {n["NodeID"]: n["Resources"] for n in raycluster.wait_nodes(ray, 2)}
        finally:
            ray.shutdown()                   # the command connects on its own
        result = cli("device", "test", bundle, *devices, *FAST, *record("ray"), "--ray", address,
                     "--json", root / "ray.json", "--junit", root / "ray.xml", "--report", root / "report",
                     "--lite-arm", lite_arm)
        out["ray_output"] = result.output
        out["ray"] = json.loads((root / "ray.json").read_text())
        out["junit"] = ET.parse(root / "ray.xml").getroot()
        out["report"] = (root / "report" / "report.md").read_text()

        stop, killed = threading.Event(), []
        watcher = threading.Thread(target=_kill_when_running, args=(files, nodes[1], stop, killed), daemon=True)
        watcher.start()
        try:
            result = cli("device", "test", bundle, *devices, *FAST, *record("lost"), "--ray", address,
                         "--json", root / "lost.json", "--junit", root / "lost.xml", "--lite-arm", lite_arm, ok=False)
        finally:
            stop.set()
            watcher.join()
            _end_board_master(out["board"])
        out.update(killed=killed, lost_exit=result.exit_code, lost_output=result.output,
                   lost=json.loads((root / "lost.json").read_text()), lost_junit=ET.parse(root / "lost.xml").getroot())
    return out


def _same(run: dict) -> dict:
    """What must not depend on where a cell ran: its checks, outputs, golden figures, device and instruction counts."""
    counts = (run.get("instruction_counts") or {}).get("verdict") or {}
    return {"bundle": run["bundle"]["key"], "device": run["device"]["id"], "status": run["status"],
            "checks": [(c["name"], c["status"]) for c in run["checks"]], "output_sha256": run["output_sha256"],
            "golden": run["golden"], "launches": len(run["launches"]), "abis": run["device"]["facts"]["abis"],
            "kind": run["device"]["facts"]["kind"], "instructions": counts.get("totals")}


def test_the_farm_gives_a_local_runs_results_each_on_the_node_holding_its_device(runs):
    local, on_ray = runs["local"], runs["ray"]
    assert local["summary"]["exit_code"] == 0 and on_ray["summary"]["exit_code"] == 0
    assert [_same(r) for r in on_ray["runs"]] == [_same(r) for r in local["runs"]]
    assert [r["device"]["id"] for r in on_ray["runs"]] == ["qemu-default", "loopback-board"]
    assert all(c["status"] == "passed" for r in on_ray["runs"] for c in r["checks"] if c["name"].startswith("golden"))
    for run in on_ray["runs"]:
        node = run["device"]["node"]
        resource = farm.resource_name(parse_device(run["device"]["spec"]))
        assert runs["nodes"][node["id"]].get(resource) == 1, (node, runs["nodes"])   # the node advertising it
        assert node["hostname"] and node["ip"]
        assert "node" not in next(r for r in local["runs"] if r["device"]["id"] == run["device"]["id"])["device"]
    assert len({r["device"]["node"]["id"] for r in on_ray["runs"]}) == 2
    assert "qemu: on Ray node " in runs["ray_output"] and "2 passed, 0 failed, 0 errors" in runs["ray_output"]
    suites = runs["junit"].findall("testsuite")
    assert [s.get("name") for s in suites] == ["digits/arm64-int8 on qemu-default",
                                               "digits/arm64-int8 on loopback-board"]
    for suite, run in zip(suites, on_ray["runs"]):
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props["ray.node_id"] == run["device"]["node"]["id"]
    assert "| digits/arm64-int8 | loopback-board | passed |" in runs["report"] and "Ran on Ray node " in runs["report"]


def test_baselines_recorded_on_the_nodes_are_written_by_the_driver(runs):
    root = runs["root"]
    for device in ("qemu-default", "loopback-board"):
        local = json.loads((root / "local-baselines" / f"{device}.json").read_text())["entries"]["digits/arm64-int8"]
        ray = json.loads((root / "ray-baselines" / f"{device}.json").read_text())["entries"]["digits/arm64-int8"]
        for key in ("nb_sha256", "output_sha256", "golden", "settings", "instruction_counts"):
            assert ray.get(key) == local.get(key), key
        assert f"baseline written: {root / 'ray-baselines' / (device + '.json')}" in runs["ray_output"]
    assert sorted(p.name for p in (root / "lost-baselines").iterdir()) == ["qemu-default.json"]   # lost: no entry


def test_a_node_killed_mid_run_marks_its_device_lost_and_keeps_the_other(runs):
    assert runs["killed"], "the board's runner never started"
    assert runs["lost_exit"] == EXIT_LOST, runs["lost_output"]
    qemu, board_run = runs["lost"]["runs"]
    assert _same(qemu) == _same(runs["local"]["runs"][0])          # the other device's results are intact
    assert board_run["status"] == "lost" and board_run["complete"] is False and board_run["error"]["lost"] is True
    assert board_run["error"]["phase"] == "ray node" and board_run["launches"] == []
    assert runs["nodes"][board_run["device"]["node"]["id"]].get(farm.resource_name(runs["board"])) == 1
    assert runs["lost"]["summary"] == {"passed": 1, "failed": 0, "error": 0, "lost": 1, "exit_code": EXIT_LOST}
    assert "loopback-board) was lost: its Ray node" in runs["lost_output"] and "1 lost" in runs["lost_output"]
    board_suite = runs["lost_junit"].findall("testsuite")[1]
    assert board_suite.find("testcase/error") is not None and board_suite.find("testcase").get("name") == "ray node"
