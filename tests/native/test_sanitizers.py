"""native/ under the sanitizers (issue 22): the C++ unit tests built with ASan/UBSan, and the libFuzzer
harnesses (native/fuzz/) over their seed corpora plus a short fuzzing run each. Any sanitizer report, crash,
leak or timeout fails. Builds are cached by content like the other native builds (the same key as the host
build, plus the flavour), so a rerun with unchanged sources only runs the binaries.

Policy as elsewhere in tests/native/: without cmake or clang the tests skip and say why; with
EDGEKIT_REQUIRE_EMULATION=1 (CI) they fail instead.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from edgekit.lite import cmake, native

FUZZ_SECONDS = int(os.environ.get("EDGEKIT_FUZZ_SECONDS", "10"))   # per harness, after the corpus replay
HARNESSES = ["npy", "npz", "json", "nb_header", "spec", "assets", "image"]
CORPUS = cmake.NATIVE_DIR / "fuzz" / "corpus"
# Reports abort (exit != 0) so nothing passes with a finding in its log; the shim tests preload a library
# in front of the ASan runtime, which is fine for an interposer that calls no allocator.
SANITIZER_ENV = {
    "ASAN_OPTIONS": "abort_on_error=1:detect_leaks=1:verify_asan_link_order=0:allocator_may_return_null=0",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


def _need(what: str, ok: bool, hint: str) -> None:
    if ok:
        return
    reason = f"{what} ({hint})"
    if os.environ.get("EDGEKIT_REQUIRE_EMULATION", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"EDGEKIT_REQUIRE_EMULATION=1 but {reason}")
    pytest.skip(reason)


def _build(cache: Path, flavour: str, options: list[str], env: dict | None = None) -> Path:
    """native/ configured with `options`, built into <cache>/native-<flavour>/<key>, renamed into place when done."""
    _need("cmake is not installed", shutil.which("cmake") is not None, "run native/install-deps.sh")
    key = hashlib.sha256((native.build_key(native.Abi.host, None)[0] + "\0" + " ".join(options)).encode()).hexdigest()
    final = cache / f"native-{flavour}" / key[:16]
    if (final / "edgekit-build.done").is_file():
        return final
    scratch = final.with_name(final.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    steps = [["cmake", "-S", str(cmake.NATIVE_DIR), "-B", str(scratch), "-G", cmake.cmake_generator(), *options],
             ["cmake", "--build", str(scratch), "--parallel", str(min(2, os.cpu_count() or 2))]]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1200, env=dict(os.environ, **(env or {})))
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    (scratch / "edgekit-build.done").write_text(key + "\n")
    for old in final.parent.iterdir():        # other keys are never reused
        if old != scratch:
            shutil.rmtree(old, ignore_errors=True)
    scratch.rename(final)
    return final


@pytest.fixture(scope="module")
def sanitized_build(native_cache) -> Path:
    # -O1 keeps the reports readable and the build quick; the pixel loops keep their own -O2
    return _build(native_cache, "asan", ["-DEDGEKIT_SANITIZE=ON", "-DCMAKE_BUILD_TYPE=Debug",
                                         "-DCMAKE_CXX_FLAGS=-O1"])


@pytest.fixture(scope="module")
def fuzz_build(native_cache) -> Path:
    clang = shutil.which("clang++")
    _need("clang++ is not installed (libFuzzer)", clang is not None, "run native/install-deps.sh")
    return _build(native_cache, "fuzz", ["-DEDGEKIT_FUZZ=ON", f"-DCMAKE_CXX_COMPILER={clang}",
                                         "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])


def test_unit_tests_under_asan_and_ubsan(sanitized_build):
    """Every ctest suite of the core and the app core (the crafted inputs of issue 22 among them) under ASan/UBSan."""
    done = subprocess.run(["ctest", "--test-dir", str(sanitized_build), "--output-on-failure", "--timeout", "300"],
                          capture_output=True, text=True, timeout=900, env=dict(os.environ, **SANITIZER_ENV))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "100% tests passed" in done.stdout
    # the suites ran with the instrumentation in: a sanitizer build links its runtime
    libs = subprocess.run(["ldd", str(sanitized_build / "edgekit-core-tests")], capture_output=True, text=True).stdout
    assert "libasan" in libs and "libubsan" in libs, libs


@pytest.mark.parametrize("harness", HARNESSES)
def test_fuzz_harness(fuzz_build, harness, tmp_path):
    """The harness replays its seed corpus (the crafted files of issue 22 among them), then fuzzes for a while."""
    binary = fuzz_build / f"fuzz_{harness}"
    seeds = CORPUS / harness
    assert len(list(seeds.iterdir())) >= 3, f"{seeds} needs a seed corpus"
    if not binary.is_file():
        pytest.fail(f"{binary} was not built (fuzz_image needs stb_image: native/install-deps.sh)")
    env = dict(os.environ, **SANITIZER_ENV, TMPDIR=str(tmp_path))
    artifacts = tmp_path / "crash-"
    found = tmp_path / "corpus"                # new inputs go here, the repository's seeds stay as they are
    found.mkdir()
    for extra in (["-runs=0"], [f"-max_total_time={FUZZ_SECONDS}"]):
        # -malloc_limit_mb, not -rss_limit_mb: a child's peak RSS (what libFuzzer's RSS limit reads) starts at the
        # parent's, and pytest itself peaks at ~4 GB after the e2e tests; one allocation over 2 GB still fails
        argv = [str(binary), *extra, "-timeout=10", "-rss_limit_mb=0", "-malloc_limit_mb=2048",
                f"-artifact_prefix={artifacts}", str(found), str(seeds)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=FUZZ_SECONDS + 120, env=env)
        crashes = sorted(p.name for p in tmp_path.glob("crash-*"))
        assert done.returncode == 0 and not crashes, (
            f"{' '.join(argv)} exited {done.returncode}, artifacts {crashes}:\n{done.stderr[-4000:]}")
