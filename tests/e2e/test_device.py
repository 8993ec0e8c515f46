"""`edgekit device test` for real: the digits INT8 bundle on three kinds of device.

- ssh: Debian's OpenSSH server on 127.0.0.1 (temporary host key, authorised key, a free
  port), whose remote commands run the aarch64 runner through qemu (`?exec=`).
- adb: a stand-in `adb` (tests/e2e/standins/adb) mapping push/shell/pull onto a folder
  plus qemu; to the suite it is a phone, so its latency is gated.
- qemu: this host.
Timing-sensitive numbers are kept loose: the machine is shared and emulated latency is noisy.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from bundles import manifest

from edgekit.model.artifacts import sha256_file

pytestmark = pytest.mark.e2e

STANDINS = Path(__file__).parent / "standins"
QEMU_EXEC = "qemu-aarch64 -L /usr/aarch64-linux-gnu"
FAST = ("--launches", "3", "--warmup", "1", "--iterations", "10")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, lite_arm, cli):
    """digits arm64 INT8, and the aarch64 runner built (cached) before any test measures how fast a failure is."""
    from edgekit.device.preflight import runtime_for

    out = tmp_path_factory.mktemp("device-bundles")
    cli("build", "--target", "arm64", "--quant", "int8", "--out", out, "--no-emulation", "--quiet")
    runtime_for(lite_arm, "aarch64")
    return out / "digits" / "arm64-int8"


def unavailable(reason: str) -> None:
    """The emulation policy of tests/conftest.py (not importable from here): skip, or fail when CI requires it."""
    if os.environ.get("EDGEKIT_REQUIRE_EMULATION", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"EDGEKIT_REQUIRE_EMULATION=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """sshd on 127.0.0.1:<free port> as the current user; yields spec(dir, exec) -> the --device that reaches it."""
    sshd = Path("/usr/sbin/sshd")
    if not sshd.is_file() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        unavailable("openssh-server / openssh-client are not installed (native/install-deps.sh installs them)")
    folder = tmp_path_factory.mktemp("board")
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)], check=True)
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (folder / "sshd_config").write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {folder / 'host_key'}",
        f"AuthorizedKeysFile {folder / 'authorized_keys'}", f"PidFile {folder / 'sshd.pid'}", "StrictModes no",
        "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
        "PermitRootLogin prohibit-password", "Subsystem sftp /usr/lib/openssh/sftp-server", "LogLevel ERROR", ""]))
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {(folder / 'host_key.pub').read_text()}")
    (folder / "ssh_config").write_text("\n".join([
        "Host 127.0.0.1", f"  IdentityFile {folder / 'client_key'}", "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {folder / 'known_hosts'}", "  GlobalKnownHostsFile /dev/null",
        "  StrictHostKeyChecking yes", ""]))
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)     # sshd's privilege-separation directory
    server = subprocess.Popen([str(sshd), "-D", "-e", "-f", str(folder / "sshd_config")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"sshd exited {server.returncode}: {server.stderr.read()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    else:
        pytest.fail(f"sshd did not listen on 127.0.0.1:{port} within 15 s")

    def spec(files: Path, exec_prefix: str | None = QEMU_EXEC) -> str:
        """The board, keeping the suite's files under `files` (?dir=), running the runner under `exec_prefix`."""
        files.mkdir(exist_ok=True)
        emulator = f"&exec={exec_prefix}" if exec_prefix else ""
        return f"ssh:{getpass.getuser()}@127.0.0.1:{port}?config={folder / 'ssh_config'}&dir={files}{emulator}" \
               "&name=loopback-board"

    yield spec
    server.terminate()
    server.wait(timeout=10)


@pytest.fixture
def phone(tmp_path, monkeypatch):
    """The stand-in adb on PATH, with one attached 'phone' whose /data lives in tmp_path/phone."""
    bin_dir, root = tmp_path / "adb-bin", tmp_path / "phone"
    bin_dir.mkdir()
    (root / "data" / "local" / "tmp").mkdir(parents=True)
    shutil.copy(STANDINS / "adb", bin_dir / "adb")
    (bin_dir / "adb").chmod(0o755)
    props = tmp_path / "props.json"
    props.write_text(json.dumps({"ro.product.manufacturer": "edgekit", "ro.product.model": "Stand-in phone",
                                 "ro.soc.manufacturer": "qemu-user", "ro.soc.model": "aarch64",
                                 "ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a,armeabi",
                                 "ro.build.version.release": "14", "ro.build.version.sdk": "34"}))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_ADB_ROOT", str(root))
    monkeypatch.setenv("FAKE_ADB_SERIAL", "STANDIN01")
    monkeypatch.setenv("FAKE_ADB_PROPS", str(props))
    monkeypatch.delenv("EDGEKIT_ADB", raising=False)
    return {"spec": "adb:STANDIN01", "root": root}


def sessions(folder: Path) -> list:
    """The suite's folders left on a device (it removes its own when done)."""
    return sorted(folder.glob("**/edgekit-*-*")) if folder.exists() else []


def junit(path: Path) -> dict:
    """{testcase name: (status, message)} of the only testsuite."""
    cases = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        child = next(iter(case), None)
        cases[case.get("name")] = (child.tag if child is not None else "passed",
                                   child.get("message") if child is not None else "")
    return cases


def test_ssh_board_runs_golden_vectors_eval_and_latency(tmp_path, bundle, board, lite_arm, cli):
    digits_test = Path(__file__).resolve().parents[2] / "edgekit" / "examples" / "digits" / "data" / "test"
    files = tmp_path / "board-files"
    result = cli("device", "test", bundle, "--device", board(files), *FAST, "--eval", digits_test,
                 "--eval-samples", "40", "--json", tmp_path / "r.json", "--junit", tmp_path / "j.xml",
                 "--report", tmp_path / "report", "--lite-arm", lite_arm)
    assert "✓ digits/arm64-int8 on loopback-board: passed" in result.output
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert run["status"] == "passed" and run["complete"] and run["exit_code"] == 0
    facts = run["device"]["facts"]
    assert facts["kind"] == "ssh" and facts["abis"] == ["aarch64"] and facts["reported_abi"] == os.uname().machine
    assert facts["emulated"] == f"runner under {QEMU_EXEC}"
    # golden: recomputed on the host from the pulled outputs with the bundle's own tolerance
    tolerance = manifest(bundle)["golden"]["tolerances"]["min_cosine"]
    (cosine,) = [c for c in run["checks"] if c["name"].startswith("golden cosine")]
    assert cosine["status"] == "passed" and cosine["limit"] == tolerance and cosine["value"] >= 0.99   # measured 0.9979
    assert len({launch["output_sha256"] for launch in run["launches"]}) == 1 and len(run["launches"]) == 3
    assert run["eval"]["metric"] == "top1" and run["eval"]["samples"] == 40 and run["eval"]["value"] >= 90  # measured 97.5
    # latency: every timed run kept, statistics over them; emulated, so recorded and never gated
    latency = run["latency"]
    assert [len(s) for s in latency["samples_ms"]] == [10, 10, 10] and latency["summary"]["count"] == 30
    assert 0 < latency["summary"]["median"] <= latency["summary"]["p90"] <= latency["summary"]["p99"]
    assert latency["load_ms_median"] > 0 and run["peak_rss_kb"] > 10_000
    cases = junit(tmp_path / "j.xml")
    assert cases["latency median"][0] == "skipped" and "latency recorded, never gated" in cases["latency median"][1]
    assert cases["eval top1"][0] == "skipped" and "no baseline value" in cases["eval top1"][1]
    assert all(status == "passed" for name, (status, _) in cases.items() if name.startswith(("golden", "bundle",
                                                                                              "version", "outputs det")))
    report = (tmp_path / "report" / "report.md").read_text()
    assert "| digits/arm64-int8 | loopback-board | passed |" in report and "**emulated**" in report
    assert (tmp_path / "report" / "latency.png").stat().st_size > 5000
    assert sessions(files) == []                       # the suite removed what it pushed


def test_injected_delay_is_a_regression_after_its_rerun_and_an_unchanged_rerun_is_not(tmp_path, bundle, phone,
                                                                                       lite_arm, cli):
    base = tmp_path / "phone.json"
    common = (bundle, "--device", phone["spec"], *FAST, "--baseline", base, "--lite-arm", lite_arm,
              "--max-cv", "1.0",            # emulated timing on a shared machine is noisy; the rules, not the noise
              # load that changes between the recordings and a rerun moves an unchanged median: +12.1 ms (+65 %) in a
              # CI run beside other builds, where the default 0.5 ms called it a regression; the injected 40 ms
              # measures +31 to +40 ms
              "--slowdown-ms", "18")
    for _ in range(3):                      # three recordings: the history's noise (MAD) has three medians
        cli("device", "test", *common, "--update-baseline", "--quiet")
    stored = json.loads(base.read_text())["entries"]["digits/arm64-int8"]
    assert len(stored["history"]) == 2 and len(stored["samples_ms"]) == 3
    before = base.read_bytes()

    cli("device", "test", *common, "--json", tmp_path / "same.json", "--quiet")
    same = json.loads((tmp_path / "same.json").read_text())["runs"][0]
    assert same["status"] == "passed" and same["latency"]["verdict"]["kind"] in ("ok", "faster")
    assert next(c for c in same["checks"] if c["name"] == "outputs vs baseline")["status"] == "passed"

    result = cli("device", "test", *common, "--runner-env", "EDGEKIT_RUNNER_DELAY_MS=40", "--json",
                 tmp_path / "slow.json", "--junit", tmp_path / "slow.xml", ok=False)
    assert result.exit_code == 15, result.output
    slow = json.loads((tmp_path / "slow.json").read_text())["runs"][0]
    verdict = slow["latency"]["verdict"]
    assert verdict["kind"] == "regression" and verdict["confirmed"] is True
    # the injected 40 ms, less what load on a shared 2-core machine moves the baseline: measured +31 to +40 ms on ~12 ms
    assert verdict["delta_ms"] >= 20 and verdict["delta_pct"] > 100
    assert [launch["label"] for launch in slow["launches"]] == ["launch-1", "launch-2", "launch-3",
                                                                "rerun-1", "rerun-2", "rerun-3"]
    assert slow["latency"]["rerun"]["median_ms"] - verdict["baseline_ms"] >= 20
    assert "EDGEKIT_RUNNER_DELAY_MS=40" in slow["launches"][0]["record"]["notes"][0]
    status, message = junit(tmp_path / "slow.xml")["latency median"]
    assert status == "failure" and "confirmed by a re-run" in message
    assert junit(tmp_path / "slow.xml")["golden cosine [save_infer_model/scale_0.tmp_0]"][0] == "passed"
    assert base.read_bytes() == before                                            # only --update-baseline writes it
    assert sessions(phone["root"]) == []


def test_matrix_of_devices_with_a_baseline_per_device(tmp_path, bundle, phone, lite_arm, cli):
    result = cli("device", "test", bundle, "--device", "qemu", "--device", phone["spec"], *FAST, "--baseline-dir",
                 tmp_path / "baselines", "--update-baseline", "--max-cv", "1.0", "--json", tmp_path / "r.json",
                 "--lite-arm", lite_arm)
    assert "2 passed" in result.output
    assert sorted(p.name for p in (tmp_path / "baselines").iterdir()) == ["adb-STANDIN01.json", "qemu-default.json"]
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert [r["device"]["id"] for r in runs] == ["qemu-default", "adb-STANDIN01"]
    assert [r["baseline_updated"] for r in runs] == [True, True]
    qemu, adb = (r["device"]["facts"] for r in runs)
    assert qemu["emulated"].startswith("qemu-aarch64 ") and adb["emulated"] is None
    assert adb["model"] == "edgekit Stand-in phone" and adb["os"] == "Android 14 (API 34)"
    assert runs[0]["output_sha256"] == runs[1]["output_sha256"]        # the same kernels: identical outputs


def test_corrupted_bundle_and_version_mismatch_fail_before_any_device(tmp_path, bundle, lite_arm, cli):
    nowhere = "ssh:nobody@127.0.0.1:1"          # never contacted: the bundle is refused on the host
    corrupt = tmp_path / "corrupt"
    shutil.copytree(bundle, corrupt)
    data = bytearray((corrupt / "model.nb").read_bytes())
    data[-10] ^= 0xFF
    (corrupt / "model.nb").write_bytes(bytes(data))
    start = time.monotonic()
    result = cli("device", "test", corrupt, "--device", nowhere, "--junit", tmp_path / "c.xml", "--lite-arm", lite_arm,
                 ok=False)
    assert result.exit_code == 10 and time.monotonic() - start < 5
    assert "does not verify: checksum mismatch: model.nb" in result.output and "unreachable" not in result.output
    assert junit(tmp_path / "c.xml")["bundle integrity"][0] == "failure"

    other = tmp_path / "v2.12"
    shutil.copytree(bundle, other)
    nb = other / "model.nb"
    data = bytearray(nb.read_bytes())
    data[2:18] = struct.pack("16s", b"v2.12")
    nb.write_bytes(bytes(data))
    m = manifest(other)
    m["files"]["model.nb"] = {"sha256": sha256_file(nb), "bytes": nb.stat().st_size}
    m["model"]["opt_version"] = "v2.12"                       # what a build with opt v2.12 writes, consistently
    m["model"]["runtime_required"]["opt_version"] = "v2.12"
    (other / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    start = time.monotonic()
    result = cli("device", "test", other, "--device", nowhere, "--junit", tmp_path / "v.xml", "--json",
                 tmp_path / "v.json", "--lite-arm", lite_arm, ok=False)
    assert result.exit_code == 3 and time.monotonic() - start < 20
    assert "written by opt v2.12" in result.output and "Paddle-Lite v2.13-rc" in result.output
    assert junit(tmp_path / "v.xml")["version lock"][0] == "failure"
    run = json.loads((tmp_path / "v.json").read_text())["runs"][0]
    assert run["complete"] is False and run["launches"] == [] and run["device"]["facts"] is None


def test_unreachable_devices(tmp_path, bundle, phone, lite_arm, cli):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    result = cli("device", "test", bundle, "--device", f"ssh:nobody@127.0.0.1:{closed}", "--device", "adb:GONE42",
                 "--junit", tmp_path / "j.xml", "--json", tmp_path / "r.json", "--lite-arm", lite_arm, ok=False)
    assert result.exit_code == 14
    assert f"ssh:nobody@127.0.0.1:{closed} is unreachable: ssh: connect to host 127.0.0.1 port {closed}: " \
           "Connection refused" in result.output
    assert "adb:GONE42 is unreachable: adb: device 'GONE42' not found" in result.output
    suites = ET.parse(tmp_path / "j.xml").getroot().findall("testsuite")
    assert [s.find("testcase/error").get("type") for s in suites] == ["DeviceError", "DeviceError"]
    assert [r["complete"] for r in json.loads((tmp_path / "r.json").read_text())["runs"]] == [False, False]


def test_wrong_abi_is_refused_before_pushing(tmp_path, bundle, board, lite_arm, cli):
    remote = tmp_path / "board-files"
    spec = board(remote, exec_prefix=None)          # the x86-64 host itself, no emulator
    result = cli("device", "test", bundle, "--device", spec, "--keep", "--junit", tmp_path / "j.xml",
                 "--lite-arm", lite_arm, ok=False)
    assert result.exit_code == 14
    assert f"is {os.uname().machine} (runs no ARM runner), but digits/arm64-int8 needs aarch64" in result.output
    assert list(remote.iterdir()) == []                                       # nothing pushed, even with --keep
    assert junit(tmp_path / "j.xml")["device"][0] == "error"


def test_full_disk_on_the_phone(tmp_path, bundle, phone, lite_arm, cli, monkeypatch):
    base = tmp_path / "phone.json"
    monkeypatch.setenv("FAKE_ADB_FULL", "1")
    result = cli("device", "test", bundle, "--device", phone["spec"], *FAST, "--baseline", base, "--update-baseline",
                 "--json", tmp_path / "r.json", "--junit", tmp_path / "j.xml", "--lite-arm", lite_arm, ok=False)
    assert result.exit_code == 14
    assert "adb:STANDIN01: the device's disk is full: adb push of libpaddle_light_api_shared.so" in result.output
    assert "No space left on device" in result.output
    assert junit(tmp_path / "j.xml")["push"][0] == "error"
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert run["status"] == "error" and run["complete"] is False and run["latency"] is None
    assert not base.exists()                                                  # a failed run is never a baseline
    assert sessions(phone["root"]) == []


def _kill_when_timing(folder: Path, stop: threading.Event, killed: list) -> None:
    """Kill (SIGKILL, by pid) the emulated runner this test started, once its record says it is timing runs."""
    deadline = time.monotonic() + 120
    while not stop.is_set() and time.monotonic() < deadline:
        records = list(folder.glob("edgekit-*/b0/launch-1/record.json"))
        phase = json.loads(records[0].read_text()).get("phase") if records else None
        if phase == "latency":
            for entry in Path("/proc").iterdir():
                try:
                    argv = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if entry.name.isdigit() and argv[0].endswith(b"qemu-aarch64") and \
                        any(str(folder).encode() in a for a in argv):
                    os.kill(int(entry.name), signal.SIGKILL)
                    killed.append(int(entry.name))
                    return
        time.sleep(0.05)


def test_runner_killed_mid_run(tmp_path, bundle, board, lite_arm, cli):
    remote = tmp_path / "board-files"
    spec = board(remote)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_when_timing, args=(remote, stop, killed), daemon=True)
    killer.start()
    try:
        result = cli("device", "test", bundle, "--device", spec, "--launches", "1",
                     "--iterations", "100", "--runner-env", "EDGEKIT_RUNNER_DELAY_MS=200", "--json", tmp_path / "r.json",
                     "--junit", tmp_path / "j.xml", "--lite-arm", lite_arm, ok=False)
    finally:
        stop.set()
        killer.join()
    assert killed, "the runner never reached its timed runs"
    assert result.exit_code == 14
    assert "the runner was killed by SIGKILL during latency (launch-1); this run has no result" in result.output
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert run["complete"] is False and run["latency"] is None and run["error"]["phase"] == "launch"
    (launch,) = run["launches"]                      # the killed launch's last provisional record, marked failed
    assert launch["failed"] and launch["exit_status"] == 128 + signal.SIGKILL
    assert launch["record"]["status"] == "running" and launch["record"]["phase"] == "latency"
    assert junit(tmp_path / "j.xml")["launch"][0] == "error"
    assert list(remote.iterdir()) == []              # the session folder was removed afterwards


def test_device_list_shows_what_this_host_reaches(phone, cli):
    result = cli("device", "list")
    assert "adb:STANDIN01" in result.output and "Stand in phone" in result.output
    assert "qemu:a55" in result.output and "ssh:[user@]host[:port]" in result.output


def test_a_runner_error_is_one_line_with_the_runners_fix(tmp_path, bundle, lite_arm, cli):
    result = cli("device", "test", bundle, "--device", "qemu", "--runner-env", "EDGEKIT_RUNNER_DELAY_MS=soon",
                 "--json", tmp_path / "r.json", "--lite-arm", lite_arm, ok=False)
    assert result.exit_code == 14
    assert "edgekit-lite-run failed in start (launch-1, exit 2): EDGEKIT_RUNNER_DELAY_MS='soon' is not a whole " \
           "number of milliseconds" in result.output
    assert "fix: unset EDGEKIT_RUNNER_DELAY_MS (it is a test hook)" in result.output
    (launch,) = json.loads((tmp_path / "r.json").read_text())["runs"][0]["launches"]
    assert launch["failed"] and launch["record"]["status"] == "error" and launch["record"]["exit_code"] == 2
