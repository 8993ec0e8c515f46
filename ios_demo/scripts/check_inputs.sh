#!/usr/bin/env bash
# Xcode pre-build phase: stop with the fix when Paddle-Lite's iOS library or the core is missing.
set -euo pipefail
fail() { echo "error: $*"; exit 1; }
[[ -n "${PADDLE_LITE_IOS_DIR:-}" ]] || fail "PADDLE_LITE_IOS_DIR is not set: put Paddle-Lite v2.13-rc's inference_lite_lib.ios64.armv8 path in ios_demo/Config/Local.xcconfig (see README.md); it is never downloaded"
[[ -f "$PADDLE_LITE_IOS_DIR/lib/libpaddle_api_light_bundled.a" ]] || fail "$PADDLE_LITE_IOS_DIR has no lib/libpaddle_api_light_bundled.a"
[[ -d "$EDGEKIT_CORE_XCFRAMEWORK" ]] || fail "no $EDGEKIT_CORE_XCFRAMEWORK: run ios_demo/scripts/build_core.sh first"
[[ -f "$PROJECT_DIR/EdgekitDemo/Resources/edgekit/assets.json" ]] || fail "no asset set: run ./run edgekit package --platform ios BUNDLE... first"
