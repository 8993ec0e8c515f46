#!/usr/bin/env bash
# Makes sure the tools for native/ are installed: the aarch64 and armhf cross
# compilers, qemu-user (qemu-aarch64, qemu-arm), cmake and ninja; OpenSSH's client and
# server, which the device suite uses (its tests start a loopback sshd); stb's
# header-only image decoder (the app core and camera_demo decode PNG/JPEG with it);
# libsodium, which checks the Ed25519 signatures of asset sets in the app core (host
# builds; docs/security.md); a JDK with JUnit 4, which the Android JNI bridge's host
# test uses; and clang with libFuzzer (compiler-rt), which builds native/fuzz/
# (tests/native/test_sanitizers.py); Clipper (libpolyclipping-dev, 6.4.2 = pyclipper's), for the
# host and, as Debian multiarch packages, for arm64 and armhf (the DB unclip in the core); the host C
# compiler for the instruction-counting QEMU plugin (native/plugin/).
#   all present                     -> exit 0, silently
#   missing, root with apt-get      -> install them quietly (Debian/Ubuntu packages)
#   missing otherwise               -> print the apt-get line to run, exit 1
# As root, `apt-get update` is tried 3 times (5 s, then 15 s apart), and when it keeps failing (a Debian mirror
# mid-sync fails one index) the install goes on with the indexes apt has: only a failed install fails, naming the
# packages apt could not install.
# EDGEKIT_DEPS_ROOT (tests only): the folder the file checks below look under instead of /.
set -euo pipefail

ROOTFS="${EDGEKIT_DEPS_ROOT:-}"

# command -> the Debian package that provides it
declare -A PACKAGE=(
    [aarch64-linux-gnu-g++]=g++-aarch64-linux-gnu
    [arm-linux-gnueabihf-g++]=g++-arm-linux-gnueabihf
    [qemu-aarch64]=qemu-user
    [cc]=gcc
    [qemu-arm]=qemu-user
    [cmake]=cmake
    [ninja]=ninja-build
    [ssh]=openssh-client
    [scp]=openssh-client
    [/usr/sbin/sshd]=openssh-server
    [/usr/include/stb/stb_image.h]=libstb-dev
    [/usr/include/sodium.h]=libsodium-dev
    [javac]=openjdk-17-jdk-headless
    [/usr/share/java/junit4.jar]=junit4
    [clang++]=clang
    [libFuzzer]=libclang-rt-14-dev
    [/usr/include/polyclipping/clipper.hpp]=libpolyclipping-dev
    [/usr/lib/aarch64-linux-gnu/libpolyclipping.so]=libpolyclipping-dev:arm64
    [/usr/lib/arm-linux-gnueabihf/libpolyclipping.so]=libpolyclipping-dev:armhf
    [/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf]=fonts-dejavu-core    # the long-line OCR test's faces
)

missing_commands() {
    local cmd
    for cmd in aarch64-linux-gnu-g++ arm-linux-gnueabihf-g++ qemu-aarch64 qemu-arm cc cmake ninja ssh scp javac clang++; do
        command -v "$cmd" >/dev/null 2>&1 || printf '%s\n' "$cmd"
    done
    local file
    for file in /usr/sbin/sshd /usr/include/stb/stb_image.h /usr/include/sodium.h /usr/share/java/junit4.jar \
                /usr/include/polyclipping/clipper.hpp /usr/lib/aarch64-linux-gnu/libpolyclipping.so \
                /usr/lib/arm-linux-gnueabihf/libpolyclipping.so /usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf; do   # files
        [[ -e "$ROOTFS$file" ]] || printf '%s\n' "$file"
    done
    # libFuzzer's runtime sits in a clang-version folder: any version will do
    compgen -G "$ROOTFS/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a" >/dev/null || printf '%s\n' libFuzzer
}

missing="$(missing_commands)"
[[ -z "$missing" ]] && exit 0

packages="$(for cmd in $missing; do printf '%s\n' "${PACKAGE[$cmd]}"; done | sort -u | tr '\n' ' ')"
packages="${packages% }"
say() { printf 'edgekit native: %s\n' "$*" >&2; }

# The requested packages (of $packages) that apt's error lines in LOG name, else all of them.
named_by_apt() {
    local p name arch re named="" lines
    lines="$(grep -E '^(E|W): |^ [^ ]+ : ' "$1" || true)"   # apt's errors and its "pkg : Depends: ..." lines
    for p in $packages; do
        name="${p%%:*}"
        arch=""
        [[ "$p" == *:* ]] && arch="${p#*:}"
        name="$(printf '%s' "$name" | sed 's/[.+]/\\&/g')"
        if [[ -n "$arch" ]]; then   # pkg:arch, or its .deb (pkg_version_arch.deb)
            re="(^|[^[:alnum:].+-])$name(:$arch([^[:alnum:]]|\$)|_[^[:space:]]*_$arch\.deb)"
        else                        # the bare name, not another package's prefix nor pkg:otherarch
            re="(^|[^[:alnum:].+-])$name([^[:alnum:].+:-]|:[^[:alnum:]]|\$)"
        fi
        if grep -qE "$re" <<<"$lines"; then named+="$p "; fi
    done
    named="${named% }"
    printf '%s' "${named:-$packages}"
}

if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing $packages (missing: $(echo $missing))"
    export DEBIAN_FRONTEND=noninteractive
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    # Clipper for the cross builds comes from Debian's multiarch packages (12 small packages, no host upgrades)
    case "$packages" in *:arm64*|*:armhf*) dpkg --add-architecture arm64; dpkg --add-architecture armhf ;; esac
    # A mirror can be mid-sync: one index (say bookworm-security armhf) fails with "File has unexpected size" while
    # everything these packages need is there. So the update is retried, and its failure alone is not fatal: the
    # install decides whether the indexes apt has suffice.
    attempts=3 delay=5 update_failed=""
    for ((attempt = 1; attempt <= attempts; attempt++)); do
        if apt-get -o Acquire::Retries=3 update -qq >"$log" 2>&1; then
            update_failed=""
            break
        fi
        update_failed="$({ grep -E '^(E|W): ' "$log" | grep -v 'Some index files failed to download' || true; } \
                         | head -n 3 | tr '\n' ' ')" || true
        update_failed="${update_failed:-$(tail -n 1 "$log")}"
        if ((attempt < attempts)); then
            say "apt-get update failed (attempt $attempt of $attempts: ${update_failed% }); retrying in ${delay}s"
            sleep "$delay"
            delay=$((delay * 3))
        fi
    done
    if [[ -n "$update_failed" ]]; then
        say "apt-get update failed $attempts times (${update_failed% }); installing from the package indexes apt has"
    fi
    if ! apt-get -o Acquire::Retries=3 install -y -qq --no-install-recommends $packages >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        say "apt-get install failed for $(named_by_apt "$log")${update_failed:+ (apt-get update had failed too: ${update_failed% })}"
        say "run it yourself once the mirror answers: apt-get update && apt-get install -y $packages"
        exit 1
    fi
    missing="$(missing_commands)"
    if [[ -n "$missing" ]]; then
        say "still missing after the install: $(echo $missing)"
        exit 1
    fi
    exit 0
fi

say "missing: $(echo $missing)"
say "install them with: sudo apt-get update && sudo apt-get install -y $packages"
exit 1
