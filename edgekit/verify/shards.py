"""Tier C's emulation shards as executor tasks: one emulator process per shard, on the build's executor.

Tier C splits the evaluation samples into shards; each shard is one `edgekit-lite-run`
process under qemu that loads the model once and runs its samples. Shards are independent,
so each is an `executors.Task` (one CPU; the memory one emulator process was measured to
need), retried when its worker is lost (a pool worker or Ray node died, or the emulator was
killed by SIGKILL/SIGTERM/SIGHUP, as the OOM killer does). Which executor runs them is the
build's (`executors.from_environment`, EDGEKIT_EXECUTOR, as for the INT8 search):

- serial (a build's default): the shards run in threads of the build's process, each
  waiting on its emulator, as many as the cores and memory allow (`ThreadExecutor`);
- pool: the local process pool, one worker per shard, at the pool's size and the memory;
- ray: Ray tasks, as many shards as the cluster's CPUs (and Ray's memory accounting)
  hold. A Ray task does not read the driver's files: it gets the runner, the cpuinfo
  shim, the Paddle-Lite library and model.nb as bytes with its arguments (as the device
  farm ships them, edgekit/device/farm.py), writes them to a scratch folder on its node
  and runs them there. A node needs edgekit, Ray, qemu-user and the ABI's target
  libraries (the cross compiler's sysroot), not the runtime folder or a bundle.

First, when memory decides the split, one shard runs one sample alone; its peak RSS sets
the memory each further shard holds and how many fit (`emulation.parallel_processes`).
A shard's outputs depend only on its samples, so the concatenated outputs are the same
bytes on every executor, whatever the shard count; the records say where each shard ran
(`shard`: executor, node, first sample, samples).
"""

from __future__ import annotations

import shutil
import signal
import socket
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from edgekit.core import executors
from edgekit.core.errors import EmulationUnavailable, ToolError

if TYPE_CHECKING:
    from edgekit.contracts.settings import InputSpec
    from edgekit.lite.native import LiteRuntime, NativeBuild
    from edgekit.verify.emulator import Emulator

SECONDS_PER_SAMPLE = 30.0      # PP-OCRv4 rec FP32 measured ~12 s a line under qemu on a loaded 2-core host


MEMORY_HEADROOM = 1.25         # a process's measured peak RSS times this, plus MEMORY_SLACK_MB, is its share
MEMORY_SLACK_MB = 64
MEMORY_KEEP_FREE_MB = 512      # never plan the last of the available memory


def parallel_processes(most: int, samples: int, peak_rss_kb: int | float | None,
                       available_mb: int | None) -> tuple[int, str]:
    """How many emulator processes share `samples`: at most `most` (the cores) and the samples, and no more
    than the available memory holds at one process's measured peak RSS (with headroom). Returns the count
    and what limited it: "cores", "samples", "memory", or "cores (memory unknown)"."""
    count, limit = max(1, most), "cores"
    if samples < count:
        count, limit = max(1, samples), "samples"
    if not peak_rss_kb or available_mb is None:
        return count, limit if peak_rss_kb and available_mb is not None else f"{limit} (memory unknown)"
    share_mb = peak_rss_kb / 1024 * MEMORY_HEADROOM + MEMORY_SLACK_MB
    fit = int(max(0, available_mb - MEMORY_KEEP_FREE_MB) // share_mb)
    if fit < count:
        return max(1, fit), "memory"
    return count, limit
LOST_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP)    # killed from outside: the run may go elsewhere
SHARD_RETRIES = 2


@dataclass(frozen=True)
class Shipped:
    """The files one shard runs, as bytes (name -> content), for a worker that cannot read the driver's files."""

    files: Mapping[str, bytes]

    @classmethod
    def pack(cls, build: NativeBuild, runtime: LiteRuntime, nb_file: Path) -> "Shipped":
        paths = {"runner": build.runner, "shim": build.shim, "library": runtime.library, "model": Path(nb_file)}
        return cls({f"{role}/{Path(p).name}": Path(p).read_bytes() for role, p in paths.items() if p is not None})

    def unpack(self, folder: Path, build: NativeBuild, runtime: LiteRuntime) -> tuple[NativeBuild, LiteRuntime, Path]:
        """The files below `folder`; the build, runtime and model re-pointed at them."""
        found: dict[str, Path] = {}
        for name, data in self.files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o755)
            found[name.split("/", 1)[0]] = path
        library = found["library"]
        build = replace(build, root=found["runner"].parent, runner=found["runner"], shim=found.get("shim"))
        runtime = replace(runtime, cxx_dir=library.parent, include_dir=library.parent, lib_dir=library.parent,
                          library=library)
        return build, runtime, found["model"]


@dataclass(frozen=True)
class ShardJob:
    build: NativeBuild       # the driver's paths
    runtime: LiteRuntime
    nb_file: Path
    inputs: Mapping[str, np.ndarray]
    expect: tuple[InputSpec, ...]
    threads: int
    cpu: str
    timeout: float
    first: int               # index of the shard's first sample in the whole set
    executor: str
    shipped: Shipped | None = None     # set for Ray: run these bytes, not the driver's paths
    rows: bool = False                 # NMS rows + a count per sample (the runner's --rows: lite/nms.py)


@dataclass(frozen=True)
class ShardResult:
    outputs: tuple[np.ndarray, ...]
    record: dict


def run_shard(job: ShardJob) -> ShardResult:
    """One emulator process on the shard's samples (the task; on a Ray node from the shipped bytes)."""
    if job.shipped is None:
        return _run(job, job.build, job.runtime, job.nb_file, {"host": socket.gethostname()})
    _check_node(job.build.abi)
    node = executors.ray_node() if job.executor == "ray" else {"host": socket.gethostname()}
    with tempfile.TemporaryDirectory(prefix="edgekit-shard-") as scratch:
        build, runtime, nb_file = job.shipped.unpack(Path(scratch), job.build, job.runtime)
        return _run(job, build, runtime, nb_file, node)


def _run(job: ShardJob, build, runtime, nb_file: Path, node: dict) -> ShardResult:
    from edgekit.lite import native

    samples = len(next(iter(job.inputs.values())))
    try:
        result = native.run_runner(build, runtime, nb_file, job.inputs, expect=job.expect, threads=job.threads,
                                   cpu_profile=job.cpu, timeout=job.timeout, rows=job.rows)
    except ToolError as error:
        status = getattr(error, "exit_status", None)
        if status is not None and status < 0 and -status in LOST_SIGNALS:
            raise executors.WorkerLost(f"the emulator of samples {job.first}..{job.first + samples - 1} was killed "
                                       f"({signal.Signals(-status).name})") from error
        raise
    shard = {"executor": job.executor, "node": node, "first": job.first, "samples": samples}
    return ShardResult(tuple(result.outputs), dict(result.record, shard=shard))


def _check_node(abi) -> None:
    """What a node must have to run a shipped shard: the emulator and the target's libraries."""
    from edgekit.lite import native

    spec = native.ABIS[native.Abi(abi)]
    if spec.emulator and shutil.which(spec.emulator) is None:
        raise EmulationUnavailable(f"{socket.gethostname()} has no {spec.emulator} to run tier C's shards",
                                   "apt-get install qemu-user on every node of the cluster (or run tier C locally: "
                                   "EDGEKIT_EXECUTOR=serial)")
    if spec.sysroot is not None and not spec.sysroot.is_dir():
        raise EmulationUnavailable(f"{socket.gethostname()} has no {abi} target libraries in {spec.sysroot}",
                                   f"apt-get install {spec.packages[0]} on every node of the cluster")


# ---------------------------------------------------------------- the driver


def bounds(total: int, count: int) -> list[tuple[int, int]]:
    """`count` contiguous shards of `total` samples, as even as can be (the split tier C always made)."""
    edges = np.linspace(0, total, max(1, min(count, total)) + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def memory_mb(peak_rss_kb: float | None) -> int:
    """What one shard holds: its measured peak RSS with the same headroom the local split plans with."""
    return int(peak_rss_kb / 1024 * MEMORY_HEADROOM + MEMORY_SLACK_MB) if peak_rss_kb else 0


def capacity(executor: executors.Executor, resources: executors.Resources) -> tuple[int, int | None, str]:
    """How many shards may run at once on `executor` and the memory they share (MB; None: unknown), and the name of
    what bounds the count ("cores" on this host, "cluster CPUs" where the tasks may go to other nodes)."""
    memory = executor.cluster_resources().get("memory")
    return (executor.slots(resources), int(memory // 2**20) if memory is not None else None,
            "cluster CPUs" if executor.ships_files else "cores")


def run_shards(emulator: Emulator, nb_file: Path, inputs: Mapping[str, np.ndarray], expect: Sequence[InputSpec],
               jobs: int, executor: executors.Executor, *, memory_aware: bool,
               rows: bool = False) -> tuple[list, list[dict]]:
    """`nb_file` on every sample, in shards on `executor`; (outputs in sample order, one record per shard).

    `jobs`: the shard count (memory_aware False) or the most (memory_aware: a probe of one sample first, and
    `emulation.parallel_processes` decides the rest: at most `jobs` and the executor's slots locally, the
    cluster's CPUs on Ray). A shard may take the tool timeout plus SECONDS_PER_SAMPLE for each of its samples.
    """
    total = len(next(iter(inputs.values())))
    cluster = executor.ships_files        # its nodes cannot read this host's files, and its CPUs (not --jobs) bound it
    shipped = Shipped.pack(emulator.build, emulator.runtime, nb_file) if cluster else None

    def task(a: int, b: int, memory: int) -> executors.Task:
        job = ShardJob(emulator.build, emulator.runtime, Path(nb_file), {k: v[a:b] for k, v in inputs.items()},
                       tuple(expect), emulator.threads, emulator.cpu, emulator.timeout + SECONDS_PER_SAMPLE * (b - a),
                       a, executor.name, shipped, rows)
        return executors.Task(run_shard, (job,), executors.Resources(cpus=1, memory_mb=memory), SHARD_RETRIES)

    def run(tasks: list[executors.Task]) -> list[ShardResult]:
        outcomes = executor.run(tasks)
        for outcome in outcomes:
            if not outcome.ok:
                raise outcome.error      # as the emulator would have failed in this process
        return [o.value for o in outcomes]

    results: list[ShardResult] = []
    start = 0
    if memory_aware and jobs > 1 and total > 2:
        results = run([task(0, 1, 0)])
        peak = results[0].record.get("peak_rss_kb")
        memory = memory_mb(peak)
        slots, available, bound = capacity(executor, executors.Resources(cpus=1, memory_mb=memory))
        most = min(jobs, slots) if not cluster else slots
        count, limit = parallel_processes(most, total - 1, peak, available)
        if cluster and limit.startswith("cores"):
            limit = limit.replace("cores", bound, 1)
        probe = {"processes_after_probe": count, "limited_by": limit, "available_mb": available}
        results[0] = replace(results[0], record=dict(results[0].record, memory_probe=probe))
        start = 1
    else:
        memory = 0
        count = jobs
    results += run([task(start + a, start + b, memory) for a, b in bounds(total - start, count)])
    outputs = [np.concatenate([r.outputs[i] for r in results]) for i in range(len(results[0].outputs))]
    return outputs, [r.record for r in results]


__all__ = ["Shipped", "ShardJob", "ShardResult", "run_shard", "run_shards", "bounds", "memory_mb", "capacity"]
