"""Where edgekit finds .venv-paddle3 / .venv-torch when no variable names them (`.venv/bin/edgekit` called directly)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from edgekit.core import sibling_envs
from edgekit.core.sibling_envs import PADDLE3, TORCH, locate

VAR = "EDGEKIT_PADDLE3_PYTHON"


def _python(env: Path, executable: bool = True) -> Path:
    python = env / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    if executable:
        python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return python


def test_beside_the_running_environment(tmp_path):
    """`<repo>/.venv/bin/edgekit`: sys.prefix is <repo>/.venv, Paddle 3 is <repo>/.venv-paddle3."""
    python = _python(tmp_path / "repo" / PADDLE3)
    found = locate(VAR, PADDLE3, environ={}, prefix=str(tmp_path / "repo" / ".venv"), checkout=None)
    assert found.python == str(python) and found.how == str(tmp_path / "repo" / PADDLE3)


def test_edgekit_venv_elsewhere_finds_the_checkouts(tmp_path):
    """EDGEKIT_VENV=/elsewhere/env: ./run still makes .venv-paddle3 and .venv-torch in the checkout."""
    paddle3 = _python(tmp_path / "repo" / PADDLE3)
    torch = _python(tmp_path / "repo" / TORCH)
    for folder, python in ((PADDLE3, paddle3), (TORCH, torch)):
        found = locate(VAR, folder, environ={}, prefix=str(tmp_path / "elsewhere" / "env"), checkout=tmp_path / "repo")
        assert found.python == str(python)
        assert found.searched == (str(tmp_path / "elsewhere" / folder), str(tmp_path / "repo" / folder))


def test_nearest_first(tmp_path):
    beside = _python(tmp_path / "elsewhere" / PADDLE3)
    _python(tmp_path / "repo" / PADDLE3)
    found = locate(VAR, PADDLE3, environ={}, prefix=str(tmp_path / "elsewhere" / "env"), checkout=tmp_path / "repo")
    assert found.python == str(beside)


def test_the_variable_wins(tmp_path):
    _python(tmp_path / "repo" / PADDLE3)
    found = locate(VAR, PADDLE3, environ={VAR: "/opt/p3/bin/python"}, prefix=str(tmp_path / "repo" / ".venv"),
                   checkout=tmp_path / "repo")
    assert (found.python, found.how, found.searched) == ("/opt/p3/bin/python", VAR, ())


def test_runs_note_when_it_could_not_make_the_environment(tmp_path):
    """./run leaves `.edgekit-unavailable` ("<sha>\\t<why>") in place of an environment it could not make."""
    note = tmp_path / "repo" / PADDLE3 / sibling_envs.UNAVAILABLE_NOTE
    note.parent.mkdir(parents=True)
    note.write_text("0123abcd\tpip could not install paddlepaddle==3.3.1 (see .venv-paddle3/.edgekit-install.log)\n")
    found = locate(VAR, PADDLE3, environ={}, prefix=str(tmp_path / "repo" / ".venv"), checkout=tmp_path / "repo")
    assert found.python is None
    assert found.unavailable == "pip could not install paddlepaddle==3.3.1 (see .venv-paddle3/.edgekit-install.log)"
    assert found.searched == (str(tmp_path / "repo" / PADDLE3),)      # one place: beside .venv is the checkout


def test_a_python_that_cannot_run_is_passed_over(tmp_path):
    """(Without any execute bit, root cannot run it either.)"""
    _python(tmp_path / "repo" / PADDLE3, executable=False)
    assert locate(VAR, PADDLE3, environ={}, prefix=str(tmp_path / "repo" / ".venv"), checkout=None).python is None


def test_nothing_found_says_where_it_looked(tmp_path):
    found = locate(VAR, PADDLE3, environ={}, prefix=str(tmp_path / "elsewhere" / "env"), checkout=tmp_path / "repo")
    assert (found.python, found.unavailable) == (None, None)
    assert sibling_envs.describe_search(found, VAR) == (
        f"{VAR} is unset and there is no .venv-paddle3 in {tmp_path / 'elsewhere'} or {tmp_path / 'repo'}")


def test_checkout_is_this_repository():
    assert sibling_envs.checkout_root() == Path(__file__).resolve().parents[2]


def test_find_refuses_when_paddle3_is_switched_off(monkeypatch):
    from edgekit.export import paddle3

    monkeypatch.delenv(VAR, raising=False)
    monkeypatch.setenv("EDGEKIT_NO_PADDLE3", "1")
    with pytest.raises(paddle3.Paddle3Unavailable) as caught:
        paddle3.find()
    assert "EDGEKIT_NO_PADDLE3 is set" in caught.value.message


def test_find_without_an_interpreter_names_runs_reason(monkeypatch):
    from edgekit.export import paddle3

    for name in (VAR, "EDGEKIT_NO_PADDLE3", "EDGEKIT_PADDLE3_UNAVAILABLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sibling_envs, "locate", lambda variable, folder: sibling_envs.Located(
        None, "", "pip could not install paddlepaddle==3.3.1", ("/r/.venv-paddle3",)))
    with pytest.raises(paddle3.Paddle3Unavailable) as caught:
        paddle3.find()
    assert caught.value.message.endswith("(./run: pip could not install paddlepaddle==3.3.1)")
