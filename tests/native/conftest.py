"""Fixtures for native/: builds per ABI (cached by content), the emulation policy, real .nb files.

Policy (one place, `emulation`): without EDGEKIT_LITE_ARM, a cross compiler, qemu or cmake
the tests that need them skip and say why; with EDGEKIT_REQUIRE_EMULATION=1 (CI) they fail.
A build that starts and breaks always fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import ConfigError
from edgekit.lite import native


def _required() -> bool:
    return os.environ.get("EDGEKIT_REQUIRE_EMULATION", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def native_cache() -> Path:
    """The real cache: builds are keyed by every input, so a stale entry is never reused."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "edgekit"


@pytest.fixture(scope="session")
def emulation(native_cache):
    """need(abi) -> (runtime or None, NativeBuild); skips (or, when required, fails) if unavailable."""
    made: dict = {}

    def need(abi: str):
        if abi not in made:
            try:
                native.check_tools(abi)
                runtime = None
                if abi != "host":
                    root = os.environ.get("EDGEKIT_LITE_ARM")
                    if not root:
                        raise native.EmulationUnavailable(
                            "EDGEKIT_LITE_ARM is not set", "point it to the folder holding inference_lite_lib.armlinux.*")
                    runtime = native.find_runtime(root, abi)
                made[abi] = (runtime, native.build(abi, runtime, native_cache))
            except (native.EmulationUnavailable, ConfigError) as exc:
                made[abi] = exc
        got = made[abi]
        if isinstance(got, Exception):
            reason = f"{abi}: {got.message} ({got.hint})"
            if _required():
                pytest.fail(f"EDGEKIT_REQUIRE_EMULATION=1 but {reason}")
            pytest.skip(reason)
        return got

    return need


@pytest.fixture(scope="session")
def run_native():
    """run_native(abi, runtime, build, argv, profile="default"): a native binary of `abi`, under qemu for ARM."""

    def run(abi: str, runtime, build, argv: list, profile="default"):
        prefix = native.emulator_argv(abi, runtime, profile, shim=build.shim)
        return subprocess.run(prefix + [str(a) for a in argv], capture_output=True, text=True, timeout=300)

    return run


@pytest.fixture(scope="session")
def core_jobs(emulation, run_native):
    """core_jobs(abi, jobs, folder) -> (report, process): edgekit-core-tool runs a list of pre/post-processing
    jobs in one process, so qemu starts once for hundreds of cases."""

    def run(abi: str, jobs: list, folder):
        runtime, build = emulation(abi)
        folder.mkdir(parents=True, exist_ok=True)
        jobs_file, report_file = folder / "jobs.json", folder / "report.json"
        jobs_file.write_text(json.dumps(jobs, ensure_ascii=False), encoding="utf-8")
        done = run_native(abi, runtime, build, [build.root / "edgekit-core-tool", "jobs", jobs_file, report_file])
        assert report_file.is_file(), f"{abi}: exit {done.returncode}: {done.stderr[-2000:]}"
        report = json.loads(report_file.read_text(encoding="utf-8"))
        assert len(report["jobs"]) == len(jobs)
        return report, done

    return run


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny FP32 model exported with paddle.jit.save and converted for arm by opt, plus its reference."""
    from edgekit.config import InputSpec
    from edgekit.export import StaticRunner
    from edgekit.export.dygraph import export_layer
    from edgekit.lite import convert, read_header
    from native_models import tiny_conv

    folder = tmp_path_factory.mktemp("tiny")
    spec = InputSpec("x", (-1, 3, 8, 8), "float32")
    samples = {"x": np.random.default_rng(0).standard_normal((7, 3, 8, 8)).astype(np.float32)}
    static = export_layer(tiny_conv(), [spec], folder / "export", samples, "tiny conv")
    lite = convert(static, "arm", folder / "model.nb", timeout=300, target="arm64", precision="fp32")
    reference = StaticRunner(static).run(samples)
    return {"nb": lite.nb_file, "spec": spec, "feeds": samples, "reference": reference,
            "pdmodel": static.model_file, "opt_version": read_header(lite.nb_file).opt_version}


@pytest.fixture(scope="session")
def digits_int8(tmp_path_factory):
    """The bundled digits example built for arm64 INT8 by the real CLI: model.nb plus golden vectors."""
    out = tmp_path_factory.mktemp("digits-int8")
    env = dict(os.environ, EDGEKIT_CACHE_DIR=str(out / "cache"))
    argv = [sys.executable, "-c", "from edgekit.cli import main; main()", "build", "--target", "arm64",
            "--quant", "int8", "--out", str(out), "--no-emulation"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    bundle = next(out.rglob("model.nb")).parent
    return bundle
