"""What the stages hand each other: small frozen records of files and facts."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from edgekit.contracts.settings import InputSpec


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class StaticModel:
    """A legacy ProgramDesc inference model: `model_file` + combined `params_file`."""

    model_file: Path
    params_file: Path | None
    feeds: tuple[InputSpec, ...]
    fetches: tuple[str, ...]
    origin: str                           # "dygraph" or "inference"
    op_types: tuple[str, ...] = ()
    # output var -> {"op": its op type, "source": the user source line that made it}
    sources: Mapping[str, Mapping[str, str]] = field(default_factory=dict, compare=False)
    check: dict = field(default_factory=dict, compare=False)     # export / reference-engine check figures

    @property
    def feed_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.feeds)

    def files(self) -> list[Path]:
        return [p for p in (self.model_file, self.params_file) if p is not None]


@dataclass(frozen=True)
class QuantizedModel:
    """PaddleSlim's quantised inference model (fake-quant ops: the INT8 simulation on the host)."""

    model: StaticModel
    algo: str
    calibration_samples: int
    seconds: float
    calibration_sha256: str = ""         # digest of the exact calibration tensors used
    float_activations: tuple[str, ...] = ()   # activations of rank < 2 left uncalibrated (float), see quantize/ptq.py


@dataclass(frozen=True)
class LiteModel:
    nb_file: Path
    target: str
    precision: str
    opt_version: str
    argv: tuple[str, ...]                # the equivalent paddle_lite_opt command line
    seconds: float
    rewrites: tuple[dict, ...] = ()      # program rewrites applied before opt, with their checks
    process_argv: tuple[str, ...] = ()   # what actually ran: the child process around paddlelite.lite.Opt
    inputs_sha256: Mapping[str, str] = field(default_factory=dict, compare=False)   # the program and params opt read
