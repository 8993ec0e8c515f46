"""The interpreters that live beside edgekit's own environment: Paddle 3 (`.venv-paddle3`) and PyTorch (`.venv-torch`).

`./run` makes them once and exports their pythons (EDGEKIT_PADDLE3_PYTHON, EDGEKIT_TORCH_PYTHON) to every command
it starts. `.venv/bin/edgekit` called directly has no such variables, so it looks where `./run` puts them: beside
the environment it runs in (`<repo>/.venv-paddle3` for `<repo>/.venv`), then in the checkout edgekit is installed
from (with EDGEKIT_VENV the main environment lives elsewhere, but `./run` still makes its siblings in the checkout).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

PADDLE3 = ".venv-paddle3"
TORCH = ".venv-torch"
UNAVAILABLE_NOTE = ".edgekit-unavailable"   # ./run's note when it could not make the environment: "<sha>\t<why>"


@dataclass(frozen=True)
class Located:
    """Where an interpreter was found (`python`, and `how`), or else what `./run` said about it (`unavailable`) and
    where it was looked for (`searched`)."""

    python: str | None
    how: str
    unavailable: str | None
    searched: tuple[str, ...]


def checkout_root() -> Path | None:
    """The repository edgekit runs from (editable install: the folder holding `run` and `pyproject.toml`), else None."""
    root = Path(__file__).resolve().parents[2]        # edgekit/core/sibling_envs.py
    return root if (root / "run").is_file() and (root / "pyproject.toml").is_file() else None


def candidates(folder: str, prefix: Path, checkout: Path | None) -> list[Path]:
    """The places `folder` may be, nearest first and without repeats: beside the environment `prefix` (sys.prefix),
    then in the checkout."""
    places = [prefix.parent / folder]
    if checkout is not None:
        places.append(checkout / folder)
    unique: list[Path] = []
    for place in places:
        if all(os.path.abspath(place) != os.path.abspath(seen) for seen in unique):
            unique.append(place)
    return unique


def locate(variable: str, folder: str, *, environ: Mapping[str, str] | None = None, prefix: str | None = None,
           checkout: Path | None | str = "auto") -> Located:
    """The interpreter named by `variable`, else the first `folder` (e.g. `.venv-paddle3`) of `candidates` holding an
    executable `bin/python`. Nothing is run here: callers check that the interpreter has what they need."""
    environ = os.environ if environ is None else environ
    given = environ.get(variable, "")
    if given:
        return Located(given, variable, None, ())
    root = checkout_root() if checkout == "auto" else checkout
    places = candidates(folder, Path(sys.prefix if prefix is None else prefix), root)
    unavailable = None
    for place in places:
        python = place / "bin" / "python"
        if python.is_file() and os.access(python, os.X_OK):
            return Located(str(python), str(place), None, tuple(map(str, places)))
        if unavailable is None:
            unavailable = _note(place / UNAVAILABLE_NOTE)
    return Located(None, "", unavailable, tuple(map(str, places)))


def _note(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text.split("\t", 1)[-1].strip() or None


def describe_search(located: Located, variable: str) -> str:
    """`variable is unset and there is no .venv-x in A or B`, for errors that say where edgekit looked."""
    folders: Sequence[str] = located.searched
    names = sorted({Path(f).name for f in folders})
    parents = [str(Path(f).parent) for f in folders]
    return f"{variable} is unset and there is no {' or '.join(names)} in {' or '.join(parents)}"
