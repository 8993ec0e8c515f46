"""`./run`'s pip installs against a flaky network: a fake environment (EDGEKIT_VENV) whose `python -m pip install`
fails as the test says, and a fake `sleep` on PATH.

A download that stalls or breaks off fails pip as a whole although a second try goes through, so `./run` tries an
install again when (and only when) pip's output says the network failed.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

RUN = Path(__file__).resolve().parents[2] / "run"
NETWORK_ERROR = ("ERROR: Exception:\n"
                 "pip._vendor.urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='files.pythonhosted.org', "
                 "port=443): Read timed out.\n")
RESOLUTION_ERROR = ("ERROR: Could not find a version that satisfies the requirement paddlelite==2.13rc0 "
                    "(from versions: none)\nERROR: No matching distribution found for paddlelite==2.13rc0\n")

FAKE_PYTHON = r"""#!/usr/bin/env bash
# ./run's probe, then `-m pip install ...`: the first FAKE_PIP_FAILS installs of edgekit fail with FAKE_PIP_ERROR.
if [[ "$1" == -c ]]; then
    echo "3.10 CPython 1 $0"
    exit 0
fi
if [[ "$1 $2 $3" == "-m pip install" ]]; then
    printf '%s timeout=%s\n' "$*" "${PIP_DEFAULT_TIMEOUT:-}" >>"$FAKE_STATE/pip.calls"
    [[ "$*" == *"--upgrade pip"* ]] && exit 0
    printf 'x\n' >>"$FAKE_STATE/installs"
    if (( $(wc -l <"$FAKE_STATE/installs") <= FAKE_PIP_FAILS )); then
        printf 'Collecting paddlepaddle==2.6.2\n%s' "$FAKE_PIP_ERROR"
        exit 2
    fi
    echo "Successfully installed edgekit-0.1.0"
    exit 0
fi
exit 3
"""


def _executable(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def setup_run(tmp_path):
    """run(fails, error, verbose) -> (exit code, stderr, pip calls, sleeps) of `./run hello` in a fresh fake venv."""
    venv, fake_bin, state = tmp_path / "venv", tmp_path / "bin", tmp_path / "state"
    for folder in (venv / "bin", fake_bin, state):
        folder.mkdir(parents=True)
    _executable(venv / "bin" / "python", FAKE_PYTHON)
    _executable(venv / "bin" / "hello", "#!/bin/sh\necho hello from the environment\n")
    _executable(fake_bin / "sleep", '#!/bin/sh\nprintf "%s\\n" "$1" >>"$FAKE_STATE/sleeps"\n')

    def run(fails: int, error: str = NETWORK_ERROR, verbose: bool = False):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("EDGEKIT_", "PIP_")) and k not in ("CI", "VIRTUAL_ENV")}
        env.update(EDGEKIT_VENV=str(venv), EDGEKIT_NO_PADDLE3="1", PATH=f"{fake_bin}:{env['PATH']}",
                   FAKE_STATE=str(state), FAKE_PIP_FAILS=str(fails), FAKE_PIP_ERROR=error)
        if verbose:
            env["EDGEKIT_VERBOSE"] = "1"
        done = subprocess.run([shutil.which("bash"), str(RUN), "hello"], env=env, capture_output=True, text=True,
                              timeout=120)

        def lines(name):
            path = state / name
            return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

        installs = [c for c in lines("pip.calls") if "--upgrade pip" not in c]
        return done, installs, lines("sleeps")

    return run


@pytest.mark.parametrize("verbose", [False, True])
def test_install_cut_off_by_the_network_is_tried_again(setup_run, verbose):
    done, installs, sleeps = setup_run(fails=1, verbose=verbose)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello from the environment\n"
    assert len(installs) == 2 and sleeps == ["10"], (installs, sleeps)
    assert "pip failed on the network (attempt 1 of 3: ReadTimeoutError); retrying in 10s" in done.stderr, done.stderr
    assert all(c.endswith("timeout=60") for c in installs), installs      # pip's 15 s socket timeout raised


def test_network_failing_three_times_fails_the_setup(setup_run):
    done, installs, sleeps = setup_run(fails=99)
    assert done.returncode == 1, done.stderr
    assert len(installs) == 3 and sleeps == ["10", "30"], (installs, sleeps)
    assert "installing edgekit into" in done.stderr and "failed (pip exit 2" in done.stderr


def test_failure_that_is_not_the_network_is_not_retried(setup_run):
    done, installs, sleeps = setup_run(fails=99, error=RESOLUTION_ERROR)
    assert done.returncode == 1, done.stderr
    assert len(installs) == 1 and sleeps == [], (installs, sleeps)
    assert "No matching distribution found for paddlelite==2.13rc0" in done.stderr
