"""`edgekit device list` and `edgekit device test`: options in, one `SuiteConfig`, one `run_suite` call, reports out.

Importing this module is cheap (typer only): `edgekit --help` must not load paddle,
cv2 or matplotlib, so everything else is imported inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

device_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="Run bundles on phones and boards (adb, ssh) or under qemu: golden vectors, latency "
                              "against per-device baselines, JUnit and a report.")


@device_app.command("list")
def list_command() -> None:
    """The devices this host can reach: adb's attached devices, qemu's CPU profiles, and how to name an ssh board."""
    from .transports import discover

    rows = discover()
    width = max(len(r[1]) for r in rows)
    for kind, device, detail in rows:
        typer.echo(f"{kind:5} {device:{width}}  {detail}")


@device_app.command("resources")
def resources_command(
    devices: List[str] = typer.Option(..., "--device", "-d", help="The devices attached to this host, as "
                                      "`edgekit device test` names them (the same ?name=)."),
) -> None:
    """Print the JSON of `ray start --resources` for a host that holds these devices in a device farm, e.g.
    ray start --address HEAD:6379 --resources "$(edgekit device resources --device 'ssh:pi@pi4.lan?name=pi4')"."""
    import json

    from .farm import node_resources
    from .transports import parse_device

    typer.echo(json.dumps(node_resources([parse_device(d) for d in devices]), sort_keys=True))


@device_app.command("test")
def test_command(
    bundles: List[Path] = typer.Argument(..., help="Bundle folders written by `edgekit build` (arm64 or armv7)."),
    devices: List[str] = typer.Option(..., "--device", "-d", help="adb:SERIAL | ssh:[user@]host[:port] | qemu[:cpu], each "
                                      "with optional ?name=&dir=&abi=&exec=&runner=&lib= (ssh also config=, identity=). "
                                      "Repeat for a matrix: one worker per device."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Write JUnit XML: one testcase per check."),
    json_file: Optional[Path] = typer.Option(None, "--json", help="Write the result (schema edgekit.device-result/1)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write DIR/report.md, DIR/latency.png, DIR/result.json."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="The device's baseline JSON (one device)."),
    baseline_dir: Optional[Path] = typer.Option(None, "--baseline-dir", help="Baselines as DIR/<device id>.json."),
    update_baseline: bool = typer.Option(False, "--update-baseline", help="Record this run as the new baseline of every "
                                         "cell that passed and was stable (the old one moves to the history); latency "
                                         "is not gated in that run."),
    eval_data: Optional[Path] = typer.Option(None, "--eval", help="Labelled data (image folder with class sub-folders, "
                                             ".npz with 'labels', or a truth file beside it) for the task metric."),
    eval_samples: int = typer.Option(50, "--eval-samples", help="Samples of --eval run on the device, spread over it."),
    launches: int = typer.Option(3, "--launches", help="Separate runner processes per bundle and device."),
    warmup: int = typer.Option(2, "--warmup", help="Untimed runs per launch before the timed ones."),
    iterations: int = typer.Option(20, "--iterations", help="Timed runs per launch (every one is kept)."),
    threads: int = typer.Option(1, "--threads", help="Paddle-Lite threads."),
    slowdown_pct: float = typer.Option(10.0, "--slowdown-pct", help="A regression's median exceeds the baseline's by "
                                       "this percentage ..."),
    slowdown_ms: float = typer.Option(0.5, "--slowdown-ms", help="... and by this many milliseconds ..."),
    noise_k: float = typer.Option(3.0, "--noise-k", help="... and by this many robust sigmas (MAD) of the history."),
    max_cv: float = typer.Option(0.25, "--max-cv", help="Runs whose robust CV (1.4826·MAD / median of the timed "
                                 "runs) exceeds this are unstable: latency skipped, not failed."),
    max_thermal_rise: float = typer.Option(5.0, "--max-thermal-rise", help="°C of warming that makes a run unstable."),
    count_tolerance: float = typer.Option(0.0, "--count-tolerance", help="qemu devices: percent the instructions per "
                                          "inference may grow over the baseline's before it is a count regression "
                                          "(counts are deterministic: default 0, any growth)."),
    runner_env: List[str] = typer.Option([], "--runner-env", help="NAME=VALUE set for the runner on the device (e.g. "
                                         "GLOG_v=3, or the test hook EDGEKIT_RUNNER_DELAY_MS=20)."),
    lite_arm: Optional[Path] = typer.Option(None, "--lite-arm", help="Paddle-Lite's ARM Linux runtimes (the folder "
                                            "holding inference_lite_lib.armlinux.armv8/.armv7hf). Default EDGEKIT_LITE_ARM."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds one runner launch may take."),
    keep: bool = typer.Option(False, "--keep", help="Leave the pushed files on the devices (debugging)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="auto | HOST:PORT: run each device's tests as a Ray task on "
                                      "the node that advertises it (custom resource edgekit-device:<device id>, see "
                                      "`edgekit device resources`); auto: a local Ray holding every --device. Needs "
                                      "pip install edgekit[ray]."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the summary."),
) -> None:
    """Push each bundle's model.nb, golden inputs, the runner and Paddle-Lite's library to each device; check the golden
    outputs (recomputed on the host, with the bundle's tolerances), the output digest over launches, the task metric and
    the latency against the device's baseline.

    Exit codes: 0 all passed; 9 a golden, determinism or accuracy check failed; 15 a confirmed latency regression on a
    real device; 17 more instructions per inference than the baseline (qemu devices); 10 a bundle does not verify; 3
    version lock; 14 a device problem (unreachable, wrong ABI, disk full, runner killed); 18 (--ray) nothing failed
    but a device's Ray node left during the run (its cells are lost); 2 bad options."""
    from edgekit.contracts.env import lite_arm_root
    from edgekit.core.errors import ConfigError
    from . import reports
    from .baseline import Policy
    from .suite import SuiteConfig, run_suite
    from .transports import parse_device

    env = []
    for item in runner_env:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise ConfigError(f"--runner-env {item!r} is not NAME=VALUE", "e.g. --runner-env GLOG_v=3")
        env.append((name, value))
    root = lite_arm_root(lite_arm)
    cfg = SuiteConfig(
        bundles=tuple(b.expanduser().absolute() for b in bundles), devices=tuple(parse_device(d) for d in devices),
        lite_arm=root, launches=launches, warmup=warmup, iterations=iterations,
        threads=threads, eval_data=eval_data.expanduser().absolute() if eval_data else None, eval_samples=eval_samples,
        baseline=baseline, baseline_dir=baseline_dir, update_baseline=update_baseline,
        policy=Policy(slowdown_pct, slowdown_ms, noise_k, max_cv, max_thermal_rise, count_tolerance_pct=count_tolerance),
        runner_env=tuple(env),
        timeout=timeout, keep=keep)
    say = (lambda line: None) if quiet else typer.echo
    if ray:
        from .farm import Farm

        with Farm(ray, cfg.devices) as farm:         # connects first: a wrong address fails before any build
            result = run_suite(cfg, say=say, devices=farm.run)
    else:
        result = run_suite(cfg, say=say)
    if json_file:
        reports.write_json(result, json_file)
    if junit:
        reports.write_junit(result, junit)
    if report:
        typer.echo(f"report: {reports.write_report(result, report)}")
    counts = result.counts()
    lost = f", {counts['lost']} lost" if counts.get("lost") else ""
    typer.echo(f"device test: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} errors{lost} "
               f"({len(cfg.bundles)} bundle(s) × {len(cfg.devices)} device(s), {result.seconds:.1f} s)")
    for cell in result.cells:
        if cell.status != "passed":
            first = next((c for c in cell.checks if c.status in ("failed", "error")), None)
            typer.echo(f"error: {cell.name}: {first.message if first else cell.status}", err=True)
            if cell.error and cell.error.get("hint"):
                typer.echo(f"  fix: {cell.error['hint']}", err=True)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
