"""How the suite reaches a device: one `Transport` protocol, three kinds in one table (`DEVICE_KINDS`).

    adb:SERIAL[?options]                 an Android device over adb (/data/local/tmp)
    ssh:[user@]host[:port][?options]     a Linux ARM board over OpenSSH (/tmp)
    qemu[:cpu][?options]                 this host, the runner under qemu-user (emulated)

Options, as a URL query (`?key=value&key=value`, spaces allowed or as `+`):
`name` (the device's id in baselines and reports), `dir` (the folder on the device),
`abi` (aarch64 or armhf, replacing what the device reports), `runner` and `lib` (a
prebuilt runner and Lite library to push instead of the host's cross build, e.g. NDK
builds for Android), `exec` (a command prefix for the runner on the device: `taskset
-c 4-7`, or `qemu-aarch64 -L /usr/aarch64-linux-gnu` for a board without ARM cores),
and for ssh `config` (an ssh_config file, `ssh -F`) and `identity` (`ssh -i`).

Every process goes through `edgekit.core.proc.run`. A transport never interprets the
runner's exit code; it turns its own failures into one-line `DeviceError`s:
unreachable, disk full, file missing.
"""

from __future__ import annotations

import errno
import os
import platform
import re
import secrets
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence
from urllib.parse import parse_qsl

from edgekit.core import proc
from edgekit.core.errors import ConfigError, DeviceError, ToolError
from edgekit.core.tables import TARGETS
from . import facts as facts_mod
from .facts import DeviceFacts

ABIS = tuple(info.emulation for info in TARGETS.values() if info.emulation is not None)   # the runner's ABIs
NO_SPACE = "No space left on device"
CONNECT_TIMEOUT = 10        # seconds ssh waits for a connection
PROBE_TIMEOUT = 60          # seconds for a facts script or a small shell command
COPY_TIMEOUT = 600          # seconds for one push or pull


@dataclass(frozen=True)
class DeviceSpec:
    kind: str                               # a key of DEVICE_KINDS
    address: str                            # adb serial, [user@]host, or the qemu CPU profile
    port: int | None = None
    options: tuple[tuple[str, str], ...] = ()
    text: str = ""                          # as the user wrote it

    def get(self, key: str, default: str | None = None) -> str | None:
        return dict(self.options).get(key, default)

    @property
    def label(self) -> str:
        """For messages: the spec without its options, plus the name when one is given."""
        short = self.text.partition("?")[0] or f"{self.kind}:{self.address}"
        return f"{short} ({self.get('name')})" if self.get("name") else short

    @property
    def id(self) -> str:
        """Stable name for baselines and reports: `name=`, else kind-address[-port] with unsafe characters as _."""
        name = self.get("name") or "-".join(str(p) for p in (self.kind, self.address, self.port) if p)
        return re.sub(r"[^A-Za-z0-9@._-]", "_", name)


class Transport(Protocol):
    spec: DeviceSpec
    session: str          # this run's folder on the device (absolute)

    def facts(self) -> DeviceFacts: ...
    def temperature(self) -> float | None: ...
    def mkdir(self, *paths: str) -> None: ...
    def push(self, files: Sequence[Path], remote_dir: str, *, executable: bool = False) -> None: ...
    def pull(self, remote_files: Sequence[str], local_dir: Path) -> bool: ...
    def run(self, argv: Sequence[str], *, abi: str, cwd: str, env: Mapping[str, str],
            timeout: float) -> proc.ProcessRecord: ...
    def close(self, keep: bool = False) -> None: ...


@dataclass(frozen=True)
class DeviceKind:
    make: Callable[[DeviceSpec, Mapping[str, Path]], Transport]   # (spec, cpuinfo shims by ABI) -> transport
    syntax: str
    options: tuple[str, ...]
    base_dir: str | None          # default folder on the device; None: a local temporary folder
    note: str


def parse_device(text: str) -> DeviceSpec:
    """`adb:SERIAL`, `ssh:user@host:port`, `qemu:a55`, each with an optional `?key=value&...` query."""
    head, _, query = text.partition("?")
    kind, _, rest = head.partition(":")
    info = DEVICE_KINDS.get(kind)
    if info is None:
        raise ConfigError(f"device {text!r} is not adb:SERIAL, ssh:user@host[:port] or qemu[:cpu]",
                          "see `edgekit device list` for the devices this host can reach")
    try:
        options = tuple(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise ConfigError(f"device {text!r}: options {query!r} are not key=value&key=value",
                          "e.g. ?name=pi4&dir=/tmp") from None
    unknown = sorted({k for k, _ in options} - set(info.options))
    if unknown:
        raise ConfigError(f"device {text!r}: unknown option(s) {', '.join(unknown)}",
                          f"{kind} devices take {', '.join(info.options)}")
    for key, value in options:
        if key == "abi" and value not in ABIS:
            raise ConfigError(f"device {text!r}: abi={value} is not one of {', '.join(ABIS)}",
                              "write abi=aarch64 or abi=armhf")
    port = None
    if kind == "ssh":
        host, colon, port_text = rest.rpartition(":") if rest.count(":") == 1 else (rest, "", "")
        if colon:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise ConfigError(f"device {text!r}: port {port_text!r} is not 1..65535", "write ssh:user@host:2222")
            port = int(port_text)
        rest = host
    if not rest and kind != "qemu":
        raise ConfigError(f"device {text!r} names no {'serial' if kind == 'adb' else 'host'}", f"write {info.syntax}")
    if kind == "qemu":
        from edgekit.core.tables import CPU_PROFILES

        rest = rest or "default"
        if rest not in CPU_PROFILES:
            raise ConfigError(f"device {text!r}: CPU profile {rest!r} is unknown", f"use one of {', '.join(CPU_PROFILES)}")
    return DeviceSpec(kind, rest, port, options, text)


def _run(spec: DeviceSpec, argv: Sequence[str], timeout: float, what: str, **kwargs) -> proc.ProcessRecord:
    """proc.run with the transport's own failures (a hung connection, a missing client) as DeviceError."""
    try:
        return proc.run(argv, timeout=timeout, what=what, **kwargs)
    except ToolError as exc:
        raise DeviceError(f"{spec.label}: {exc.message}", "check that the device responds and is not overloaded") from exc


def _disk_full(spec: DeviceSpec, action: str, where: str) -> DeviceError:
    return DeviceError(f"{spec.label}: the device's disk is full: {action} failed ({NO_SPACE})",
                       f"free space on the device in {where} (or pass ?dir= with room) and rerun")


def _require(client: str, package: str) -> str:
    found = shutil.which(client)
    if found is None:
        raise DeviceError(f"the {client} client is not installed on this host", f"apt-get install {package}")
    return found


def _exec_abis(command: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
    """An exec prefix starting with an emulator (qemu-aarch64, qemu-arm) fixes the ABI and makes the device emulated."""
    if not command:
        return (), None
    from ..lite import native

    name = Path(command[0]).name
    for abi, spec in native.ABIS.items():
        if spec.emulator and name == spec.emulator:
            return (abi.value,), f"runner under {' '.join(command)}"
    return (), (f"runner under {' '.join(command)}" if name.startswith("qemu-") else None)


class _ShellTransport:
    """What adb and ssh share: a POSIX shell on the device reached one command at a time."""

    spec: DeviceSpec
    session: str
    label = ""

    def __init__(self, spec: DeviceSpec, base_dir: str) -> None:
        self.spec = spec
        self.exec_prefix = shlex.split(spec.get("exec") or "")
        self.session = f"{(spec.get('dir') or base_dir).rstrip('/')}/edgekit-{os.getpid()}-{secrets.token_hex(3)}"

    # implemented per kind
    def _shell(self, command: str, timeout: float, what: str) -> proc.ProcessRecord:
        raise NotImplementedError

    def _facts(self) -> DeviceFacts:
        raise NotImplementedError

    def facts(self) -> DeviceFacts:
        found = self._facts()
        stated = (self.spec.get("abi"),) if self.spec.get("abi") else ()
        exec_abis, emulated = _exec_abis(self.exec_prefix)
        if stated or exec_abis or emulated:
            found = facts_mod.override_abis(found, stated or exec_abis or found.abis, emulated)
        return found

    def temperature(self) -> float | None:
        done = self._shell(facts_mod.TEMPERATURE_SCRIPT, PROBE_TIMEOUT, f"{self.label} temperature")
        return facts_mod.hottest_celsius(done.stdout)

    def mkdir(self, *paths: str) -> None:
        done = self._shell("mkdir -p " + " ".join(shlex.quote(p) for p in paths), PROBE_TIMEOUT, f"{self.label} mkdir")
        if done.returncode != 0:
            if NO_SPACE in done.stderr + done.stdout:
                raise _disk_full(self.spec, f"creating {paths[0]}", paths[0])
            raise DeviceError(f"{self.spec.label}: cannot create {paths[0]}: {done.tail(2)}",
                              "pass ?dir= with a writable folder")

    def _free_kb(self, path: str) -> int | None:
        done = self._shell(f"df -Pk {shlex.quote(path)}", PROBE_TIMEOUT, f"{self.label} df")
        return facts_mod.available_kb(done.stdout) if done.returncode == 0 else None

    def run_env(self, argv: Sequence[str]) -> dict[str, str]:
        return {}

    def run(self, argv: Sequence[str], *, abi: str, cwd: str, env: Mapping[str, str], timeout: float) -> proc.ProcessRecord:
        assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**self.run_env(argv), **env}.items())
        command = " ".join(shlex.quote(a) for a in [*self.exec_prefix, *argv])
        # not the last command of the shell: the shell outlives the runner and reports a death by signal as 128+N
        script = f"cd {shlex.quote(cwd)} || exit 125; {assignments} {command}; exit $?"
        return self._shell(script, timeout, f"edgekit-lite-run on {self.spec.label}")

    def close(self, keep: bool = False) -> None:
        if keep:
            return
        try:
            self._shell(f"rm -rf {shlex.quote(self.session)}", PROBE_TIMEOUT, f"{self.label} cleanup")
        except DeviceError:
            pass      # the device went away: nothing left to clean from here


class SshTransport(_ShellTransport):
    label = "ssh"

    def __init__(self, spec: DeviceSpec, shims: Mapping[str, Path]) -> None:
        super().__init__(spec, DEVICE_KINDS["ssh"].base_dir)
        self.ssh, self.scp = _require("ssh", "openssh-client"), _require("scp", "openssh-client")
        # one multiplexed connection for the whole session (a handshake per command costs ~0.3 s); short path:
        # the socket's name must fit in 108 bytes
        self.control = tempfile.mkdtemp(prefix="edgekit-ssh-")

    def _options(self, port_flag: str) -> list[str]:
        options = ["-F", self.spec.get("config")] if self.spec.get("config") else []
        options += ["-i", self.spec.get("identity")] if self.spec.get("identity") else []
        options += [port_flag, str(self.spec.port)] if self.spec.port else []
        return options + ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}", "-o", "ServerAliveInterval=10",
                          "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR", "-o", "ControlMaster=auto",
                          "-o", f"ControlPath={self.control}/%C", "-o", "ControlPersist=120"]

    def close(self, keep: bool = False) -> None:
        try:
            super().close(keep)
        finally:
            # ends the background master this session's first ssh started
            _run(self.spec, [self.ssh, *self._options("-p"), "-O", "exit", self.spec.address], PROBE_TIMEOUT,
                 "ssh -O exit")
            shutil.rmtree(self.control, ignore_errors=True)

    def _unreachable(self, done: proc.ProcessRecord) -> DeviceError:
        port = f"-p {self.spec.port} " if self.spec.port else ""
        return DeviceError(f"{self.spec.label} is unreachable: {done.tail(1) or 'ssh exited 255'}",
                           f"check that the board is on and sshd runs: ssh {port}{self.spec.address} true")

    def _shell(self, command: str, timeout: float, what: str) -> proc.ProcessRecord:
        done = _run(self.spec, [self.ssh, *self._options("-p"), self.spec.address, command], timeout, what)
        if done.returncode == 255:          # ssh's own failure: no connection, or it dropped
            raise self._unreachable(done)
        return done

    def _facts(self) -> DeviceFacts:
        done = self._shell(facts_mod.LINUX_SCRIPT, PROBE_TIMEOUT, "ssh facts")
        return facts_mod.linux_facts(facts_mod.parse_lines(done.stdout), "ssh")

    def push(self, files: Sequence[Path], remote_dir: str, *, executable: bool = False) -> None:
        names = ", ".join(Path(f).name for f in files)
        done = _run(self.spec, [self.scp, "-q", "-p", *self._options("-P"), *map(str, files),
                                f"{self.spec.address}:{remote_dir}/"], COPY_TIMEOUT, f"scp to {self.spec.label}")
        if done.returncode != 0:
            if done.returncode == 255 and "scp:" not in done.stderr:
                raise self._unreachable(done)
            # scp over SFTP reports a full disk as a bare "Failure": ask df when the message does not say
            needed_kb = sum(Path(f).stat().st_size for f in files) // 1024 + 1
            if NO_SPACE in done.stderr or (self._free_kb(remote_dir) or needed_kb) < needed_kb:
                raise _disk_full(self.spec, f"copying {names} to {remote_dir}", self.session)
            raise DeviceError(f"{self.spec.label}: copying {names} to {remote_dir} failed: {done.tail(2)}",
                              "check the folder on the device (?dir=) is writable")
        if executable and not all(os.access(f, os.X_OK) for f in files):    # scp -p keeps an executable bit
            self._shell(f"chmod 755 {' '.join(shlex.quote(f'{remote_dir}/{Path(f).name}') for f in files)}",
                        PROBE_TIMEOUT, "ssh chmod")

    def pull(self, remote_files: Sequence[str], local_dir: Path) -> bool:
        sources = [f"{self.spec.address}:{r}" for r in remote_files]
        done = _run(self.spec, [self.scp, "-q", *self._options("-P"), *sources, f"{local_dir}/"], COPY_TIMEOUT,
                    f"scp from {self.spec.label}")
        if done.returncode != 0:
            if "No such file" in done.stderr:
                return False
            if done.returncode == 255 and "scp:" not in done.stderr:
                raise self._unreachable(done)
            raise DeviceError(f"{self.spec.label}: copying {', '.join(remote_files)} back failed: {done.tail(2)}",
                              "check the host's disk space")
        return True


# adb's own words for a device it cannot talk to (adb 1.0.41 writes "adb: ...", older ones "error: ...")
ADB_GONE = re.compile(r"^(adb|error): (device .*(not found|offline|unauthorized|authorizing)|closed|no devices)", re.M)


class AdbTransport(_ShellTransport):
    """Exactly what a phone needs: `adb -s SERIAL push|shell|pull`, files under /data/local/tmp, facts from getprop."""

    label = "adb"

    def __init__(self, spec: DeviceSpec, shims: Mapping[str, Path]) -> None:
        super().__init__(spec, DEVICE_KINDS["adb"].base_dir)
        self.adb = os.environ.get("EDGEKIT_ADB") or _require("adb", "adb")

    def _argv(self, *args: str) -> list[str]:
        return [self.adb, "-s", self.spec.address, *args]

    def _gone(self, done: proc.ProcessRecord) -> bool:
        return done.returncode != 0 and ADB_GONE.search(done.stderr or "") is not None

    def _unreachable(self, done: proc.ProcessRecord) -> DeviceError:
        return DeviceError(f"{self.spec.label} is unreachable: {done.tail(1) or f'adb exited {done.returncode}'}",
                           f"connect it and accept the debugging prompt; `adb devices` must list {self.spec.address}")

    def _shell(self, command: str, timeout: float, what: str) -> proc.ProcessRecord:
        done = _run(self.spec, self._argv("shell", command), timeout, what)
        if self._gone(done):
            raise self._unreachable(done)
        return done

    def _facts(self) -> DeviceFacts:
        state = _run(self.spec, self._argv("get-state"), PROBE_TIMEOUT, "adb get-state")
        if state.returncode != 0 or state.stdout.strip() != "device":
            raise self._unreachable(state)
        done = self._shell(facts_mod.ANDROID_SCRIPT, PROBE_TIMEOUT, "adb facts")
        return facts_mod.android_facts(facts_mod.parse_lines(done.stdout))

    def run_env(self, argv: Sequence[str]) -> dict[str, str]:
        # bionic's linker: the Lite library lies beside the runner
        return {"LD_LIBRARY_PATH": str(Path(argv[0]).parent)} if "/" in argv[0] else {}

    def push(self, files: Sequence[Path], remote_dir: str, *, executable: bool = False) -> None:
        names = ", ".join(Path(f).name for f in files)
        done = _run(self.spec, self._argv("push", *map(str, files), f"{remote_dir}/"), COPY_TIMEOUT,
                    f"adb push to {self.spec.label}")
        text = done.stdout + done.stderr
        if done.returncode != 0 or NO_SPACE in text:
            if NO_SPACE in text:
                raise _disk_full(self.spec, f"adb push of {names} to {remote_dir}", self.session)
            if self._gone(done):
                raise self._unreachable(done)
            raise DeviceError(f"{self.spec.label}: adb push of {names} failed: {done.tail(2)}",
                              "check /data/local/tmp (or ?dir=) is writable")
        if executable:
            self._shell(f"chmod 755 {' '.join(shlex.quote(f'{remote_dir}/{Path(f).name}') for f in files)}",
                        PROBE_TIMEOUT, "adb chmod")

    def pull(self, remote_files: Sequence[str], local_dir: Path) -> bool:
        done = _run(self.spec, self._argv("pull", *remote_files, f"{local_dir}/"), COPY_TIMEOUT,
                    f"adb pull from {self.spec.label}")
        if done.returncode != 0:
            if "does not exist" in done.stderr or "No such file" in done.stderr:
                return False
            if self._gone(done):
                raise self._unreachable(done)
            raise DeviceError(f"{self.spec.label}: adb pull of {', '.join(remote_files)} failed: {done.tail(2)}",
                              "check the host's disk space")
        return True


class QemuTransport:
    """This host as a device: files in a local folder, the runner under qemu-user with the CPU profile's view."""

    def __init__(self, spec: DeviceSpec, shims: Mapping[str, Path]) -> None:
        self.spec = spec
        self.shims = dict(shims)
        self.session = tempfile.mkdtemp(prefix="edgekit-device-", dir=spec.get("dir"))

    def facts(self) -> DeviceFacts:
        from ..lite import native
        from edgekit.core.tables import CPU_PROFILES

        profile = CPU_PROFILES[self.spec.address]
        versions = []
        for abi in profile.abis:
            emulator = native.ABIS[native.Abi(abi)].emulator
            done = _run(self.spec, [emulator, "--version"], PROBE_TIMEOUT, f"{emulator} --version") \
                if shutil.which(emulator) else None
            found = re.search(r"version (\S+)", done.stdout) if done is not None and done.returncode == 0 else None
            versions.append(f"{emulator} {found.group(1)}" if found else f"{emulator} missing (apt-get install qemu-user)")
        host = facts_mod.parse_lines(_read("/etc/os-release").replace('"', ""))
        cpu = facts_mod.parse_lines(_read("/proc/cpuinfo").replace("\t", "").replace(": ", "="))
        return DeviceFacts(kind="qemu", reported_abi="/".join(profile.abis), abis=profile.abis,
                           model=f"this host: {cpu.get('model name', platform.machine())}",
                           soc=f"CPU profile {self.spec.address} ({profile.int8_kernels} INT8 kernels)",
                           os=host.get("PRETTY_NAME"), kernel=f"{platform.system()} {platform.release()}",
                           cores=os.cpu_count(), governor=_read(facts_mod.GOVERNOR_FILE).strip() or None,
                           temperature_c=self.temperature(), emulated=", ".join(versions) + " on this host")

    def temperature(self) -> float | None:
        zones = sorted(Path("/sys/class/thermal").glob("thermal_zone*/temp"))
        return facts_mod.hottest_celsius(" ".join(_read(str(z)) for z in zones))

    def mkdir(self, *paths: str) -> None:
        for path in paths:
            Path(path).mkdir(parents=True, exist_ok=True)

    def push(self, files: Sequence[Path], remote_dir: str, *, executable: bool = False) -> None:
        for file in files:
            try:
                shutil.copy2(file, Path(remote_dir) / Path(file).name)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise _disk_full(self.spec, f"copying {Path(file).name}", self.session) from exc
                raise DeviceError(f"{self.spec.label}: copying {Path(file).name} failed: {exc.strerror}",
                                  "check the temporary folder (?dir=)") from exc

    def pull(self, remote_files: Sequence[str], local_dir: Path) -> bool:
        found = [Path(r) for r in remote_files if Path(r).is_file()]
        for file in found:
            shutil.copy2(file, Path(local_dir) / file.name)
        return len(found) == len(remote_files)

    def run(self, argv: Sequence[str], *, abi: str, cwd: str, env: Mapping[str, str], timeout: float) -> proc.ProcessRecord:
        from ..lite import native

        prefix = native.emulator_argv(abi, None, self.spec.address, shim=self.shims.get(abi))
        return _run(self.spec, [*prefix, *argv], timeout, f"edgekit-lite-run on {self.spec.label}", cwd=cwd,
                    env={**os.environ, **env})

    def close(self, keep: bool = False) -> None:
        if not keep:
            shutil.rmtree(self.session, ignore_errors=True)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


COMMON_OPTIONS = ("name", "dir", "abi", "runner", "lib", "exec")

DEVICE_KINDS: dict[str, DeviceKind] = {
    "adb": DeviceKind(AdbTransport, "adb:SERIAL", COMMON_OPTIONS, "/data/local/tmp",
                      "an Android device over adb (the runner and Lite library must be Android builds: runner=, lib=)"),
    "ssh": DeviceKind(SshTransport, "ssh:[user@]host[:port]", COMMON_OPTIONS + ("config", "identity"), "/tmp",
                      "a Linux ARM board over OpenSSH (key login; BatchMode)"),
    "qemu": DeviceKind(QemuTransport, "qemu[:cpu]", ("name", "dir"), None,
                       "this host, the ARM runner under qemu-user: emulated, latency never gated"),
}


def open_transport(spec: DeviceSpec, shims: Mapping[str, Path]) -> Transport:
    return DEVICE_KINDS[spec.kind].make(spec, shims)


def discover() -> list[tuple[str, str, str]]:
    """(kind, device, what is known) for `edgekit device list`: adb's devices, qemu's profiles, ssh's syntax."""
    from edgekit.core.tables import CPU_PROFILES

    rows: list[tuple[str, str, str]] = []
    adb = os.environ.get("EDGEKIT_ADB") or shutil.which("adb")
    if adb is None:
        rows.append(("adb", "-", "adb is not installed (apt-get install adb)"))
    else:
        done = proc.run([adb, "devices", "-l"], timeout=PROBE_TIMEOUT, what="adb devices")
        listed = [line.split() for line in done.stdout.splitlines()[1:] if line.strip() and not line.startswith("*")]
        for words in listed:
            details = dict(w.split(":", 1) for w in words[2:] if ":" in w)
            rows.append(("adb", f"adb:{words[0]}", " ".join([words[1] if len(words) > 1 else "?",
                                                              details.get("model", "").replace("_", " ")]).strip()))
        if not listed:
            rows.append(("adb", "-", f"no device attached ({done.tail(1) or 'adb devices lists none'})"))
    for name, profile in CPU_PROFILES.items():
        rows.append(("qemu", "qemu" if name == "default" else f"qemu:{name}", f"{'/'.join(profile.abis)}: {profile.note}"))
    rows.append(("ssh", DEVICE_KINDS["ssh"].syntax, DEVICE_KINDS["ssh"].note + "; options " +
                 ", ".join(DEVICE_KINDS["ssh"].options)))
    return rows
