"""ios_demo/core/CMakeLists.txt (what scripts/build_core.sh runs with the iOS toolchain), exercised on the host.

No Xcode here, so this proves the part that is not Apple's: the wrapper stages Paddle-Lite's
iOS layout (include/ + the static libpaddle_api_light_bundled.a) the way native/ accepts it,
native/ then builds its Lite engine and the Lite runtime into the app core (not the Lite-free
stand-in), and the C API compiles as a static library, all against Paddle-Lite v2.13-rc's real
headers (from EDGEKIT_LITE_ARM; the iOS archive ships the same headers). The iOS compiler, the
libtool merge and the xcframework are only exercised on a Mac.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from apps_support import ROOT, unavailable

CORE = ROOT / "ios_demo" / "core"


def _symbols(archive: Path) -> str:
    return subprocess.run(["nm", "-C", str(archive)], capture_output=True, text=True, check=True).stdout


def test_the_ios_core_wrapper_builds_the_engine_and_a_static_c_api(tmp_path):
    lite_arm = os.environ.get("EDGEKIT_LITE_ARM")
    if not lite_arm:
        unavailable("EDGEKIT_LITE_ARM is not set (Paddle-Lite v2.13-rc's headers come from there)", packages=False)
    headers = Path(lite_arm) / "inference_lite_lib.armlinux.armv8" / "cxx" / "include"
    if not (headers / "paddle_api.h").is_file():
        unavailable(f"{headers} has no paddle_api.h", packages=False)
    for tool in ("cmake", "c++", "ar", "nm"):
        if not shutil.which(tool):
            unavailable(f"{tool} is not on PATH")

    # Paddle-Lite's iOS layout: include/ and lib/libpaddle_api_light_bundled.a (an empty archive will do:
    # nothing links it here, which is the point of the staged layout).
    ios_lite = tmp_path / "inference_lite_lib.ios64.armv8"
    (ios_lite / "lib").mkdir(parents=True)
    (ios_lite / "include").symlink_to(headers, target_is_directory=True)
    subprocess.run(["ar", "rc", str(ios_lite / "lib" / "libpaddle_api_light_bundled.a")], check=True)

    missing = subprocess.run(["cmake", "-S", str(CORE), "-B", str(tmp_path / "refused")], capture_output=True, text=True,
                             timeout=300)
    message = " ".join(missing.stderr.split())  # CMake wraps long messages
    assert missing.returncode != 0 and 'PADDLE_LITE_IOS_DIR="" holds no include/paddle_api.h' in message
    assert "It is never downloaded" in message

    key = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    build = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "edgekit" / f"apps-ios-core-{key}"
    generator = ["-G", "Ninja"] if shutil.which("ninja") and not (build / "CMakeCache.txt").is_file() else []
    configure = subprocess.run(["cmake", "-S", str(CORE), "-B", str(build), *generator,
                                f"-DPADDLE_LITE_IOS_DIR={ios_lite}"], capture_output=True, text=True, timeout=600)
    assert configure.returncode == 0, configure.stdout[-3000:] + configure.stderr[-3000:]
    assert f"edgekit: Paddle-Lite from {build / 'lite-layout'}" in configure.stdout
    done = subprocess.run(["cmake", "--build", str(build), "--parallel", "--target", "edgekit_capi_static",
                           "edgekit_lite", "edgekit_app", "edgekit_core"], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    app = _symbols(build / "edgekit-native" / "app" / "libedgekit_app.a")
    assert "lite_runtime.cc.o:" in app and "no_runtime.cc.o:" not in app   # the real engine, not the stand-in
    assert "decode_none.cc.o:" in app                                         # iOS decodes with ImageIO
    capi = _symbols(build / "libedgekit_capi_static.a")
    exported = sorted(set(line.split()[-1] for line in capi.splitlines() if " T ek_" in line))
    header = (ROOT / "native" / "capi" / "include" / "edgekit_c.h").read_text()
    declared = sorted(set(name for name in re.findall(r"EK_API [^;]*?\b(ek_\w+)\(", header)))
    assert exported == declared, (exported, declared)
    assert not (build / "libedgekit_c.so").exists()  # native/'s shared C API is never built for iOS
    print(f"\niOS core wrapper on the host: {len(exported)} ek_* functions in the static C API; "
          f"edgekit_app carries lite_runtime.cc")
