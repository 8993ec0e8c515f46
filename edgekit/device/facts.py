"""What a device is: model, SoC, ABIs, OS, governor, temperature, and whether it is emulated.

Each transport runs one shell script on the device (`LINUX_SCRIPT` over ssh,
`ANDROID_SCRIPT` over adb) that prints `key=value` lines; the parsers here are pure
and turn those lines into `DeviceFacts`. Whatever a device cannot tell stays None.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Mapping, Sequence

from edgekit.core.tables import TARGETS

# The thermal zones every Linux kernel exposes (millidegrees); a SoC has several, the hottest counts.
TEMPERATURE_SCRIPT = "cat /sys/class/thermal/thermal_zone*/temp 2>/dev/null"
GOVERNOR_FILE = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"

LINUX_SCRIPT = "; ".join([
    'echo "machine=$(uname -m)"',
    'echo "kernel=$(uname -sr)"',
    '[ -r /etc/os-release ] && (. /etc/os-release && echo "os=$PRETTY_NAME")',
    '[ -r /proc/device-tree/model ] && echo "model=$(tr -d \'\\000\' < /proc/device-tree/model)"',
    'echo "hardware=$(grep -m1 -i \'^hardware\' /proc/cpuinfo | cut -d: -f2-)"',
    'echo "cpu_model=$(grep -m1 -i \'^model name\' /proc/cpuinfo | cut -d: -f2-)"',
    'echo "cpu_parts=$(grep -i \'^cpu part\' /proc/cpuinfo | cut -d: -f2 | sort | uniq -c | tr -s \' \\n\' \' \')"',
    'echo "cores=$(grep -c ^processor /proc/cpuinfo)"',
    f'echo "governor=$(cat {GOVERNOR_FILE} 2>/dev/null)"',
    f'echo "temp_mc=$({TEMPERATURE_SCRIPT} | tr \'\\n\' \' \')"',
    '[ -e /lib/ld-linux-armhf.so.3 ] && echo "armhf_loader=yes"',
    "true",
])

ANDROID_PROPS = {
    "manufacturer": "ro.product.manufacturer", "model": "ro.product.model", "soc_vendor": "ro.soc.manufacturer",
    "soc": "ro.soc.model", "platform": "ro.board.platform", "hardware": "ro.hardware",
    "abilist": "ro.product.cpu.abilist", "release": "ro.build.version.release", "sdk": "ro.build.version.sdk",
    "kernel_qemu": "ro.kernel.qemu", "boot_qemu": "ro.boot.qemu",
}
ANDROID_SCRIPT = "; ".join(
    [f'echo "{key}=$(getprop {prop})"' for key, prop in ANDROID_PROPS.items()] + [
        'echo "machine=$(uname -m)"',
        'echo "kernel=$(uname -sr)"',
        'echo "cores=$(grep -c ^processor /proc/cpuinfo)"',
        f'echo "governor=$(cat {GOVERNOR_FILE} 2>/dev/null)"',
        f'echo "temp_mc=$({TEMPERATURE_SCRIPT} | tr \'\\n\' \' \')"',
        "true",
    ])

# uname -m -> the runner ABIs such a kernel runs natively
LINUX_MACHINES: dict[str, tuple[str, ...]] = {
    "aarch64": ("aarch64",), "arm64": ("aarch64",), "armv8l": ("armhf",), "armv7l": ("armhf",), "armv7": ("armhf",),
}
# Android ABI names -> runner ABIs (the runner itself must be an NDK build there: see docs/device-suite.md)
ANDROID_ABIS = {info.abi: info.emulation for info in TARGETS.values() if info.emulation is not None}


@dataclass(frozen=True)
class DeviceFacts:
    kind: str                    # adb, ssh, qemu
    reported_abi: str            # what the device says it is (uname -m, ro.product.cpu.abilist)
    abis: tuple[str, ...]        # runner ABIs it runs: aarch64, armhf
    model: str | None = None
    soc: str | None = None
    os: str | None = None
    kernel: str | None = None
    cores: int | None = None
    governor: str | None = None
    temperature_c: float | None = None
    emulated: str | None = None  # None on real hardware; else how it is emulated

    def to_json(self) -> dict:
        record = asdict(self)
        record["abis"] = list(self.abis)
        return record

    def line(self) -> str:
        parts = [self.model or "unknown model", f"SoC {self.soc}" if self.soc else None, self.reported_abi,
                 self.os, f"governor {self.governor}" if self.governor else None,
                 f"{self.temperature_c:.1f} °C" if self.temperature_c is not None else None,
                 f"EMULATED: {self.emulated}" if self.emulated else None]
        return ", ".join(p for p in parts if p)


def parse_lines(text: str) -> dict[str, str]:
    """`key=value` lines -> dict (empty values dropped; later keys win)."""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and value.strip():
            found[key.strip()] = value.strip()
    return found


def hottest_celsius(text: str) -> float | None:
    """The hottest plausible thermal zone in °C, from millidegree readings (bogus zones read <0 or >150 °C)."""
    readings = []
    for word in text.split():
        try:
            value = int(word)
        except ValueError:
            continue
        if 0 <= value <= 150_000:
            readings.append(value / 1000.0)
    return max(readings) if readings else None


def available_kb(df_output: str) -> int | None:
    """The 'Available' column of `df -Pk PATH` (POSIX format: a header, then one line per file system)."""
    lines = [line.split() for line in df_output.strip().splitlines()[1:]]
    try:
        return int(lines[-1][3]) if lines else None
    except (IndexError, ValueError):
        return None


def _cores(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and int(text) > 0 else None


def linux_facts(values: Mapping[str, str], kind: str = "ssh") -> DeviceFacts:
    machine = values.get("machine", "unknown")
    abis = LINUX_MACHINES.get(machine, ())
    if abis == ("aarch64",) and values.get("armhf_loader") == "yes":
        abis = ("aarch64", "armhf")          # a 64-bit board with the 32-bit loader runs armhf binaries too
    soc = values.get("hardware") or (f"CPU parts {values['cpu_parts']}" if values.get("cpu_parts") else None)
    return DeviceFacts(kind=kind, reported_abi=machine, abis=abis,
                       model=values.get("model") or values.get("cpu_model"), soc=soc, os=values.get("os"),
                       kernel=values.get("kernel"), cores=_cores(values.get("cores")),
                       governor=values.get("governor"), temperature_c=hottest_celsius(values.get("temp_mc", "")))


def android_facts(values: Mapping[str, str]) -> DeviceFacts:
    reported = values.get("abilist") or values.get("machine", "unknown")
    abis = tuple(dict.fromkeys(ANDROID_ABIS[a] for a in reported.split(",") if a in ANDROID_ABIS))
    soc = " ".join(v for v in (values.get("soc_vendor"), values.get("soc")) if v) or values.get("platform") \
        or values.get("hardware")
    model = " ".join(v for v in (values.get("manufacturer"), values.get("model")) if v) or None
    release = values.get("release")
    qemu = values.get("kernel_qemu") == "1" or values.get("boot_qemu") == "1"
    return DeviceFacts(kind="adb", reported_abi=reported, abis=abis, model=model, soc=soc,
                       os=f"Android {release} (API {values.get('sdk', '?')})" if release else None,
                       kernel=values.get("kernel"), cores=_cores(values.get("cores")), governor=values.get("governor"),
                       temperature_c=hottest_celsius(values.get("temp_mc", "")),
                       emulated="Android emulator (ro.kernel.qemu=1)" if qemu else None)


def override_abis(facts: DeviceFacts, abis: Sequence[str], emulated: str | None) -> DeviceFacts:
    """The ABIs a device spec states (`abi=`, or the emulator in `exec=`) replace what the kernel reports."""
    return replace(facts, abis=tuple(abis), emulated=emulated or facts.emulated)
