"""The Lite-free native core on the host: its ctest suite, and its readers/writers against numpy and json."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from edgekit.lite import native

NUMPY_ARRAYS = {
    "f32_4d.npy": np.random.default_rng(1).standard_normal((3, 1, 5, 7)).astype(np.float32),
    "f64_scalar.npy": np.array(2.5),
    "i64_1d.npy": np.arange(-5, 12, dtype=np.int64),
    "i32_2d.npy": np.arange(12, dtype=np.int32).reshape(3, 4),
    "i16.npy": np.array([[-3, 7]], dtype=np.int16),
    "i8.npy": np.array([-128, 0, 127], dtype=np.int8),
    "u8_empty.npy": np.zeros((0, 3), dtype=np.uint8),
    "u16.npy": np.array([1, 65535], dtype=np.uint16),
    "bool.npy": np.array([True, False, True]),
    "f32_fortran_1d.npy": np.asfortranarray(np.arange(5, dtype=np.float32)),
    "f32_wide_first_dim.npy": np.zeros((123456, 1), dtype=np.float32),
}


def write_numpy_files(folder):
    folder.mkdir()
    for name, array in NUMPY_ARRAYS.items():
        np.save(folder / name, array)
    np.savez(folder / "feeds.npz", image=NUMPY_ARRAYS["f32_4d.npy"], **{"scope/ids": NUMPY_ARRAYS["i64_1d.npy"]})


def check_roundtrip(src, dst, stdout):
    report = json.loads(stdout)
    for name, array in NUMPY_ARRAYS.items():
        back = np.load(dst / name)
        assert back.dtype == array.dtype and back.shape == array.shape and np.array_equal(back, array), name
        assert report[name]["shape"] == list(array.shape)
        # same header, same data: byte-for-byte what numpy.save writes (C-order arrays)
        if array.flags.c_contiguous:
            assert (dst / name).read_bytes() == (src / name).read_bytes(), name
    with np.load(dst / "feeds.npz") as z:
        assert list(z.keys()) == ["image", "scope/ids"]
        assert np.array_equal(z["image"], NUMPY_ARRAYS["f32_4d.npy"])
        assert np.array_equal(z["scope/ids"], NUMPY_ARRAYS["i64_1d.npy"])


ABIS = ["host", pytest.param("aarch64", marks=pytest.mark.e2e), pytest.param("armhf", marks=pytest.mark.e2e)]


@pytest.mark.parametrize("abi", ABIS)
def test_ctest(emulation, run_native, abi):
    """The core's unit tests through ctest (under qemu for ARM: the build folder carries the emulator)."""
    runtime, build = emulation(abi)
    done = subprocess.run(["ctest", "--test-dir", str(build.root), "--output-on-failure"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "100% tests passed" in done.stdout
    counted = run_native(abi, runtime, build, [build.core_tests])
    passed, total = counted.stdout.strip().splitlines()[-1].split(" passed")[0].split(" of ")
    assert passed == total and int(total) >= 35


@pytest.mark.parametrize("abi", ABIS)
def test_npy_npz_against_numpy(emulation, run_native, abi, tmp_path):
    runtime, build = emulation(abi)
    write_numpy_files(tmp_path / "src")
    done = run_native(abi, runtime, build, [build.core_tests, "--npy-roundtrip", tmp_path / "src", tmp_path / "dst"])
    assert done.returncode == 0, done.stderr
    check_roundtrip(tmp_path / "src", tmp_path / "dst", done.stdout)


def test_compressed_npz_refused(emulation, tmp_path):
    _, build = emulation("host")
    (tmp_path / "src").mkdir()
    np.savez_compressed(tmp_path / "src" / "c.npz", x=np.ones(100, np.float32))
    done = subprocess.run([str(build.core_tests), "--npy-roundtrip", str(tmp_path / "src"), str(tmp_path / "dst")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 5
    assert "numpy.savez, not numpy.savez_compressed" in done.stderr


def test_json_against_python(emulation, tmp_path):
    _, build = emulation("host")
    doc = {"schema": "edgekit.runner/1", "text": "caf\u00e9 \u2603 \U0001F600 \"q\" \\ \n\t\u0001",
           "ints": [0, -1, 2**53 + 1, -(2**62)], "floats": [0.1, 1e-7, 1.5e300, -2.5, 1 / 3],
           "nested": {"a": [], "b": {}, "c": [None, True, False]}}
    (tmp_path / "in.json").write_text(json.dumps(doc, ensure_ascii=True))
    done = subprocess.run([str(build.core_tests), "--json-roundtrip", str(tmp_path / "in.json"), str(tmp_path / "out.json")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8")) == doc
    (tmp_path / "bad.json").write_text('{"a": [1, 2,]}')
    bad = subprocess.run([str(build.core_tests), "--json-roundtrip", str(tmp_path / "bad.json"), str(tmp_path / "x")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 5 and "invalid JSON at byte 12" in bad.stderr


@pytest.mark.parametrize("part, path", [("0xd05", "dotprod"), ("0xd03", "neon"), ("0xd05,0xd08", "neon")])
def test_shim_on_the_host(emulation, part, path):
    """The shim works natively too: the classifier reads what it injects (all cores must be dot-capable)."""
    _, build = emulation("host")
    env = {"LD_PRELOAD": str(build.shim), "EDGEKIT_CPU_PART": part, "EDGEKIT_CPU_COUNT": "4", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(build.core_tests), "--cpu-report", "--runtime-dotprod"], capture_output=True, text=True,
                          timeout=60, env=env)
    report = json.loads(done.stdout)
    assert report["int8_kernel_path"] == path
    assert report["parts"][0] == part.split(",")[0] and len(report["parts"]) == 4


@pytest.mark.e2e
def test_nb_header_matches_python_reader(emulation, tiny_model, digits_int8, tmp_path):
    """The C++ header reader agrees with edgekit.lite.nbfile on real opt output, and refuses what it refuses."""
    from edgekit.lite import read_header

    _, build = emulation("host")
    for nb in (tiny_model["nb"], digits_int8 / "model.nb"):
        done = subprocess.run([str(build.core_tests), "--nb-header", str(nb)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        got, want = json.loads(done.stdout), read_header(nb)
        assert (got["format_version"], got["opt_version"], got["program_bytes"], got["params_bytes"], got["file_bytes"]) == \
            (want.format_version, want.opt_version, want.program_bytes, want.params_bytes, want.file_bytes)
        assert got["param_count"] > 0
    cut = tmp_path / "cut.nb"
    cut.write_bytes(tiny_model["nb"].read_bytes()[:-100])
    done = subprocess.run([str(build.core_tests), "--nb-header", str(cut)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "truncated" in done.stderr


def test_abi_table_and_runtime_lookup(tmp_path):
    assert native.ABIS[native.Abi.aarch64].elf_machine == 0xB7
    assert native.ABIS[native.Abi.armhf].lite_folder == "inference_lite_lib.armlinux.armv7hf"
    with pytest.raises(native.ConfigError, match="no Paddle-Lite aarch64 light runtime"):
        native.find_runtime(tmp_path, "aarch64")
    cxx = tmp_path / "inference_lite_lib.armlinux.armv8" / "cxx"
    (cxx / "include").mkdir(parents=True)
    (cxx / "lib").mkdir()
    (cxx / "include" / "paddle_api.h").write_text("")
    (cxx / "lib" / "libpaddle_light_api_shared.so").write_bytes(
        b"\x7fELF\x02\x01\x01" + bytes(11) + (0x3E).to_bytes(2, "little") + bytes(40))
    with pytest.raises(native.ConfigError, match="is a x86-64 library, not aarch64"):
        native.find_runtime(tmp_path, "aarch64")
    with pytest.raises(native.ConfigError, match="unknown ABI"):
        native.find_runtime(tmp_path, "mips")
    with pytest.raises(native.ConfigError, match="exists for aarch64 only"):
        native.emulator_argv("armhf", None, "a55")
    assert native.emulator_argv("host", None) == []
