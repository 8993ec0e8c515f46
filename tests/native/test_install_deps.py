"""native/install-deps.sh against a Debian mirror that hiccups: fake `apt-get`, `dpkg`, `id` and `sleep` on PATH.

Seen on a fresh machine: `apt-get update` exited 100 because one index (bookworm-security armhf) was mid-sync
("File has unexpected size"), while installing the same packages without the update went through. The script
retries the update, goes on to the install when the update keeps failing, and fails only when the install fails,
naming the packages apt named.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "native" / "install-deps.sh"
TOOLS = ("bash", "sort", "tr", "mktemp", "tail", "head", "grep", "sed", "rm", "cat", "touch", "mkdir", "chmod",
         "dirname")
FUZZER = "usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a"

UPDATE_FAILURE = """\
W: Some index files failed to download. They have been ignored, or old ones used instead.
E: Failed to fetch http://deb.debian.org/debian-security/dists/bookworm-security/main/binary-armhf/Packages.xz  \
File has unexpected size (118560 != 118572). Mirror sync in progress? [IP: 151.101.2.132 80]
   Hashes of expected file:
    - Filesize:118572 [weak]
E: Some index files failed to download. They have been ignored, or old ones used instead.
"""

FAKE_APT = r"""#!/usr/bin/env bash
# apt-get as the test's scenario says: FAKE_UPDATE_FAILS failing updates first, FAKE_INSTALL_ERRORS (lines) fail the
# install; a good install creates every command (FAKE_PROVIDES) on PATH and every file (FAKE_FILES) under the root.
printf '%s\n' "$*" >>"$FAKE_STATE/apt-get.calls"
for arg in "$@"; do
    case "$arg" in
        update)
            printf 'x\n' >>"$FAKE_STATE/updates"
            if (( $(wc -l <"$FAKE_STATE/updates") <= FAKE_UPDATE_FAILS )); then
                cat "$FAKE_STATE/update-failure"
                exit 100
            fi
            exit 0 ;;
        install)
            if [[ -n "${FAKE_INSTALL_ERRORS:-}" ]]; then
                printf 'Reading package lists...\n%s\n' "$FAKE_INSTALL_ERRORS"
                exit 100
            fi
            for cmd in $FAKE_PROVIDES; do
                printf '#!/bin/sh\n' >"$FAKE_BIN/$cmd"
                chmod +x "$FAKE_BIN/$cmd"
            done
            for file in $FAKE_FILES; do
                mkdir -p "$(dirname "$EDGEKIT_DEPS_ROOT/$file")"
                touch "$EDGEKIT_DEPS_ROOT/$file"
            done
            exit 0 ;;
    esac
done
exit 2
"""


def _table() -> dict[str, str]:
    """The script's own table: command or file -> Debian package."""
    return dict(re.findall(r"^\s*\[([^\]]+)\]=(\S+)", SCRIPT.read_text(encoding="utf-8"), flags=re.M))


def _executable(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def machine(tmp_path):
    """A machine with none of the tools, as root, and a fake apt-get; run(**scenario) -> (exit code, stderr, calls)."""
    fake_bin, state, root = tmp_path / "bin", tmp_path / "state", tmp_path / "root"
    for folder in (fake_bin, state, root):
        folder.mkdir()
    for tool in TOOLS + ("wc",):
        (fake_bin / tool).symlink_to(shutil.which(tool))
    _executable(fake_bin / "apt-get", FAKE_APT)
    _executable(fake_bin / "dpkg", '#!/usr/bin/env bash\nprintf \'%s\\n\' "$*" >>"$FAKE_STATE/dpkg.calls"\n')
    _executable(fake_bin / "sleep", '#!/usr/bin/env bash\nprintf \'%s\\n\' "$1" >>"$FAKE_STATE/sleeps"\n')
    _executable(fake_bin / "id", '#!/usr/bin/env bash\necho 0\n')
    (state / "update-failure").write_text(UPDATE_FAILURE, encoding="utf-8")
    table = _table()
    provides = " ".join(k for k in table if not k.startswith("/") and k != "libFuzzer")
    files = " ".join([k.lstrip("/") for k in table if k.startswith("/")] + [FUZZER])

    def run(update_fails: int = 0, install_errors: str = ""):
        env = {"PATH": str(fake_bin), "FAKE_STATE": str(state), "FAKE_BIN": str(fake_bin), "FAKE_PROVIDES": provides,
               "FAKE_FILES": files, "EDGEKIT_DEPS_ROOT": str(root), "FAKE_UPDATE_FAILS": str(update_fails),
               "FAKE_INSTALL_ERRORS": install_errors, "TMPDIR": str(tmp_path)}
        done = subprocess.run([str(fake_bin / "bash"), str(SCRIPT)], env=env, capture_output=True, text=True,
                              timeout=60)

        def lines(name):
            path = state / name
            return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

        return done.returncode, done.stderr, {"apt-get": lines("apt-get.calls"), "sleep": lines("sleeps"),
                                              "dpkg": lines("dpkg.calls")}

    run.packages = sorted(set(table.values()))
    return run


def _installs(calls: dict) -> list[list[str]]:
    return [line.split() for line in calls["apt-get"] if " install " in f" {line} "]


def _updates(calls: dict) -> int:
    return sum(" update " in f" {line} " for line in calls["apt-get"])


def test_update_that_fails_once_is_retried(machine):
    code, stderr, calls = machine(update_fails=1)
    assert code == 0, stderr
    assert _updates(calls) == 2 and calls["sleep"] == ["5"], calls
    assert "retrying in 5s" in stderr and "File has unexpected size" in stderr, stderr
    (install,) = _installs(calls)
    assert sorted(p for p in install if not p.startswith("-") and "::" not in p and p != "install") == machine.packages
    assert calls["dpkg"] == ["--add-architecture arm64", "--add-architecture armhf"]


def test_update_failing_on_an_unneeded_index_does_not_stop_the_install(machine):
    code, stderr, calls = machine(update_fails=99)
    assert code == 0, stderr
    assert _updates(calls) == 3 and calls["sleep"] == ["5", "15"], calls
    assert len(_installs(calls)) == 1, calls
    last = stderr.strip().splitlines()[-1]
    assert "apt-get update failed 3 times" in last and "binary-armhf/Packages.xz" in last, stderr
    assert "installing from the package indexes apt has" in last, stderr


def test_failed_install_fails_naming_the_packages(machine):
    errors = ("E: Unable to locate package libpolyclipping-dev:armhf\n"
              "E: Package 'qemu-user' has no installation candidate")
    code, stderr, calls = machine(update_fails=99, install_errors=errors)
    assert code == 1, stderr
    assert len(_installs(calls)) == 1, calls
    failed = [line for line in stderr.splitlines() if "apt-get install failed for" in line]
    assert len(failed) == 1, stderr
    named = failed[0].split("apt-get install failed for ", 1)[1].split(" (", 1)[0]
    assert named == "libpolyclipping-dev:armhf qemu-user", failed      # not libpolyclipping-dev, :arm64, qemu-*
    assert "apt-get update had failed too" in failed[0], failed
    assert "E: Unable to locate package libpolyclipping-dev:armhf" in stderr     # apt's own lines are shown


def test_failed_install_no_package_named_by_apt_names_them_all(machine):
    code, stderr, calls = machine(install_errors="E: Sub-process /usr/bin/dpkg returned an error code (1)")
    assert code == 1, stderr
    assert f"apt-get install failed for {' '.join(machine.packages)}" in stderr, stderr
    assert "apt-get update had failed" not in stderr
