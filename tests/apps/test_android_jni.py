"""The Android app's JNI bridge (android_demo/app/src/main/cpp/edgekit_jni.cc) and its Java API, on the host.

No Android SDK or NDK here, so the bridge is built against the JDK's jni.h by the app's own
CMakeLists.txt in host mode and driven by JUnit 4 tests in a host JVM run with -Xcheck:jni:

- over the real, Lite-free libedgekit_c.so: open verifies and describes a real packaged set;
  a changed byte, a missing file and a header/index version disagreement are refused with the
  reason as the Java exception's message; run/selftest report the runtime unavailable; UTF-8
  (non-BMP too) crosses both ways; the bridge bounds-checks buffers itself;
- over the C API with a replay stand-in for Paddle-Lite (tests/apps/host/replay_runtime.cc):
  every golden image in six pixel layouts gives Python's tensor bit for bit and Python's
  result; a swapped channel order and a wrong row stride are caught; another opt is refused.

Not covered here: Android's own pieces (CameraX, BitmapFactory, ART's JNI, the NDK build,
Gradle packaging) and inference on a real runtime (tests/native runs the ARM runtime under
qemu; on a phone the instrumented test does).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from apps_support import ROOT, unavailable

JNI_CMAKE = ROOT / "android_demo" / "app" / "src" / "main" / "cpp"


def _junit(jvm, classes: Path, library_dir: Path, test_class: str, asset_sets, report: Path):
    props = [f"-Dedgekit.{k}={v}" for k, v in asset_sets.properties().items()]
    cp = os.pathsep.join([str(classes), *map(str, jvm.classpath)])
    argv = [str(jvm.java), "-Xcheck:jni", f"-Djava.library.path={library_dir}", f"-Dedgekit.report={report}", *props,
            "-Dfile.encoding=UTF-8", "-Dsun.jnu.encoding=UTF-8", "-cp", cp, "org.junit.runner.JUnitCore",
            f"com.edgekit.hosttest.{test_class}"]
    env = dict(os.environ, LC_ALL="C.UTF-8")  # non-ASCII paths need a UTF-8 locale in the JVM
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    passed = re.search(r"^OK \((\d+) tests?\)", done.stdout, re.M)
    assert passed, output[-3000:]
    # -Xcheck:jni reports misuse (a JNI call with an exception pending, wrong types) as warnings
    assert "WARNING in native method" not in output and "FATAL ERROR in native method" not in output, output
    return int(passed.group(1)), json.loads(report.read_text(encoding="utf-8"))


def test_bridge_over_the_lite_free_core(jvm, host_jni, java_classes, asset_sets, tmp_path):
    tests, report = _junit(jvm, java_classes, host_jni, "EdgekitCoreHostTest", asset_sets, tmp_path / "core.json")
    assert tests == 13
    files = asset_sets.index["files"]
    assert report["verified_files"] == len(files) == 19
    assert report["verified_bytes"] == sum(f["bytes"] for f in files.values())
    assert report["golden_images"] == report["decoded_images"] == 8
    assert report["refusal_checksum"].startswith("refused (checksum mismatch): digits/model.nb")
    assert report["refusal_missing"].startswith(f"refused (missing file): {asset_sets.missing_file}")
    assert report["refusal_header"].startswith("refused (version mismatch): model digits: model.nb's header says opt v2.12")
    assert "no Paddle-Lite runtime" in report["unavailable"]
    assert report["bridge_bounds_cases"] == 6 and report["statuses"] == 11
    print(f"\nLite-free bridge: {tests} JUnit tests; verified {report['verified_files']:.0f} files / "
          f"{report['verified_bytes']:.0f} bytes in {report['verify_ms']:.2f} ms (open from Java "
          f"{report['open_ms_from_java']:.2f} ms); refusals: {report['refusal_checksum'][:60]}...")


def test_pixels_through_the_bridge_equal_python(jvm, host_jni, java_classes, asset_sets, tmp_path):
    tests, report = _junit(jvm, java_classes, host_jni / "replay", "EdgekitPixelsHostTest", asset_sets,
                           tmp_path / "pixels.json")
    assert tests == 7
    images = len(asset_sets.golden["images"]["files"])
    assert report["pixel_cases_exact"] == images * report["layouts"] == 8 * 6
    assert report["runs"] == images and report["run_total_ms_mean"] > 0
    assert report["selftest_vectors"] == asset_sets.golden["count"] and report["selftest_images"] == images
    assert report["swapped_order_differing"] > 0 and report["wrong_stride_differing"] > 0
    assert "converted by opt v2.12 but the app links Paddle-Lite v2.13-rc" in report["refusal_version"]
    print(f"\nreplay bridge: {tests} JUnit tests; {report['pixel_cases_exact']} image x layout cases with 0 differing "
          f"tensor values; swapped channels -> {report['swapped_order_differing']:.0f} differing of 1024, wrong "
          f"stride -> {report['wrong_stride_differing']:.0f}; ek_run mean {report['run_total_ms_mean']:.3f} ms "
          f"(preprocess {report['run_preprocess_ms_mean']:.3f} ms)")


def _configure_android(tmp_path: Path, *defines: str) -> subprocess.CompletedProcess:
    """The app's CMakeLists.txt with ANDROID forced on the host: its Paddle-Lite property logic, configure only."""
    if not shutil.which("cmake"):
        unavailable("cmake is not on PATH")
    argv = ["cmake", "-S", str(JNI_CMAKE), "-B", str(tmp_path / "build"), "-DANDROID=ON", "-DANDROID_ABI=arm64-v8a",
            "-DANDROID_STL=c++_shared", *defines]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def test_android_build_refuses_to_guess_the_paddle_lite_library(tmp_path):
    unset = _configure_android(tmp_path / "a")
    message = " ".join(unset.stderr.split())  # CMake wraps long messages
    assert unset.returncode != 0
    assert "Paddle-Lite's Android library is not set" in message
    assert "edgekit.paddleLiteAndroidDir=/that/folder" in message and "never downloaded" in message

    wrong = tmp_path / "only-armv7"
    (wrong / "inference_lite_lib.android.armv7" / "cxx").mkdir(parents=True)
    no_abi = _configure_android(tmp_path / "b", f"-DEDGEKIT_PADDLE_LITE_ANDROID_DIR={wrong}")
    assert no_abi.returncode != 0
    assert "arm64-v8a needs exactly one inference_lite_lib.android.armv8*/cxx" in " ".join(no_abi.stderr.split())


def test_android_build_takes_the_abis_library_from_the_property(tmp_path):
    lite = tmp_path / "lite"
    cxx = lite / "inference_lite_lib.android.armv8.clang.c++_shared.with_extra.with_cv" / "cxx"
    (cxx / "include").mkdir(parents=True)
    (cxx / "lib").mkdir()
    (cxx / "include" / "paddle_api.h").write_text("// configure-only stand-in\n")
    (cxx / "lib" / "libpaddle_light_api_shared.so").write_bytes(b"")
    done = _configure_android(tmp_path / "c", f"-DEDGEKIT_PADDLE_LITE_ANDROID_DIR={lite}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"edgekit: Paddle-Lite from {cxx}" in done.stdout
    cache = (tmp_path / "c" / "build" / "CMakeCache.txt").read_text()
    assert "EDGEKIT_WITH_STB:BOOL=OFF" in cache and "EDGEKIT_BUILD_TESTS:BOOL=OFF" in cache
