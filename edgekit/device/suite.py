"""`edgekit device test`: bundles × devices, one worker per device, every check recomputed on the host.

Per cell (one bundle on one device): the host-side checks of `preflight` (integrity,
version lock) come first and nothing is pushed when they fail. Then the device is
asked what it is (`facts`: reachability, ABI), the runner and Lite library of its ABI
and the bundle's model.nb and golden inputs are pushed, and the runner is started
`launches` times, each a fresh process: the golden pass, `warmup` untimed runs,
`iterations` timed runs. Records and outputs come back; on the host the golden
comparison (`parity.golden_checks` with the bundle's tolerances), the output digest
over launches, the task metric on the `--eval` subset, and the latency statistics
and baseline decision are computed. A latency regression triggers one automatic
re-run of all launches and stands only if the re-run agrees. On a qemu device the
instructions of one inference of golden input 0 are counted too (`counts.measure_on_device`,
the tier-C plugin) and judged against the baseline's counts (`baseline.judge_counts`):
deterministic, so any growth fails, with no re-run.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

from edgekit.core import executors
from edgekit.core.errors import ConfigError, DeviceError, EdgekitError
from . import baseline as baseline_mod
from . import checks
from .baseline import Policy
from .facts import DeviceFacts
from .preflight import Prepared, Runtime, prepare
from .results import CellResult, CheckResult, SuiteResult, error_record
from .session import DeviceSession
from .transports import DeviceSpec, open_transport

COUNTING_KINDS = ("qemu",)     # devices this host emulates, so the counting plugin can watch the runner (not adb, ssh)


@dataclass(frozen=True)
class SuiteConfig:
    bundles: tuple[Path, ...]
    devices: tuple[DeviceSpec, ...]
    lite_arm: Path | None = None
    launches: int = 3
    warmup: int = 2
    iterations: int = 20
    threads: int = 1
    eval_data: Path | None = None
    eval_samples: int = 50
    baseline: Path | None = None           # one device's file
    baseline_dir: Path | None = None       # <dir>/<device id>.json for every device
    update_baseline: bool = False
    policy: Policy = field(default_factory=Policy)
    runner_env: tuple[tuple[str, str], ...] = ()
    timeout: float = 600.0
    keep: bool = False                     # leave the files on the devices (debugging)

    def __post_init__(self) -> None:
        if not self.bundles or not self.devices:
            raise ConfigError("nothing to test: give at least one bundle and one --device", "e.g. edgekit device test "
                              "build/digits/arm64-int8 --device qemu")
        if self.launches < 1 or self.iterations < 1 or self.warmup < 0 or self.threads < 1 or self.eval_samples < 1:
            raise ConfigError("--launches, --iterations, --threads and --eval-samples must be >= 1, --warmup >= 0",
                              "e.g. --launches 3 --warmup 2 --iterations 20")
        if self.baseline and self.baseline_dir:
            raise ConfigError("--baseline and --baseline-dir given together", "use --baseline-dir for several devices")
        if self.baseline and len(self.devices) > 1:
            raise ConfigError("--baseline FILE holds one device's baseline, but several devices were given",
                              "use --baseline-dir DIR (one file per device, named after its id)")
        if self.update_baseline and not (self.baseline or self.baseline_dir):
            raise ConfigError("--update-baseline needs --baseline FILE or --baseline-dir DIR", "say where it goes")
        ids = [d.id for d in self.devices]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"two devices have the same id ({', '.join(sorted({i for i in ids if ids.count(i) > 1}))})",
                              "give each a distinct ?name=")

    def baseline_file(self, spec: DeviceSpec) -> Path | None:
        if self.baseline_dir:
            return Path(self.baseline_dir) / f"{spec.id}.json"
        return Path(self.baseline) if self.baseline else None

    def settings(self) -> dict:
        return {"launches": self.launches, "warmup": self.warmup, "iterations": self.iterations, "threads": self.threads,
                "batch": 1, "eval": str(self.eval_data) if self.eval_data else None, "eval_samples": self.eval_samples,
                "runner_env": dict(self.runner_env), "update_baseline": self.update_baseline,
                "policy": self.policy.to_json(), "devices": [d.text for d in self.devices],
                "bundles": [str(b) for b in self.bundles]}


def run_suite(cfg: SuiteConfig, say: Callable[[str], None] = lambda line: None,
              devices: Callable[..., list[list[CellResult]]] | None = None) -> SuiteResult:
    """Every bundle on every device; `say` gets one line per device and a block per finished cell.

    `devices(cfg, prepared, runtimes, docs, say)` runs `device_worker` for every device and returns
    each device's cells in `cfg.devices` order: threads on this host by default, Ray tasks on
    the nodes holding the devices with `edgekit.device.farm.on_ray`.
    Raises only for the host (a broken baseline file, no ARM runtime, no cross compiler);
    everything about a bundle or a device ends up in its cells."""
    start = time.monotonic()
    created = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    docs = {d.id: baseline_mod.load(f) if (f := cfg.baseline_file(d)) else None for d in cfg.devices}
    runtimes: dict[str, Runtime] = {}
    prepared = [prepare(i, b, runtimes, cfg.lite_arm, cfg.eval_data, cfg.eval_samples) for i, b in enumerate(cfg.bundles)]
    for p in prepared:
        if p.error is not None:
            say(f"✗ {p.key}: {p.error.message}")
    if all(p.error is not None for p in prepared):   # nothing can run: no device is touched
        cells = [failed_cell(p, spec, None) for p in prepared for spec in cfg.devices]
    else:
        by_device = (devices or _on_threads)(cfg, prepared, runtimes, docs, say)
        cells = [by_device[d][p] for p in range(len(prepared)) for d in range(len(cfg.devices))]
    versions = {"edgekit": _edgekit_version(), "runtimes": {abi: r.version for abi, r in runtimes.items()},
                "runner_builds": {abi: r.build.key[:16] for abi, r in runtimes.items()}}
    return SuiteResult(tuple(cells), created, cfg.settings(), versions, time.monotonic() - start)


def _on_threads(cfg: SuiteConfig, prepared: Sequence[Prepared], runtimes: Mapping[str, Runtime],
                docs: Mapping[str, dict | None], say: Callable[[str], None]) -> list[list[CellResult]]:
    """One worker thread per device on this host: executor tasks, never retried (a device may be half-way through a
    run), each failure raised as a local call would raise it."""
    with executors.ThreadExecutor(len(cfg.devices)) as pool:
        outcomes = pool.run([executors.Task(device_worker, (cfg, spec, prepared, runtimes, docs[spec.id], say),
                                            executors.Resources(cpus=0), retries=0) for spec in cfg.devices])
    for outcome in outcomes:
        if not outcome.ok:
            raise outcome.error
    return [o.value for o in outcomes]


def _edgekit_version() -> dict:
    from importlib import metadata

    from edgekit.core.versions import source_revision

    try:
        version = metadata.version("edgekit")
    except metadata.PackageNotFoundError:
        version = None
    return {"version": version, "source": source_revision()}


def _device_info(spec: DeviceSpec, facts: DeviceFacts | None) -> dict:
    return {"spec": spec.text, "id": spec.id, "kind": spec.kind, "facts": facts.to_json() if facts else None}


def failed_cell(p: Prepared, spec: DeviceSpec, facts: DeviceFacts | None, error: EdgekitError | None = None,
                 phase: str | None = None, checks: Sequence[CheckResult] = (), launches: Sequence[dict] = (),
                 seconds: float = 0.0) -> CellResult:
    error = error or p.error
    phase = phase or p.phase
    kind = "bundle" if phase in ("integrity", "version lock", "eval data") else "device"
    status = "failed" if kind == "bundle" else "error"
    check = CheckResult(f"{'bundle ' if phase == 'integrity' else ''}{phase}", status, error.message, kind)
    return CellResult(p.info, _device_info(spec, facts), (*checks, check), error_record(error, phase),
                      tuple(launches), seconds=seconds)


def device_worker(cfg: SuiteConfig, spec: DeviceSpec, prepared: Sequence[Prepared], runtimes: Mapping[str, Runtime],
                   doc: dict | None, say: Callable[[str], None]) -> list[CellResult]:
    cells: list[CellResult] = []
    shims = {abi: r.build.shim for abi, r in runtimes.items() if r.build.shim is not None}
    try:
        transport = open_transport(spec, shims)
    except EdgekitError as exc:
        say(f"✗ {exc.message}")
        return [failed_cell(p, spec, None, p.error or exc, p.phase if p.error else "device") for p in prepared]
    try:
        facts = transport.facts()
    except EdgekitError as exc:
        transport.close(keep=True)        # nothing was made on the device; only the local side is cleaned
        say(f"✗ {exc.message}")
        return [failed_cell(p, spec, None, p.error or exc, p.phase if p.error else "device") for p in prepared]
    say(f"{spec.label}: {facts.line()}")
    session = DeviceSession(spec, transport, facts, dict(runtimes), threads=cfg.threads, env=dict(cfg.runner_env),
                            timeout=cfg.timeout, keep=cfg.keep)
    lost: DeviceError | None = None
    try:
        for p in prepared:
            entry = (doc or {}).get("entries", {}).get(p.key)
            if p.error is not None:
                cell = failed_cell(p, spec, facts)
            elif lost is not None:
                cell = failed_cell(p, spec, facts, lost, "device")
            else:
                cell = _cell(cfg, session, p, entry)
                if cell.error and "unreachable" in cell.error["message"]:
                    lost = DeviceError(cell.error["message"], cell.error["hint"])
            say(_summary_line(cell))
            cells.append(cell)
    finally:
        session.close()
    if cfg.update_baseline:
        updated = _update_baseline(cfg, spec, facts, doc, prepared, cells, say)
        cells = [replace(c, baseline_updated=True) if p.key in updated else c for p, c in zip(prepared, cells)]
    return cells


def _summary_line(cell: CellResult) -> str:
    lines = [f"{'✓' if cell.status == 'passed' else '✗'} {cell.name}: {cell.status}"]
    lines += [c.line() for c in cell.checks]
    return "\n".join(lines)


def _update_baseline(cfg: SuiteConfig, spec: DeviceSpec, facts: DeviceFacts, doc: dict | None,
                     prepared: Sequence[Prepared], cells: Sequence[CellResult], say: Callable[[str], None]) -> set[str]:
    """Cells that passed and were stable become the device's baseline; returns their bundle keys. On an emulated
    device latency is never gated, so an unstable one does not stop the update (its counts are what matter)."""
    path = cfg.baseline_file(spec)
    changed: set[str] = set()
    for p, cell in zip(prepared, cells):
        verdict = (cell.latency or {}).get("verdict", {})
        if cell.status != "passed" or (verdict.get("kind") == "unstable" and not facts.emulated):
            why = verdict.get("reason") if cell.status == "passed" else f"the run {cell.status}"
            say(f"  baseline for {cell.name} not updated: {why}")
            continue
        device = _device_info(spec, facts)
        device["facts"].pop("temperature_c", None)      # changes every run: no noise in a reviewed file
        entry = _baseline_entry(cfg, cell)
        old = (doc or {}).get("entries", {}).get(p.key) or {}
        if entry["eval"] is None and old.get("nb_sha256") == entry["nb_sha256"]:
            entry["eval"] = old.get("eval")               # a run without --eval keeps the same model's metric
        doc = baseline_mod.updated(doc, device, p.key, entry)
        changed.add(p.key)
    if changed:
        baseline_mod.save(path, doc)
        say(f"baseline written: {path} ({', '.join(sorted(changed))})")
    return changed


def _baseline_entry(cfg: SuiteConfig, cell: CellResult) -> dict:
    latency = cell.latency
    return {"recorded_utc": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
            "nb_sha256": cell.bundle["nb_sha256"], "opt_version": cell.bundle["opt_version"],
            "settings": {k: cfg.settings()[k] for k in ("threads", "batch", "warmup", "iterations", "launches")},
            "latency_ms": latency["summary"], "launch_medians_ms": latency["launch_medians_ms"],
            "samples_ms": latency["samples_ms"], "load_ms_median": latency["load_ms_median"],
            "peak_rss_kb": cell.peak_rss_kb, "output_sha256": cell.output_sha256, "golden": cell.golden,
            "eval": {k: cell.eval[k] for k in ("metric", "value", "samples", "data_sha256")} if cell.eval else None,
            **({"instruction_counts": {k: cell.instruction_counts[k] for k in baseline_mod.COUNT_KEYS}}
               if cell.instruction_counts else {})}


def _cell(cfg: SuiteConfig, session: DeviceSession, p: Prepared, entry: Mapping | None) -> CellResult:
    """One bundle on the session's device: push, launches, eval, (re-run), then the host's checks."""
    start = time.monotonic()
    done = [CheckResult("bundle integrity", "passed", "every checksum verifies", "bundle"),
            CheckResult("version lock", "passed", f"model.nb and the {p.abi} runtime are "
                        f"{session.runtimes[p.abi].version}", "bundle")]
    phase, launches, outputs, evaluation, rerun, counts = "device", [], [], None, None, None
    try:
        session.check_abi(p)
        phase = "push"
        folder = session.push(p)
        phase = "launch"
        for i in range(cfg.launches):
            launch, outs = session.launch(p, folder, f"launch-{i + 1}", cfg.warmup, cfg.iterations)
            launches.append(launch)
            outputs.append(outs)
        phase = "golden widths"          # a dynamic-width bundle's golden groups at other widths: one launch each
        wide = [(w, session.launch(replace(p, feeds=w.feeds, expect=w.expect), folder, f"width-{w.width}", 0, 0)[1])
                for w in p.wide]
        if p.evaluation is not None:
            phase = "eval"
            evaluation = session.evaluate(p, folder)
        if session.spec.kind in COUNTING_KINDS:
            phase = "count"
            counts = _count(cfg, session, p)
        phase = "measure"
        first = checks.measure(launches, cfg.threads)
        verdict = baseline_mod.judge(first, entry, cfg.policy)
        if verdict.kind == "regression" and not cfg.update_baseline:
            phase = "re-run"              # a regression stands only if a second set of launches agrees
            for i in range(cfg.launches):
                launch, outs = session.launch(p, folder, f"rerun-{i + 1}", cfg.warmup, cfg.iterations, rerun=True)
                launches.append(launch)
                outputs.append(outs)
            rerun = checks.measure([launch for launch in launches if launch["rerun"]], cfg.threads)
            verdict = baseline_mod.confirm(verdict, baseline_mod.judge(rerun, entry, cfg.policy))
    except EdgekitError as exc:
        if getattr(exc, "launch", None):
            launches.append(exc.launch)
        return failed_cell(p, session.spec, session.facts, exc, phase, done, launches, time.monotonic() - start)
    figures, golden = checks.golden(p, outputs, session.spec.id)
    for w, outs in wide:
        golden += checks.golden(replace(p, reference=w.reference), [outs], session.spec.id, f" at width {w.width}")[1]
    digests = [launch["output_sha256"] for launch in launches]
    done += golden + [checks.determinism(digests)]
    matched = {}                               # {"detections" | "masks": figures}
    if p.task is not None:
        key, figures_of_task, found = checks.golden_matching(p, outputs)
        matched[key] = figures_of_task
        done.append(found)
    status, message = baseline_mod.outputs_changed(p.info["nb_sha256"], digests[0], entry)
    done.append(CheckResult("outputs vs baseline", status, message))
    if evaluation is not None:
        status, message = baseline_mod.accuracy_drop(evaluation, entry)
        done.append(CheckResult(f"eval {evaluation['metric']}", status, message, value=evaluation["value"]))
    done.append(checks.latency_check(verdict, session.facts.emulated, cfg.update_baseline))
    if counts is not None:
        count_verdict = baseline_mod.judge_counts(counts, entry, cfg.policy)
        done.append(checks.count_check(count_verdict, cfg.update_baseline))
        counts = dict(counts, verdict=count_verdict.to_json())
    return CellResult(p.info, _device_info(session.spec, session.facts), tuple(done), None, tuple(launches),
                      checks.latency(launches, first, rerun, verdict, entry), figures, evaluation, digests[0],
                      max(launch["record"].get("peak_rss_kb") or 0 for launch in launches), time.monotonic() - start,
                      instruction_counts=counts, **matched)


def _count(cfg: SuiteConfig, session: DeviceSession, p: Prepared) -> dict:
    """Instructions per inference of the bundle's model.nb on the qemu device's CPU profile, as a baseline keeps them."""
    from edgekit.verify import counts

    runtime = session.runtimes[p.abi]
    found = counts.measure_on_device(runtime, session.spec.address, p.nb_file, p.feeds, timeout=cfg.timeout,
                                    rows=p.rows)
    return dict(baseline_mod.count_record(found, runtime.version, runtime.build.key[:16]), seconds=found["seconds"])
