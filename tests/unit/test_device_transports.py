"""Device specs and device facts: parsing only (the transports themselves run in tests/e2e/test_device.py)."""

import pytest

from edgekit.device.facts import android_facts, hottest_celsius, linux_facts, parse_lines
from edgekit.device.suite import SuiteConfig
from edgekit.device.transports import parse_device
from edgekit.core.errors import ConfigError


def test_device_specs():
    ssh = parse_device("ssh:root@127.0.0.1:2222?exec=qemu-aarch64 -L /usr/aarch64-linux-gnu&config=/tmp/c")
    assert (ssh.kind, ssh.address, ssh.port) == ("ssh", "root@127.0.0.1", 2222)
    assert ssh.get("exec") == "qemu-aarch64 -L /usr/aarch64-linux-gnu" and ssh.get("config") == "/tmp/c"
    assert ssh.id == "ssh-root@127.0.0.1-2222"
    assert parse_device("ssh:pi@board?exec=taskset+-c+4-7&name=pi4 lab").get("exec") == "taskset -c 4-7"
    assert parse_device("ssh:pi@board?name=pi4 lab").id == "pi4_lab"
    assert parse_device("ssh:board").port is None
    adb = parse_device("adb:R58M12?abi=armhf")
    assert (adb.kind, adb.address, adb.get("abi"), adb.id) == ("adb", "R58M12", "armhf", "adb-R58M12")
    assert parse_device("qemu").address == "default" and parse_device("qemu:a55").id == "qemu-a55"


@pytest.mark.parametrize("text, message", [
    ("usb:1234", "is not adb:SERIAL"),
    ("adb:", "names no serial"),
    ("ssh:", "names no host"),
    ("ssh:pi@board:99999", "port '99999'"),
    ("ssh:pi@board?colour=red", "unknown option(s) colour"),
    ("qemu?exec=x", "unknown option(s) exec"),
    ("qemu:z80", "CPU profile 'z80'"),
    ("adb:X?abi=mips", "abi=mips is not one of"),
])
def test_bad_device_specs_say_what_to_write(text, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_device(text)


def test_linux_facts_from_a_raspberry_pi():
    text = ("machine=aarch64\nkernel=Linux 6.1.0-rpi7-rpi-v8\nos=Debian GNU/Linux 12 (bookworm)\n"
            "model=Raspberry Pi 4 Model B Rev 1.4\nhardware=\ncpu_model=\ncpu_parts=4 0xd08\ncores=4\n"
            "governor=ondemand\ntemp_mc=51121 -273000 \narmhf_loader=yes\n")
    facts = linux_facts(parse_lines(text))
    assert facts.abis == ("aarch64", "armhf") and facts.reported_abi == "aarch64"
    assert facts.model == "Raspberry Pi 4 Model B Rev 1.4" and facts.soc == "CPU parts 4 0xd08"
    assert (facts.cores, facts.governor, facts.temperature_c, facts.emulated) == (4, "ondemand", 51.121, None)
    assert linux_facts(parse_lines("machine=x86_64\n")).abis == ()
    assert linux_facts(parse_lines("machine=armv7l\n")).abis == ("armhf",)


def test_android_facts_from_getprop():
    text = ("manufacturer=Google\nmodel=Pixel 7\nsoc_vendor=Google\nsoc=GS201\nplatform=gs201\n"
            "abilist=arm64-v8a,armeabi-v7a,armeabi\nrelease=14\nsdk=34\nkernel_qemu=\nmachine=aarch64\n"
            "cores=8\ngovernor=sched_pixel\ntemp_mc=38000 41500 0\n")
    facts = android_facts(parse_lines(text))
    assert facts.abis == ("aarch64", "armhf") and facts.reported_abi == "arm64-v8a,armeabi-v7a,armeabi"
    assert (facts.model, facts.soc, facts.os) == ("Google Pixel 7", "Google GS201", "Android 14 (API 34)")
    assert facts.temperature_c == 41.5 and facts.emulated is None
    emulator = android_facts(parse_lines("abilist=x86_64,arm64-v8a\nkernel_qemu=1\n"))
    assert emulator.abis == ("aarch64",) and "ro.kernel.qemu=1" in emulator.emulated


def test_temperatures_ignore_bogus_zones():
    assert hottest_celsius("45000 200000 -5 x 47500") == 47.5
    assert hottest_celsius("") is None


def test_suite_options_are_checked_before_anything_runs(tmp_path):
    bundle, qemu, adb = (tmp_path,), (parse_device("qemu"),), (parse_device("qemu"), parse_device("adb:X"))
    with pytest.raises(ConfigError, match="several devices"):
        SuiteConfig(bundle, adb, baseline=tmp_path / "b.json")
    with pytest.raises(ConfigError, match="needs --baseline"):
        SuiteConfig(bundle, qemu, update_baseline=True)
    with pytest.raises(ConfigError, match="given together"):
        SuiteConfig(bundle, qemu, baseline=tmp_path / "b.json", baseline_dir=tmp_path)
    with pytest.raises(ConfigError, match="same id"):
        SuiteConfig(bundle, (parse_device("qemu"), parse_device("qemu:default")))
    with pytest.raises(ConfigError, match="must be >= 1"):
        SuiteConfig(bundle, qemu, launches=0)
    cfg = SuiteConfig(bundle, adb, baseline_dir=tmp_path)
    assert cfg.baseline_file(adb[1]) == tmp_path / "adb-X.json"


def test_free_space_from_df():
    from edgekit.device.facts import available_kb

    text = ("Filesystem     1024-blocks    Used Available Capacity Mounted on\n"
            "/dev/mmcblk0p2    29586708 9134868  19218028      33% /\n")
    assert available_kb(text) == 19218028
    assert available_kb("Filesystem 1024-blocks Used Available Capacity Mounted on\n") is None
    assert available_kb("garbage") is None
