"""Helpers the e2e tests share (a module of its own: `conftest` names several modules in this tree)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path


def manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def leftovers(out: Path) -> list:
    """Anything a failed build left behind (there must be nothing)."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.exists() else []


def paddle3_python() -> str:
    """The Paddle 3 interpreter (EDGEKIT_PADDLE3_PYTHON, else .venv-paddle3 beside this environment or in the
    checkout: `./run tests` makes it); skip without it, except in CI, where it fails."""
    import os

    import pytest

    from edgekit.core import sibling_envs

    located = sibling_envs.locate("EDGEKIT_PADDLE3_PYTHON", sibling_envs.PADDLE3)
    if not located.python:
        why = os.environ.get("EDGEKIT_PADDLE3_UNAVAILABLE") or located.unavailable or ""
        if os.environ.get("CI") == "true":
            pytest.fail(f"no Paddle 3 interpreter in CI ({why})")
        pytest.skip(f"no Paddle 3 interpreter: {sibling_envs.describe_search(located, 'EDGEKIT_PADDLE3_PYTHON')} "
                    f"(./run tests makes .venv-paddle3){': ' + why if why else ''}")
    return located.python


def run_paddle3(*args: str, env: dict | None = None, timeout: float = 600) -> None:
    """Run `args` with Paddle 3's interpreter in tests/e2e (where the Paddle 3 model files are); it must succeed."""
    import subprocess

    done = subprocess.run([paddle3_python(), *map(str, args)], cwd=Path(__file__).resolve().parent, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]


def example_config(folder: Path, example: Path, samples: int | None = None, toml: str = "edgekit.toml",
                   edit=None) -> Path:
    """`folder`/edgekit.toml: an example's own `toml` with its relative data paths made absolute, `[parity]
    max_samples` set to `samples` (when given) and `edit` (text -> text) applied."""
    text = (example / toml).read_text(encoding="utf-8")
    for key in ("weights = \"", "calibration = \"", "evaluation = \"", "labels = \""):
        text = text.replace(key, key + str(example) + "/")
    if samples is not None:
        text = text.replace("[parity]\n", f"[parity]\nmax_samples = {samples}\n")
    config = folder / "edgekit.toml"
    config.write_text(edit(text) if edit else text, encoding="utf-8")
    return config


def build_example_int8(cli, folder: Path, example: Path, name: str, samples: int, toml: str = "edgekit.toml") -> Path:
    """An example's own edgekit.toml (or `toml` beside it) built to arm64 INT8 on `samples` evaluation samples (tier C
    with an ARM runtime): its relative paths made absolute, `[parity] max_samples` added."""
    args = ["build", "-c", example_config(folder, example, samples, toml), "--target", "arm64", "--quant", "int8",
            "--out", folder / "out", "--quiet"]
    if not os.environ.get("EDGEKIT_LITE_ARM"):
        args.append("--no-emulation")
    cli(*args)
    return folder / "out" / name / "arm64-int8"


def qemu_cell(cli, bundle: Path, lite_arm, report: Path, ok: bool = True) -> tuple[dict, object]:
    """`edgekit device test BUNDLE` on the qemu device, one launch of 2 timed runs: the one cell of its JSON report,
    and the CLI result (`ok` False: it may fail)."""
    result = cli("device", "test", bundle, "--device", "qemu", "--lite-arm", lite_arm, "--launches", "1", "--warmup",
                 "0", "--iterations", "2", "--json", report, "--quiet", ok=ok)
    (cell,) = json.loads(report.read_text())["runs"]
    return cell, result


def check_named(cell: dict, name: str) -> dict:
    """The one check of a device-suite cell called `name`."""
    (found,) = [c for c in cell["checks"] if c["name"] == name]
    return found


def kill_first(matches, stop, killed: list, settle: float = 1.0) -> None:
    """SIGKILL the first process whose argv (a list of bytes) `matches`, `settle` seconds after it is seen (as the
    OOM killer would), once; its pid goes into `killed`. For a watcher thread; `stop` (an Event) ends the watch."""
    while not stop.is_set() and not killed:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if matches(argv):
                time.sleep(settle)
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                    killed.append(int(entry.name))
                except ProcessLookupError:
                    continue
                return
        time.sleep(0.05)
