#!/usr/bin/env bash
# Cross-builds native/'s app core for iOS arm64 (devices) and wraps it as
# ios_demo/build/EdgekitCore.xcframework (libedgekit_core.a + edgekit_c.h), which project.yml links.
#
#   ios_demo/scripts/build_core.sh [PADDLE_LITE_IOS_DIR]
#
# PADDLE_LITE_IOS_DIR (argument, environment, or Config/Local.xcconfig): Paddle-Lite v2.13-rc's
# inference_lite_lib.ios64.armv8 folder (include/, lib/libpaddle_api_light_bundled.a). Nothing is
# downloaded. Needs macOS with Xcode (xcodebuild, libtool) and CMake >= 3.18.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { printf 'build_core.sh: error: %s\n' "$*" >&2; exit 1; }

lite="${1:-${PADDLE_LITE_IOS_DIR:-}}"
if [[ -z "$lite" && -f "$HERE/Config/Local.xcconfig" ]]; then
    lite="$(sed -n 's/^[[:space:]]*PADDLE_LITE_IOS_DIR[[:space:]]*=[[:space:]]*//p' "$HERE/Config/Local.xcconfig" | tail -1)"
fi
[[ -n "$lite" ]] || die "Paddle-Lite's iOS library is not set: pass its inference_lite_lib.ios64.armv8 folder, or set" \
    "PADDLE_LITE_IOS_DIR in ios_demo/Config/Local.xcconfig (see ios_demo/README.md); it is never downloaded"
[[ -f "$lite/include/paddle_api.h" && -f "$lite/lib/libpaddle_api_light_bundled.a" ]] \
    || die "$lite has no include/paddle_api.h and lib/libpaddle_api_light_bundled.a (Paddle-Lite v2.13-rc, iOS armv8)"
[[ "$(uname -s)" == Darwin ]] || die "the iOS toolchain needs macOS with Xcode"
for tool in cmake xcodebuild libtool; do
    command -v "$tool" >/dev/null || die "$tool is not on PATH"
done

build="$HERE/build/core-ios"
cmake -S "$HERE/core" -B "$build" -G Xcode \
    -DCMAKE_SYSTEM_NAME=iOS -DCMAKE_OSX_ARCHITECTURES=arm64 -DCMAKE_OSX_DEPLOYMENT_TARGET=15.0 \
    -DCMAKE_XCODE_ATTRIBUTE_ONLY_ACTIVE_ARCH=NO -DPADDLE_LITE_IOS_DIR="$lite"
cmake --build "$build" --config Release --target edgekit_ios_core

rm -rf "$HERE/build/EdgekitCore.xcframework"
xcodebuild -create-xcframework -library "$build/out/libedgekit_core.a" -headers "$build/out/include" \
    -output "$HERE/build/EdgekitCore.xcframework"
echo "build_core.sh: $HERE/build/EdgekitCore.xcframework (Paddle-Lite from $lite)"
