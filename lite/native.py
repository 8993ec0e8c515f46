"""Build `native/` (edgekit-lite-run and its core) for an ARM Linux ABI and run it under qemu-user.

Why: Paddle-Lite's ARM kernels, INT8 ones included, exist only in its ARM libraries; the
x86 wheel cannot run an ARM `.nb`. Cross-compiling the runner against the user's ARM
light runtime and running it under `qemu-aarch64` / `qemu-arm` executes the very code a
board runs, on this host. The same runner binary is what a device suite pushes to boards.

Tables (ABIs, runner exit codes; CPU profiles are `edgekit.core.tables.CPU_PROFILES`) plus
four functions: `find_runtime`, `build` (cached by content), `emulator_argv`, `run_runner`.
"""

from __future__ import annotations

import enum
import fcntl
import hashlib
import json
import logging
import os
import shutil
import signal
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Protocol, Sequence

import numpy as np

from edgekit.contracts.runner import (RUNNER_SCHEMA, read_runner_record, runner_error_line, runner_errors,
                                     runner_finished)
from edgekit.core import proc
from edgekit.model.artifacts import sha256_file
from edgekit.core.atomic import publish_dir, staging_dir
from edgekit.core.errors import ConfigError, EdgekitError, EmulationUnavailable, ToolError
from edgekit.core.tables import CPU_PROFILES, CpuProfile

if TYPE_CHECKING:
    from .icount import InstructionCounts

from .cmake import NOT_BUILD_INPUTS, cmake_generator, native_dir, prune, tool_line, use_entry

log = logging.getLogger(__name__)

BUILD_TYPE = "MinSizeRel"   # the compute is in Lite; -Os builds twice as fast as -O3
CACHE_KEEP = 3              # cached builds kept per ABI (older keys are removed)


class Abi(str, enum.Enum):
    host = "host"          # the Lite-free core and its tests, built for this machine
    aarch64 = "aarch64"    # 64-bit ARM Linux (arm64 target)
    armhf = "armhf"        # 32-bit ARM Linux, hard-float (armv7 target)


@dataclass(frozen=True)
class AbiSpec:
    compiler: str                   # the C++ compiler cmake will use
    emulator: str | None            # qemu-user binary; None: runs natively
    sysroot: Path | None            # qemu -L: the target's ld.so, libc, libstdc++
    lite_folder: str | None         # Paddle-Lite's release folder name for this ABI
    elf_machine: int | None         # e_machine of that folder's libpaddle_light_api_shared.so
    toolchain: str | None           # file in native/cmake/
    packages: tuple[str, ...]       # Debian packages providing compiler and emulator


ABIS: dict[Abi, AbiSpec] = {
    Abi.host: AbiSpec("c++", None, None, None, None, None, ("g++",)),
    Abi.aarch64: AbiSpec("aarch64-linux-gnu-g++", "qemu-aarch64", Path("/usr/aarch64-linux-gnu"),
                         "inference_lite_lib.armlinux.armv8", 0xB7, "aarch64-linux-gnu.cmake",
                         ("g++-aarch64-linux-gnu", "qemu-user")),
    Abi.armhf: AbiSpec("arm-linux-gnueabihf-g++", "qemu-arm", Path("/usr/arm-linux-gnueabihf"),
                       "inference_lite_lib.armlinux.armv7hf", 0x28, "arm-linux-gnueabihf.cmake",
                       ("g++-arm-linux-gnueabihf", "qemu-user")),
}
ELF_MACHINES = {0x03: "x86 (32-bit)", 0x28: "32-bit ARM", 0x3E: "x86-64", 0xB7: "AArch64"}


RUNNER_ERRORS: dict[int, type[EdgekitError]] = runner_errors()   # the runner's exit code -> its error


@dataclass(frozen=True)
class LiteRuntime:
    abi: Abi
    cxx_dir: Path           # inference_lite_lib.armlinux.<abi>/cxx
    include_dir: Path
    lib_dir: Path
    library: Path           # libpaddle_light_api_shared.so
    sha256: str


@dataclass(frozen=True)
class NativeBuild:
    abi: Abi
    root: Path              # a relocatable cmake build folder: `ctest --test-dir root` runs the unit tests
    runner: Path | None     # edgekit-lite-run (None for the host: no Lite there)
    shim: Path | None       # libedgekit_cpuinfo_shim.so
    core_tests: Path        # edgekit-core-tests
    key: str
    cached: bool
    seconds: float          # build time; 0 when taken from the cache


@dataclass(frozen=True)
class RunnerResult:
    outputs: tuple[np.ndarray, ...]   # in the model's output order, samples first
    record: dict                       # the runner's JSON record (schema edgekit.runner/1)
    argv: tuple[str, ...]
    process: proc.ProcessRecord
    counts: InstructionCounts | None = None   # with run_runner(..., icount_plugin=...)


class InputSpecLike(Protocol):
    name: str
    shape: Sequence[int]
    dtype: str


def _abi(abi: Abi | str) -> Abi:
    try:
        return Abi(abi)
    except ValueError:
        raise ConfigError(f"unknown ABI {abi!r}", f"use one of {', '.join(a.value for a in Abi)}") from None


def elf_machine(path: Path) -> int | None:
    """e_machine of a little-endian ELF file (0xB7 AArch64, 0x28 ARM, 0x3E x86-64); None otherwise."""
    with path.open("rb") as handle:
        head = handle.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[5] != 1:
        return None
    return int.from_bytes(head[18:20], "little")


def find_runtime(path: Path | str, abi: Abi | str) -> LiteRuntime:
    """Accepts the folder holding inference_lite_lib.armlinux.*, that folder, or its cxx/."""
    abi = _abi(abi)
    spec = ABIS[abi]
    if spec.lite_folder is None:
        raise ConfigError("the host build has no Paddle-Lite runtime", "use abi aarch64 or armhf for the runner")
    base = Path(path).expanduser().absolute()
    candidates = [base / spec.lite_folder / "cxx", base / "cxx", base]
    cxx = next((c for c in candidates if (c / "include" / "paddle_api.h").is_file()
                and (c / "lib" / "libpaddle_light_api_shared.so").is_file()), None)
    if cxx is None:
        raise ConfigError(f"no Paddle-Lite {abi.value} light runtime in {base} (looked for {spec.lite_folder}/cxx/"
                          "include/paddle_api.h and lib/libpaddle_light_api_shared.so)",
                          f"point EDGEKIT_LITE_ARM to the folder holding {spec.lite_folder} (same version as opt)")
    library = cxx / "lib" / "libpaddle_light_api_shared.so"
    machine = elf_machine(library)
    if machine != spec.elf_machine:
        found = ELF_MACHINES.get(machine, f"machine {machine:#x}") if machine is not None else "not a little-endian ELF"
        raise ConfigError(f"{library} is a {found} library, not {abi.value} ({ELF_MACHINES[spec.elf_machine]})",
                          f"pass the {spec.lite_folder} runtime for {abi.value}")
    return LiteRuntime(abi, cxx, cxx / "include", cxx / "lib", library, sha256_file(library))


def check_tools(abi: Abi | str) -> None:
    """Every command `build` and the emulator need, or one line naming the packages to install."""
    spec = ABIS[_abi(abi)]
    wanted = {"cmake": "cmake", spec.compiler: spec.packages[0]}
    if spec.emulator:
        wanted[spec.emulator] = "qemu-user"
    missing = {cmd: pkg for cmd, pkg in wanted.items() if shutil.which(cmd) is None}
    if shutil.which("ninja") is None and shutil.which("make") is None:
        missing["ninja"] = "ninja-build"
    if missing:
        packages = " ".join(dict.fromkeys(missing.values()))
        raise EmulationUnavailable(f"missing {', '.join(missing)} to build and run native code for {_abi(abi).value}",
                                   f"apt-get install {packages} (or run native/install-deps.sh)")
    if spec.sysroot is not None and not spec.sysroot.is_dir():
        raise EmulationUnavailable(f"no {_abi(abi).value} target libraries in {spec.sysroot}",
                                   f"apt-get install {spec.packages[0]}")


def build_key(abi: Abi, runtime: LiteRuntime | None) -> tuple[str, dict]:
    """Hash of every source and build file under native/ (not its docs and scripts), the compiler, cmake,
    generator and the Lite library."""
    source = native_dir()
    digest = hashlib.sha256()
    for path in sorted(p for p in source.rglob("*") if p.is_file() and p.suffix not in NOT_BUILD_INPUTS):
        digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
    spec = ABIS[abi]
    inputs = {"abi": abi.value, "sources": digest.hexdigest(), "compiler": tool_line([spec.compiler, "--version"]),
              "cmake": tool_line(["cmake", "--version"]), "generator": cmake_generator(), "build_type": BUILD_TYPE,
              "lite_sha256": runtime.sha256 if runtime else None,
              "lite_dir": str(runtime.cxx_dir) if runtime else None}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest(), inputs


def _result(abi: Abi, root: Path, key: str, cached: bool, seconds: float) -> NativeBuild:
    runner = root / "edgekit-lite-run"
    shim = root / "libedgekit_cpuinfo_shim.so"
    return NativeBuild(abi, root, runner if runner.is_file() else None, shim if shim.is_file() else None,
                       root / "edgekit-core-tests", key, cached, seconds)


def build(abi: Abi | str, runtime: LiteRuntime | None, cache_root: Path, *, timeout: float = 1200) -> NativeBuild:
    """Configure and build native/ for `abi`, cached under cache_root/native/<abi>-<key>.

    Built in a temporary folder and renamed into place, so a cache entry is always
    complete; a lock file makes a concurrent build of the same key wait for this one.
    """
    abi = _abi(abi)
    spec = ABIS[abi]
    if abi is not Abi.host and runtime is None:
        raise ConfigError(f"building the runner for {abi.value} needs a Paddle-Lite runtime", "pass find_runtime(...)")
    if runtime is not None and runtime.abi is not abi:
        raise ConfigError(f"the runtime is for {runtime.abi.value}, the build for {abi.value}", "pass the matching runtime")
    check_tools(abi)
    key, inputs = build_key(abi, runtime)
    folder = Path(cache_root).expanduser().absolute() / "native"
    final = folder / f"{abi.value}-{key[:16]}"
    marker = final / "edgekit-build.json"
    use_entry(final)        # before the look: no other process prunes it while this one may run it
    if marker.is_file():
        return _result(abi, final, key, True, 0.0)
    with (folder / f".{final.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file():
            return _result(abi, final, key, True, 0.0)
        log.info("building native/ for %s into %s", abi.value, final)
        start = time.monotonic()
        with staging_dir(folder, f".{abi.value}-") as scratch:
            configure = ["cmake", "-S", str(native_dir()), "-B", str(scratch), "-G", cmake_generator(),
                         f"-DCMAKE_BUILD_TYPE={BUILD_TYPE}"]
            if spec.toolchain:
                configure.append(f"-DCMAKE_TOOLCHAIN_FILE={native_dir() / 'cmake' / spec.toolchain}")
            if runtime is not None:
                configure.append(f"-DEDGEKIT_LITE_DIR={runtime.cxx_dir}")
            steps = [configure, ["cmake", "--build", str(scratch), "--parallel", str(os.cpu_count() or 2)]]
            for argv in steps:
                done = proc.run(argv, timeout=timeout, what=f"cmake ({abi.value})")
                if done.returncode != 0:
                    # the scratch folder is deleted when this block ends: the hint names a folder to pick instead
                    by_hand = " ".join("BUILD_DIR" if a == str(scratch) else a for a in argv)
                    raise ToolError(f"building native/ for {abi.value} failed: {done.tail(4)}",
                                    f"rerun by hand with a build folder of your choice: {by_hand}")
            seconds = time.monotonic() - start
            (scratch / marker.name).write_text(json.dumps({"key": key, "inputs": inputs, "seconds": round(seconds, 1),
                                                           "argv": steps}, indent=2) + "\n")
            publish_dir(scratch, final, keep_existing=lambda entry: (entry / marker.name).is_file())
        _prune(folder, abi, keep=final)
    return _result(abi, final, key, False, seconds)


def _prune(folder: Path, abi: Abi, keep: Path) -> None:
    """Old keys of this ABI beyond the newest CACHE_KEEP go (they are never reused), unless a process uses them
    (`use_entry`: a test run or build of another checkout may run that runner hours after it took it) or they were
    built in the last hour."""
    prune(folder, f"{abi.value}-", keep, keep_newest=CACHE_KEEP - 1)


def emulator_argv(abi: Abi | str, runtime: LiteRuntime | None, cpu_profile: str | CpuProfile = "default", *,
                  shim: Path | None = None) -> list[str]:
    """The argv prefix that runs an `abi` binary on this host: qemu with the target's libraries, Lite's
    library path and, for a CPU profile that needs it, the cpuinfo shim and a qemu CPU model."""
    abi = _abi(abi)
    spec = ABIS[abi]
    profile = cpu_profile if isinstance(cpu_profile, CpuProfile) else CPU_PROFILES.get(cpu_profile)
    if profile is None:
        raise ConfigError(f"unknown CPU profile {cpu_profile!r}", f"use one of {', '.join(CPU_PROFILES)}")
    if spec.emulator is None:
        return []
    if abi not in profile.abis:
        raise ConfigError(f"CPU profile {cpu_profile!r} exists for {', '.join(profile.abis)} only, "
                          f"not {abi.value}: the armv7hf runtime is built WITH_ARM_DOTPROD=OFF (its dot-product "
                          "kernels are Thumb-only encodings), so every core runs the NEON INT8 kernels",
                          "use the default profile for armhf")
    argv = [spec.emulator, "-L", str(spec.sysroot)]
    if profile.qemu_cpu:
        argv += ["-cpu", profile.qemu_cpu]
    if runtime is not None:
        argv += ["-E", f"LD_LIBRARY_PATH={runtime.lib_dir}"]
    if profile.cpu_part:
        if shim is None or not Path(shim).is_file():
            raise ConfigError(f"CPU profile {cpu_profile!r} needs the cpuinfo shim", "pass shim=build(...).shim")
        argv += ["-E", f"LD_PRELOAD={shim}", "-E", f"EDGEKIT_CPU_PART={profile.cpu_part}"]
    return argv


def unloadable(program: Path) -> str | None:
    """Why qemu-user cannot start `program`, checked as its loader does (open, a regular file, an execute bit, the ELF
    magic), or None. qemu 7.2 reports these with printf on stdout and then _exit(1): through a pipe the line is never
    flushed, so a caller sees exit 1 and nothing at all (measured: a missing, empty, non-ELF or non-executable
    runner, and a directory, all exit 1 with empty stdout and stderr)."""
    try:
        info = os.stat(program)
    except FileNotFoundError:
        return "it does not exist"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file"
    if not info.st_mode & 0o111:
        return "it is not executable"
    try:
        machine = elf_machine(Path(program))
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    return None if machine is not None else "it is not an ELF file"


def _silent_exit(code: int, argv: Sequence[str], program: Path) -> tuple[str, str]:
    """(message, hint) for an exit with nothing printed. The runner prints a line before every non-zero exit; qemu-user
    does not when it cannot load the program (`unloadable`). Otherwise the code and the host's available memory."""
    if argv and argv[0] != str(program):        # under emulation
        reason = unloadable(program)
        if reason is not None:
            shown = os.path.realpath(program)
            return (f"{Path(argv[0]).name} could not load the runner {shown}: {reason} (qemu-user exits {code} "
                    "without a message then)",
                    f"delete {Path(shown).parent} if it is there and rerun: edgekit builds the runner again")
    from edgekit.core.executors import available_memory_mb

    free = available_memory_mb()
    shown = f"{free:,} MB" if free is not None else "unknown"
    return f"exit {code} with nothing on stderr (host memory available: {shown})", ""


def _raise_for(done: proc.ProcessRecord, record: dict | None, what: str, profile: str | CpuProfile,
               program: Path) -> None:
    phase = (record or {}).get("phase", "start")
    if done.returncode < 0:
        name = done.signal_name
        hint = ("the emulated CPU lacks an instruction Lite chose for the detected cores: check the CPU profile's "
                "qemu -cpu" if done.returncode == -signal.SIGILL else "rerun with GLOG_v=3 to see the last op")
        shown = profile if isinstance(profile, str) else f"part {profile.cpu_part} on qemu -cpu {profile.qemu_cpu}"
        error: EdgekitError = ToolError(f"{what} died from {name} during {phase} (CPU profile {shown})", hint)
    else:
        message, hint = (record or {}).get("error"), (record or {}).get("fix") or ""
        if not message:   # no record: the runner's one stderr line
            message, hint = runner_error_line(done.stderr)
        message = message or done.tail(3)
        cls = RUNNER_ERRORS.get(done.returncode, ToolError)
        if not message:
            message, hint = _silent_exit(done.returncode, done.argv, program)
        error = cls(f"{what}: {message}", hint)
    error.exit_status = done.returncode       # the runner's own code (negative: signal)
    error.record = record
    raise error


def run_runner(build: NativeBuild, runtime: LiteRuntime, nb_file: Path, feeds: Mapping[str, np.ndarray], *,
               expect: Sequence[InputSpecLike] = (), threads: int = 1, batch: int = 1, warmup: int = 0,
               repeat: int = 0, power_mode: str = "no_bind", cpu_profile: str | CpuProfile = "default", timeout: float = 600,
               workdir: Path | None = None, icount_plugin: Path | None = None, rows: bool = False,
               profile_region: int | None = None, op_boundaries: tuple[int, Sequence[int]] | None = None) -> RunnerResult:
    """Run `nb_file` on `feeds` (name -> array, samples first) under emulation; outputs in output order.

    `profile_region`: with `icount_plugin`, the plugin also profiles that region (0 = the first inference) block by
    block (lite/icount.py BlockProfile; the record's `code_maps` say where each library was loaded). `op_boundaries`:
    (guest address of Lite's KernelBase::Launch, the return points of its call sites): the profile is also split by
    op of the runtime program (BlockProfile.ops).

    `rows`: the model ends in NMS rows + a per-sample count (the runner's --rows): the rows of all samples come
    back concatenated, the count output splits them.

    Raises the error type of the runner's exit code (RUNNER_ERRORS) with its one-line
    message; the error carries `exit_status` and the `record` when there is one.
    """
    if build.runner is None:
        raise ConfigError(f"the {build.abi.value} build has no runner", "build with a Paddle-Lite runtime")
    with tempfile.TemporaryDirectory(prefix="edgekit-run-") as scratch:
        work = Path(workdir) if workdir is not None else Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        inputs = work / "inputs.npz"
        # the runner reads C-order little-endian arrays (numpy.savez writes them as they are)
        np.savez(inputs, **{name: np.ascontiguousarray(a, dtype=np.asarray(a).dtype.newbyteorder("<"))
                            for name, a in feeds.items()})
        out = work / "out"
        prefix = emulator_argv(build.abi, runtime, cpu_profile, shim=build.shim)
        if icount_plugin is not None:   # lite/icount.py: qemu counts every inference's instructions
            if "," in f"{icount_plugin}{work}":
                raise ConfigError(f"qemu cannot load a plugin or write its file on a path with a comma ({icount_plugin}, "
                                  f"{work})", "use cache and working folders without commas")
            profiled = f",profile={int(profile_region)}" if profile_region is not None else ""
            if op_boundaries is not None and profile_region is not None:
                enter, exits = op_boundaries
                profiled += f",op_enter={int(enter):#x}" + "".join(f",op_exit={int(a):#x}" for a in exits)
            prefix[1:1] = ["-plugin", f"{icount_plugin},out={work / 'icount.json'}{profiled}"]
            prefix[0] = shutil.which(prefix[0]) or prefix[0]    # run with an empty environment (lite/icount.py)
        argv = prefix + [
            str(build.runner), "--model", str(Path(nb_file).absolute()), "--inputs", str(inputs), "--out", str(out),
            "--threads", str(threads), "--batch", str(batch), "--warmup", str(warmup), "--repeat", str(repeat),
            "--power-mode", power_mode] + (["--rows"] if rows else [])
        for spec in expect:
            argv += ["--expect", f"{spec.name}:{'x'.join(str(d) for d in spec.shape)}:{spec.dtype}"]
        what = f"edgekit-lite-run ({build.abi.value}, {Path(nb_file).name})"
        done = proc.run(argv, timeout=timeout, what=what, env={} if icount_plugin is not None else None)
        record = read_runner_record(out)
        if done.returncode != 0:
            _raise_for(done, record, what, cpu_profile, build.runner)
        if not runner_finished(record):
            raise ToolError(f"{what} exited 0 without a {RUNNER_SCHEMA} record", "rebuild native/ (stale build?)")
        outputs = tuple(np.array(np.load(o["file"]), copy=True) for o in record["outputs"])
        counts = None
        if icount_plugin is not None:
            from .icount import read_counts
            counts = read_counts(work / "icount.json", record, what)
        return RunnerResult(outputs, record, tuple(argv), done, counts)


def runtime_version(build: NativeBuild, runtime: LiteRuntime, *, timeout: float = 120) -> str:
    """The runtime's GetVersion() (what every .nb's opt version must equal)."""
    argv = emulator_argv(build.abi, runtime) + [str(build.runner), "--version"]
    done = proc.run(argv, timeout=timeout, what="edgekit-lite-run --version")
    if done.returncode != 0:
        _raise_for(done, None, "edgekit-lite-run --version", "default", build.runner)
    return done.stdout.strip()
