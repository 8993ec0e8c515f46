"""edgekit-lite-run on real .nb files under qemu, on the real Paddle-Lite ARM runtimes (EDGEKIT_LITE_ARM)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from edgekit.core.errors import DataError, InputModelError, ToolError
from edgekit.lite import native
from edgekit.lite.cmake import PRUNE_AFTER_SECONDS
from edgekit.core.tables import CPU_PROFILES, CpuProfile

pytestmark = pytest.mark.e2e
ARM = ["aarch64", "armhf"]


def golden(bundle):
    manifest = json.loads((bundle / "manifest.json").read_text())
    feeds = {i["name"]: np.load(bundle / i["file"]) for i in manifest["golden"]["inputs"]}
    expect = [native_spec(i["name"], i["shape"], i["dtype"]) for i in manifest["model"]["inputs"]]
    return manifest, feeds, expect, np.load(bundle / manifest["golden"]["outputs"][0]["file"])


class native_spec:  # noqa: N801 - the shape an InputSpec has
    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype


def cosines(a, b):
    a, b = a.reshape(len(a), -1).astype(np.float64), b.reshape(len(b), -1).astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("abi", ARM)
def test_fp32_matches_paddle_and_records_the_run(emulation, tiny_model, abi):
    runtime, build = emulation(abi)
    result = native.run_runner(build, runtime, tiny_model["nb"], tiny_model["feeds"], expect=[tiny_model["spec"]],
                               batch=3, warmup=1, repeat=4)
    (out,) = result.outputs
    reference = tiny_model["reference"][0]
    assert out.shape == reference.shape == (7, 5) and out.dtype == np.float32
    assert float(np.abs(out - reference).max()) <= 1e-4
    r = result.record
    assert (r["schema"], r["status"], r["exit_code"], r["error"], r["phase"]) == ("edgekit.runner/1", "ok", 0, None, "done")
    assert r["runtime_version"] == r["opt_version"] == tiny_model["opt_version"] == "v2.13-rc"
    assert (r["samples"], r["batch"], r["threads"], r["power_mode"]) == (7, 3, 1, "no_bind")
    assert len(r["pass_ms"]) == math.ceil(7 / 3) and r["first_run_ms"] == r["pass_ms"][0]
    assert r["load_ms"] > 0 and r["first_run_ms"] > 0
    assert len(r["warmup_ms"]) == 1 and len(r["iteration_ms"]) == 4 and r["latency_ms"]["count"] == 4
    assert r["peak_rss_kb"] > 5000
    assert r["inputs"][0] == {"name": "x", "shape": [7, 3, 8, 8], "dtype": "float32", "file": r["inputs"][0]["file"],
                              "expected_shape": [-1, 3, 8, 8], "declared_dtype": "float32", "reported_shape": []}
    assert r["outputs"][0]["shape"] == [7, 5] and r["outputs"][0]["dtype"] == "float32"
    assert r["cpu"]["int8_kernel_path"] == "neon" and r["cpu"]["runtime_dotprod"] == (abi == "aarch64")
    assert r["runner"]["abi"] == abi and r["notes"] == []
    assert result.process.stdout == ""     # Lite logs to stderr; stdout stays clean


@pytest.mark.parametrize("abi", ARM)
def test_without_expect_the_record_says_shapes_were_not_checked(emulation, tiny_model, abi):
    runtime, build = emulation(abi)
    result = native.run_runner(build, runtime, tiny_model["nb"], tiny_model["feeds"], batch=7)
    assert float(np.abs(result.outputs[0] - tiny_model["reference"][0]).max()) <= 1e-4
    assert len(result.record["pass_ms"]) == 1
    assert any("shape not checked" in note for note in result.record["notes"])


@pytest.mark.parametrize("abi", ARM)
def test_refuses_models_it_must_not_run(emulation, tiny_model, abi, tmp_path):
    runtime, build = emulation(abi)
    nb, feeds = tiny_model["nb"], tiny_model["feeds"]
    data = nb.read_bytes()

    patched = tmp_path / "v212.nb"
    patched.write_bytes(data[:2] + b"v2.12".ljust(16, b"\0") + data[18:])
    with pytest.raises(InputModelError) as refused:
        native.run_runner(build, runtime, patched, feeds)
    assert refused.value.exit_status == 4
    assert "opt v2.12" in refused.value.message and "Paddle-Lite v2.13-rc" in refused.value.message
    assert refused.value.record["status"] == "error" and refused.value.record["exit_code"] == 4

    cases = {
        "cut.nb": (data[: len(data) // 2], "truncated"),
        "foreign.nb": (tiny_model["pdmodel"].read_bytes(), "not a Paddle-Lite naive_buffer model"),
        # header and sizes intact, program garbled: Lite's own verifier throws, the runner reports it
        "garbled.nb": (data[:26] + bytes(b ^ 0xA5 for b in data[26:200]) + data[200:], "Paddle-Lite cannot load"),
    }
    for name, (content, words) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(InputModelError) as refused:
            native.run_runner(build, runtime, tmp_path / name, feeds)
        assert refused.value.exit_status == 3, name
        assert words in refused.value.message, refused.value.message


@pytest.mark.parametrize("abi", ARM)
def test_refuses_inputs_that_do_not_fit(emulation, tiny_model, abi):
    runtime, build = emulation(abi)
    nb, x, spec = tiny_model["nb"], tiny_model["feeds"]["x"], tiny_model["spec"]
    cases = [
        ({"x": x, "y": x}, [spec], "the model has 1 input(s) (x), 2 given"),
        ({"image": x}, [], "input 'image' is not one of the model's inputs (x)"),
        ({"x": x[:, :1]}, [spec], "samples of shape 1x8x8, the model expects 3x8x8"),
        ({"x": x.astype(np.float64)}, [], "is float64 but the model declares float32"),
        ({"x": x}, [native_spec("x", (-1, 3, 8, 8), "int64")], "is float32, expected int64"),
    ]
    for feeds, expect, words in cases:
        with pytest.raises(DataError) as refused:
            native.run_runner(build, runtime, nb, feeds, expect=expect)
        assert refused.value.exit_status == 5 and words in refused.value.message, refused.value.message


def test_cpu_profiles_pick_the_kernel_path(emulation, run_native):
    runtime, build = emulation("aarch64")
    for name, profile in CPU_PROFILES.items():
        done = run_native("aarch64", runtime, build, [build.runner, "--cpu-info"], name)
        report = json.loads(done.stdout)
        assert report["int8_kernel_path"] == profile.int8_kernels, name
        assert report["parts"][:1] == ([profile.cpu_part] if profile.cpu_part else [])


def test_int8_neon_and_dotprod_paths_agree_bit_for_bit(emulation, digits_int8):
    runtime, build = emulation("aarch64")
    manifest, feeds, expect, reference = golden(digits_int8)
    runs = {p: native.run_runner(build, runtime, digits_int8 / "model.nb", feeds, expect=expect, cpu_profile=p)
            for p in ("default", "a53", "a55")}
    assert {p: r.record["cpu"]["int8_kernel_path"] for p, r in runs.items()} == \
        {"default": "neon", "a53": "neon", "a55": "dotprod"}
    neon, dot = runs["default"].outputs[0], runs["a55"].outputs[0]
    assert np.array_equal(neon, dot) and np.array_equal(neon, runs["a53"].outputs[0])
    # and the INT8 kernels hold the bundle's own gate against the FP32 reference
    assert cosines(dot, reference).mean() >= manifest["golden"]["tolerances"]["min_cosine"]
    assert (dot.argmax(1) == reference.argmax(1)).all()


def test_dotprod_path_executes_sdot(emulation, digits_int8):
    """An A55 cpuinfo on a CPU without the dot-product extension dies with SIGILL: the shim switches paths."""
    runtime, build = emulation("aarch64")
    _, feeds, expect, _ = golden(digits_int8)
    a55_on_a53 = CpuProfile("0xd05", "cortex-a53", "dotprod", ("aarch64",), "A55 cpuinfo, A53 instructions")
    with pytest.raises(ToolError) as died:
        native.run_runner(build, runtime, digits_int8 / "model.nb", feeds, expect=expect, cpu_profile=a55_on_a53)
    assert died.value.exit_status == -signal.SIGILL
    assert died.value.record["phase"] == "pass" and died.value.record["status"] == "running"
    assert "SIGILL" in died.value.message


def test_int8_armhf_matches_aarch64_to_rounding(emulation, digits_int8):
    """Same .nb, the 32-bit runtime: FMA vs unfused float epilogues differ only at rounding level."""
    _, feeds, expect, _ = golden(digits_int8)
    outs = {}
    for abi in ARM:
        runtime, build = emulation(abi)
        result = native.run_runner(build, runtime, digits_int8 / "model.nb", feeds, expect=expect, batch=8)
        assert result.record["cpu"]["int8_kernel_path"] == "neon"
        outs[abi] = result.outputs[0]
    assert float(np.abs(outs["aarch64"] - outs["armhf"]).max()) <= 1e-5
    assert (outs["aarch64"].argmax(1) == outs["armhf"].argmax(1)).all()


def test_armhf_has_no_dot_product_profile(emulation):
    runtime, build = emulation("armhf")
    with pytest.raises(native.ConfigError, match="WITH_ARM_DOTPROD=OFF"):
        native.emulator_argv("armhf", runtime, "a55", shim=build.shim)


def test_a_runner_in_use_survives_another_checkouts_prune(emulation, tmp_path):
    """Issue 32's 'edgekit-lite-run --version: exit 1' and nothing else: a CI build took its cached runner, and
    before tier C asked it for --version another checkout sharing the cache built a newer key and pruned the entry
    (over an hour old, not among the newest). The cache now keeps what a live process took."""
    runtime, build = emulation("aarch64")
    cache = tmp_path / "cache"
    entry = cache / "native" / build.root.name
    shutil.copytree(build.root, entry, symlinks=True)
    taken = native.build("aarch64", runtime, cache)
    assert taken.cached and taken.runner == entry / "edgekit-lite-run"
    hours_ago = time.time() - 3 * PRUNE_AFTER_SECONDS
    os.utime(entry, (hours_ago, hours_ago))
    newer = [cache / "native" / f"aarch64-{i:016x}" for i in range(native.CACHE_KEEP)]
    for folder in newer:
        folder.mkdir()
        (folder / "edgekit-build.json").write_text("{}")
    prune = ("import sys; from pathlib import Path; from edgekit.lite import native; "
             "native._prune(Path(sys.argv[1]), native.Abi.aarch64, keep=Path(sys.argv[2]))")
    subprocess.run([sys.executable, "-c", prune, str(cache / "native"), str(newer[-1])], check=True, timeout=120)
    assert native.runtime_version(taken, runtime) == "v2.13-rc"


@pytest.mark.parametrize("damage, reason", [("gone", "it does not exist"), ("not executable", "it is not executable"),
                                            ("empty", "it is not an ELF file")])
def test_a_runner_qemu_cannot_load_fails_with_the_reason(emulation, tmp_path, damage, reason):
    """qemu-user 7.2 prints its 'Error while loading' with printf and leaves by _exit(1): through a pipe, exit 1 and
    nothing on stdout or stderr. edgekit names the reason instead."""
    runtime, build = emulation("aarch64")
    runner = tmp_path / "edgekit-lite-run"
    if damage != "gone":
        runner.write_bytes(b"" if damage == "empty" else build.runner.read_bytes())
        runner.chmod(0o755 if damage == "empty" else 0o644)
    done = subprocess.run(native.emulator_argv("aarch64", runtime) + [str(runner), "--version"], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "")
    with pytest.raises(ToolError) as caught:
        native.runtime_version(dataclasses.replace(build, runner=runner), runtime)
    assert caught.value.message == (f"edgekit-lite-run --version: qemu-aarch64 could not load the runner {runner}: "
                                    f"{reason} (qemu-user exits 1 without a message then)")
