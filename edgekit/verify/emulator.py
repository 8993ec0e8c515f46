"""The ARM emulator: edgekit's native runner, cross-compiled for one ABI and linked against the user's Paddle-Lite
ARM Linux runtime of the opt's version, run under qemu-user (`Emulator.prepare` builds it once, cached).

Tier C (edgekit/verify/tier_c.py), the instruction counts (edgekit/verify/counts.py), `edgekit run --engine arm`
and the device suite's qemu device all run model.nb through it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from edgekit.contracts.settings import EmulationConfig, InputSpec
from edgekit.core.errors import ConfigError, EmulationUnavailable
from edgekit.core.tables import CPU_PROFILES

if TYPE_CHECKING:
    from edgekit.core.executors import Executor
    from edgekit.lite.native import LiteRuntime, NativeBuild


@dataclass(frozen=True)
class Emulator:
    """A runner built for one ABI, with its runtime and CPU profile: everything `run` needs."""

    abi: str
    runtime: LiteRuntime
    build: NativeBuild
    cpu: str
    threads: int
    timeout: float

    @classmethod
    def prepare(cls, abi: str, settings: EmulationConfig, timeout: float) -> "Emulator":
        """Find the runtime, check the tools and build the runner (cached); EmulationUnavailable if they are not here."""
        from edgekit.lite import native

        if settings.runtime is None:
            raise EmulationUnavailable(
                "no Paddle-Lite ARM Linux runtime is configured",
                "set EDGEKIT_LITE_ARM (or --lite-arm, [emulation] runtime) to the folder holding "
                "inference_lite_lib.armlinux.armv8 (and .armv7hf) of the opt's version")
        profile = CPU_PROFILES[settings.cpu]
        if abi not in profile.abis:
            raise ConfigError(f"CPU profile {settings.cpu!r} exists for {', '.join(profile.abis)}, not {abi}",
                              "use --cpu default for armv7 (the armhf runtime has no dot-product kernels)")
        native.check_tools(abi)
        runtime = native.find_runtime(settings.runtime, abi)
        return cls(abi, runtime, native.build(abi, runtime, native_cache()), settings.cpu, settings.threads, timeout)

    def describe(self) -> dict:
        from edgekit.lite import native

        return {"abi": self.abi, "runtime": str(self.runtime.cxx_dir), "runtime_sha256": self.runtime.sha256,
                "runtime_version": native.runtime_version(self.build, self.runtime),
                "qemu": _qemu_version(self.build, self.runtime), "cpu_profile": self.cpu, "threads": self.threads,
                "runner_build": self.build.key[:16], "runner_build_seconds": round(self.build.seconds, 2)}

    def run(self, nb_file: Path, inputs: Mapping[str, np.ndarray], expect: Sequence[InputSpec],
            jobs: int, *, memory_aware: bool = False, executor: Executor | None = None,
            rows: bool = False) -> tuple[list[np.ndarray], list[dict]]:
        """`nb_file` on every sample, split over `jobs` emulator processes (each loads the model once).

        A process may take the tool timeout plus SECONDS_PER_SAMPLE for each of its samples:
        the timeout catches hangs, and a slow model's share must not look like one.
        `memory_aware`: `jobs` is the most, not the number; one process first runs one sample
        alone, and its peak RSS says how many of the rest fit in the available memory
        (`parallel_processes`): a 640x640 detector's emulator takes GBs, a classifier's tens of MB.
        Each process is an executor task (edgekit/verify/shards.py): on `executor` (a pool, Ray) when given,
        else in threads of this process.
        """
        from edgekit.core import executors
        from edgekit.verify import shards

        own = executor is None or not executor.concurrent     # a serial build's shards: threads waiting on qemu
        runner = executors.ThreadExecutor(max(1, jobs)) if own else executor
        try:
            return shards.run_shards(self, nb_file, inputs, expect, jobs, runner, memory_aware=memory_aware, rows=rows)
        finally:
            if own:
                runner.close()


def native_cache() -> Path:
    """Where cross-compiled runners are kept (they outlive any one build's calibration cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().absolute() / "edgekit"


def _qemu_version(build, runtime) -> str:
    from edgekit.core import proc
    from edgekit.lite import native

    argv = native.emulator_argv(build.abi, runtime)[:1] + ["--version"]
    done = proc.run(argv, timeout=60, what=argv[0])
    return done.stdout.splitlines()[0].strip() if done.returncode == 0 and done.stdout else "unknown"

