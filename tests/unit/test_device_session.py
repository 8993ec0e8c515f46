"""How a runner that did not finish is reported: a signal, a binary that cannot start, its own exit codes."""

from edgekit.device.session import digest, runner_failure
from edgekit.device.transports import parse_device
from edgekit.core.errors import DataError, DeviceError, InputModelError
from edgekit.core.proc import ProcessRecord

PHONE, BOARD = parse_device("adb:R58M12"), parse_device("ssh:pi@pi4?name=pi4")


def done(code, stderr=""):
    return ProcessRecord(("edgekit-lite-run",), code, 1.0, "", stderr)


def test_deaths_by_signal_local_and_remote():
    local = runner_failure(PHONE, done(-9), {"phase": "latency"}, "launch-2")
    remote = runner_failure(BOARD, done(128 + 11), {"phase": "pass"}, "rerun-1")
    assert isinstance(local, DeviceError) and isinstance(remote, DeviceError)
    assert local.message == "adb:R58M12: the runner was killed by SIGKILL during latency (launch-2); this run has no result"
    assert remote.message.startswith("ssh:pi@pi4 (pi4): the runner was killed by SIGSEGV during pass (rerun-1)")
    assert "start" in runner_failure(BOARD, done(137), None, "launch-1").message      # no record: never started


def test_a_runner_that_cannot_start_on_android_names_the_ndk_build():
    error = runner_failure(PHONE, done(127, "/system/bin/sh: ./edgekit-lite-run: not found"), None, "launch-1")
    assert "could not start on the device (exit 127" in error.message
    assert "NDK build" in error.hint and "?runner=PATH&lib=PATH" in error.hint
    assert "noexec" in runner_failure(BOARD, done(126, "Permission denied"), None, "launch-1").hint


def test_the_runners_own_codes_keep_their_kind():
    record = {"phase": "probe", "error": "model.nb was converted by opt v2.12 but the runtime is Paddle-Lite v2.13-rc",
              "fix": "convert the model with opt v2.13-rc"}
    version = runner_failure(BOARD, done(4), record, "launch-1")
    assert isinstance(version, InputModelError) and version.exit_code == 3 and version.hint == record["fix"]
    assert isinstance(runner_failure(BOARD, done(5), {"phase": "check", "error": "bad"}, "launch-1"), DataError)
    full = runner_failure(BOARD, done(7, "edgekit-lite-run: error: cannot write out/output_0.npy: No space left on device; "
                                         "free space"), None, "launch-1")
    assert "the device's disk is full" in full.message
    internal = runner_failure(BOARD, done(1, "edgekit-lite-run: error: unexpected failure: boom; report this"), None, "x")
    assert isinstance(internal, DeviceError) and internal.message.endswith("unexpected failure: boom; report this")


def test_output_digest_changes_with_any_byte(tmp_path):
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    a.write_bytes(b"\x93NUMPY" + bytes(50))
    b.write_bytes(b"\x93NUMPY" + bytes(50))
    same = digest([a])
    assert digest([b]) == same and digest([a, b]) != same
    b.write_bytes(b"\x93NUMPY" + bytes(49) + b"\x01")
    assert digest([b]) != same
