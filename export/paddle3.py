"""Paddle 3, from edgekit's Paddle 2.6 environment: a second interpreter, started per request.

One environment cannot hold two `paddlepaddle` versions, and opt 2.13 and PaddleSlim 2.6 need
Paddle 2.6's legacy programs, so Paddle 3 runs in its own interpreter
(`EDGEKIT_PADDLE3_PYTHON`; `./run` makes `.venv-paddle3` from `export/paddle3.txt` and sets it; without the
variable, `.venv-paddle3` beside edgekit's environment or in its checkout: `edgekit.core.sibling_envs`).
`_paddle3_child.py` is started there as a script (it imports nothing from edgekit) and
answers with `edgekit.core.proc`'s child protocol; its failures become typed one-line errors here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from edgekit.core import proc, sibling_envs
from edgekit.core.errors import ExportError, InputModelError, ToolError

CHILD = Path(__file__).with_name("_paddle3_child.py")
REQUIREMENTS = Path(__file__).with_name("paddle3.txt")
ENV_PYTHON = "EDGEKIT_PADDLE3_PYTHON"
ENV_UNAVAILABLE = "EDGEKIT_PADDLE3_UNAVAILABLE"   # set by ./run when it could not make .venv-paddle3
ENV_OFF = "EDGEKIT_NO_PADDLE3"                      # Paddle 3 models are refused (./run makes no .venv-paddle3)


class Paddle3Unavailable(InputModelError):
    """A Paddle 3 model, and no Paddle 3 interpreter to read it with."""


@dataclass(frozen=True)
class Paddle3:
    python: str
    version: str

    def call(self, action: str, request: Mapping, *, timeout: float, what: str, cwd: str | None = None) -> dict:
        payload = dict(request, action=action, result_mark=proc.RESULT_MARK, error_mark=proc.ERROR_MARK)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.setdefault("GLOG_minloglevel", "2")
        env.pop("FLAGS_enable_pir_api", None)   # PIR is Paddle 3's default, and the only mode edgekit uses there
        answer = proc.run_child_argv([self.python, str(CHILD)], payload, timeout=timeout, env=env, cwd=cwd, what=what)
        if answer.ok:
            return answer.result
        if answer.error is not None:
            raise _error_for(action, what, answer.error)
        raise ToolError(f"Paddle 3 ({what}) {answer.cause()}: {answer.record.tail(3)}",
                        "run it again with EDGEKIT_DEBUG=1; if Paddle 3 itself crashes, report the model")


def _error_for(action: str, what: str, error: dict) -> Exception:
    text = f"{error.get('type', 'Error')}: {error.get('message', '')}"
    if action == "export":
        return ExportError(f"Paddle 3 could not export {what}: {text}",
                           "make forward() traceable with paddle.jit.to_static(full_graph=True) under Paddle 3")
    return InputModelError(f"Paddle 3 could not {'read' if action == 'describe' else 'run'} {what}: {text}",
                           "check that the .json and .pdiparams were saved together by paddle.jit.save")


def find(timeout: float = 120.0) -> Paddle3:
    """The Paddle 3 interpreter, checked to run and to be Paddle 3; otherwise a one-line error saying what to install."""
    pins = " ".join(line for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines()
                    if line.strip() and not line.startswith("#"))
    install = (f"use ./run (it makes .venv-paddle3), or make a Python 3.10 venv with `pip install {pins}` "
               f"and set {ENV_PYTHON} to its python")
    if not os.environ.get(ENV_PYTHON) and os.environ.get(ENV_OFF):
        raise Paddle3Unavailable(f"Paddle 3 is needed (a PIR program or Paddle 3 model code), and {ENV_OFF} is set",
                                 f"unset {ENV_OFF}, or set {ENV_PYTHON} to a Python with paddlepaddle 3.x")
    located = sibling_envs.locate(ENV_PYTHON, sibling_envs.PADDLE3)
    python = located.python
    if not python:
        why = os.environ.get(ENV_UNAVAILABLE) or located.unavailable
        raise Paddle3Unavailable("Paddle 3 is needed (a PIR program or Paddle 3 model code), and no Paddle 3 interpreter "
                                 "is set up"
                                 + (f" (./run: {why})" if why else f" ({sibling_envs.describe_search(located, ENV_PYTHON)})"),
                                 install)
    named = ENV_PYTHON if located.how == ENV_PYTHON else "the Paddle 3 interpreter"
    record = proc.run([python, "-c", "import paddle, sys; sys.stdout.write(paddle.__version__)"], timeout=timeout,
                      what="Paddle 3's interpreter")
    if record.returncode != 0:
        raise Paddle3Unavailable(f"{named}={python} cannot import paddle ({record.tail(1)})", install)
    version = record.stdout.strip()
    if not version.startswith("3."):
        raise Paddle3Unavailable(f"{named}={python} has paddlepaddle {version}, not 3.x", install)
    return Paddle3(python, version)


def save_inputs(path: Path, inputs: Mapping[str, np.ndarray]) -> Path:
    np.savez(path, **{k: np.ascontiguousarray(v) for k, v in inputs.items()})
    return path


def load_outputs(path: Path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[f"output_{i}"] for i in range(len(data.files))]
