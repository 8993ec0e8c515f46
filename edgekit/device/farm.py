"""`edgekit device test --ray`: the device farm. Each device's tests run as one Ray task on the node it hangs off.

A host with devices attached runs a Ray node that advertises each of them as a custom
resource of amount 1 named after the device's id (`resource_name`):

    edgekit-device:<device id>        e.g. edgekit-device:pi4, edgekit-device:qemu-default

(the id is what reports and baselines use: `?name=`, else kind-address[-port]; the scheme
follows Ray's own `node:<ip>` and `accelerator_type:<type>` resources).
`edgekit device resources --device SPEC...` prints the JSON for that node's
`ray start --resources`. The driver (`edgekit device test ... --ray HOST:PORT`) does
every host-side step as a local run does (checksums, version lock, golden vectors, the
cross-built runner), then submits one task per device that holds the device's resource
and no CPU. Ray places it on the node that advertises the device, and the resource
makes the lease exclusive: one run per device at a time, even with several drivers on
one cluster. The task gets the bytes it pushes (runner, Lite library, cpuinfo shim,
each bundle's model.nb and golden inputs) with its arguments, so a device host needs
edgekit, Ray and the device's client (ssh, adb, qemu-user), but no bundle folder, no
Paddle-Lite runtime and no cross compiler. It runs the suite's own per-device worker
(`suite.device_worker`) there and returns the same `CellResult`s, each with the Ray
node that ran it (`device.node`: id, hostname, IP); `--update-baseline` entries are
made on the node and written by the driver.

A task that fails because its node or worker died (`executors.WorkerLost`, never
retried here: the device may be half-way through a run) turns that device's cells
into `lost` cells; the other devices' results are kept and the run's exit code is 18
if nothing else failed (`results.EXIT_LOST`). A device no node advertises (or two
nodes do) is a device error of its cells (exit 14), with the `ray start` line that
fixes it. `--ray auto` starts a local Ray whose one node holds every `--device`.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

from edgekit.core import executors
from edgekit.core.errors import DeviceError
from .preflight import Prepared, Runtime
from .results import EXIT_LOST, CellResult
from .transports import DeviceSpec

RESOURCE_PREFIX = "edgekit-device:"
LOST_PHASE = "ray node"


def resource_name(spec: DeviceSpec) -> str:
    """The Ray custom resource a node advertises for the device (amount 1: one lease at a time)."""
    return f"{RESOURCE_PREFIX}{spec.id}"


def node_resources(specs: Sequence[DeviceSpec]) -> dict[str, float]:
    """`ray start --resources` of a host holding these devices."""
    return {resource_name(s): 1 for s in specs}


# ---------------------------------------------------------------- what a task carries


@dataclass(frozen=True)
class Payload:
    """The files a device task pushes, by name under its scratch folder, and the records that name them."""

    files: Mapping[str, bytes]
    runtimes: Mapping[str, Runtime]
    prepared: tuple[Prepared, ...]

    def unpack(self, folder: Path) -> tuple[dict[str, Runtime], list[Prepared]]:
        """The files written below `folder`; runtimes and bundles re-pointed at them (everything else unchanged)."""
        for name, data in self.files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o755)
        runtimes = {}
        for abi, r in self.runtimes.items():
            library = folder / abi / r.library.name
            build = replace(r.build, runner=folder / abi / r.runner.name,
                            shim=folder / abi / r.build.shim.name if r.build.shim is not None else None)
            runtimes[abi] = replace(r, lite=replace(r.lite, library=library, lib_dir=library.parent), build=build)
        prepared = []
        for p in self.prepared:
            if p.nb_file is not None:
                here = folder / f"b{p.index}"
                p = replace(p, nb_file=here / p.nb_file.name, feeds={k: here / v.name for k, v in p.feeds.items()})
            prepared.append(p)
        return runtimes, prepared


def pack(prepared: Sequence[Prepared], runtimes: Mapping[str, Runtime]) -> Payload:
    files: dict[str, bytes] = {}
    for abi, r in runtimes.items():
        for path in (r.runner, r.library, r.build.shim):
            if path is not None:
                files[f"{abi}/{Path(path).name}"] = Path(path).read_bytes()
    for p in prepared:
        if p.nb_file is not None:
            for path in (p.nb_file, *p.feeds.values()):
                files[f"b{p.index}/{Path(path).name}"] = Path(path).read_bytes()
    return Payload(files, dict(runtimes), tuple(prepared))


@dataclass(frozen=True)
class DeviceRun:
    """What a device task hands back: the cells, the lines it would have printed, and a baseline to write."""

    cells: tuple[CellResult, ...]
    lines: tuple[str, ...]
    node: dict[str, str]                 # the Ray node that ran it: id, hostname, IP
    baseline: dict | None = None          # the device's updated baseline document (--update-baseline)
    baseline_path: str | None = None      # where the node wrote it, as its lines name it


def run_device(cfg, spec: DeviceSpec, payload: Payload, doc: dict | None) -> DeviceRun:
    """The Ray task, on the node holding `spec`: the suite's per-device worker on the unpacked files."""
    from . import suite

    node = executors.ray_node()
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="edgekit-farm-") as scratch:
        folder = Path(scratch)
        runtimes, prepared = payload.unpack(folder / "files")
        local = replace(cfg, baseline=None, baseline_dir=folder / "baselines") if cfg.update_baseline else cfg
        cells = suite.device_worker(local, spec, prepared, runtimes, doc, lines.append)
        written = local.baseline_file(spec) if cfg.update_baseline else None
        found = written is not None and written.is_file()
        baseline = json.loads(written.read_text(encoding="utf-8")) if found else None
    cells = [replace(c, device=dict(c.device, node=node)) for c in cells]
    return DeviceRun(tuple(cells), tuple(lines), node, baseline, str(written) if written is not None else None)


# ---------------------------------------------------------------- the driver


class Farm:
    """A connection to the cluster (made at once: a wrong address fails before any build), and `run` for
    `suite.run_suite(..., devices=farm.run)`."""

    def __init__(self, address: str, specs: Sequence[DeviceSpec]) -> None:
        local = address in ("auto", "local")
        self.executor = executors.RayExecutor(address, resources=node_resources(specs) if local else None)
        self.address = "a local Ray" if local else address

    def close(self) -> None:
        self.executor.close()

    def __enter__(self) -> "Farm":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, cfg, prepared: Sequence[Prepared], runtimes: Mapping[str, Runtime], docs: Mapping[str, dict | None],
            say: Callable[[str], None]) -> list[list[CellResult]]:
        from . import baseline as baseline_mod
        from .suite import failed_cell

        nodes = self.executor.nodes()
        payload = pack(prepared, runtimes)
        by_device: list[list[CellResult] | None] = [None] * len(cfg.devices)
        tasks, placed = [], []
        for d, spec in enumerate(cfg.devices):
            name = resource_name(spec)
            holders = [n for n in nodes if n["resources"].get(name, 0) >= 1]
            if len(holders) != 1:
                error = self._unplaced(spec, name, holders, len(nodes))
                say(f"✗ {error.message}")
                by_device[d] = [failed_cell(p, spec, None, p.error or error, p.phase if p.error else "device")
                                for p in prepared]
                continue
            tasks.append(executors.Task(run_device, (cfg, spec, payload, docs[spec.id]),
                                        executors.Resources(cpus=0, custom={name: 1}), retries=0))
            placed.append((d, holders[0]))

        def event(kind: str, i: int, attempt: int, outcome) -> None:
            if kind == "running":
                d, node = placed[i]
                say(f"{cfg.devices[d].label}: on Ray node {node['id'][:12]} ({node['ip']})")

        for (d, node), outcome in zip(placed, self.executor.run(tasks, event)):
            spec = cfg.devices[d]
            if outcome.ok:
                done: DeviceRun = outcome.value
                target = cfg.baseline_file(spec)
                if done.baseline is not None and target is not None:
                    baseline_mod.save(target, done.baseline)
                for line in done.lines:
                    say(line.replace(done.baseline_path, str(target)) if done.baseline_path else line)
                by_device[d] = list(done.cells)
            elif isinstance(outcome.error, executors.WorkerLost):
                error = DeviceError(f"{spec.label} was lost: its Ray node {node['id'][:12]} ({node['ip']}) or worker "
                                    f"left during the run ({outcome.error})",
                                    "its results are missing, not failed: check the device's host and its `ray start`, "
                                    "then rerun this device")
                say(f"✗ {error.message}")
                by_device[d] = [failed_cell(p, spec, None) if p.error else _lost(failed_cell(p, spec, None, error,
                                                                                               LOST_PHASE), node)
                                for p in prepared]
            elif isinstance(outcome.error, ImportError):
                error = DeviceError(f"{spec.label}: the Ray node {node['id'][:12]} ({node['ip']}) cannot run edgekit: "
                                    f"{outcome.error}", "install the same edgekit (pip install edgekit[ray]) in the "
                                    "environment that runs `ray start` on the device's host")
                say(f"✗ {error.message}")
                by_device[d] = [failed_cell(p, spec, None, p.error or error, p.phase if p.error else "device")
                                for p in prepared]
            else:
                raise outcome.error       # a bug in the suite: as a local run would, with its traceback
        return by_device  # type: ignore[return-value]

    def _unplaced(self, spec: DeviceSpec, name: str, holders: list, count: int) -> DeviceError:
        start = f"ray start --address {self.address} --resources '{json.dumps({name: 1})}'"
        if not holders:
            return DeviceError(f"{spec.label}: no node of the Ray cluster ({self.address}, {count} node(s)) advertises "
                               f"the device (custom resource {name})",
                               f"on the host it is attached to: {start} (edgekit device resources --device ... prints "
                               "the JSON)")
        ids = ", ".join(f"{n['id'][:12]} ({n['ip']})" for n in holders)
        return DeviceError(f"{spec.label}: {len(holders)} Ray nodes advertise the device ({name}: {ids}); one device "
                           "hangs off one host", f"restart the other nodes without {name} in their --resources")


def _lost(cell: CellResult, node: Mapping) -> CellResult:
    return replace(cell, device=dict(cell.device, node={"id": node["id"], "hostname": None, "ip": node["ip"]}),
                   error=dict(cell.error, lost=True, exit_code=EXIT_LOST))
