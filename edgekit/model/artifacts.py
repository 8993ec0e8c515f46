"""What the stages hand each other: small frozen records of files and facts."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from edgekit.contracts.settings import InputSpec
from edgekit.core import memory as memory_rule


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

    @property
    def fixed_batch(self) -> int | None:
        """The batch size the feeds fix (e.g. 1 in an ONNX export that bakes it), else None: every run of the program
        (calibration, reference, tiers) then feeds exactly that many samples."""
        fixed = sorted({f.shape[0] for f in self.feeds if f.shape and f.shape[0] > 0})
        return fixed[0] if fixed else None

    def files(self) -> list[Path]:
        return [p for p in (self.model_file, self.params_file) if p is not None]


@dataclass(frozen=True)
class CalibrationBatches:
    """How the calibration samples go through PaddleSlim: `batch_nums` batches of `batch_size`."""

    batch_size: int
    batch_nums: int
    asked: int                             # the batch the settings (or a fixed-batch program) asked for
    sample_bytes: int = 0                  # estimated memory one sample holds during calibration; 0 = not estimated
    memory_bytes: int | None = None        # the host memory the batch was sized against (MemTotal)

    @property
    def samples(self) -> int:
        return self.batch_size * self.batch_nums

    @property
    def lowered(self) -> bool:
        return self.batch_size < self.asked

    def reason(self) -> str:
        """Why the batch is smaller than asked, as one sentence; "" when it is not."""
        if not self.lowered:
            return ""
        return (f"calibrating in batches of {self.batch_size}, not {self.asked}, for memory: one sample holds "
                f"~{memory_rule.describe_bytes(self.sample_bytes)} during calibration and "
                f"the host has {memory_rule.describe_bytes(self.memory_bytes or 0)} (at most "
                f"{memory_rule.MEMORY_FRACTION:.0%} of it is used); {self.batch_nums} batches keep the {self.samples} samples")

    def task_memory_mb(self) -> int:
        """What one calibration claims from a pool sizing its workers: its batch's estimate over the memory fraction."""
        return int(self.batch_size * self.sample_bytes / memory_rule.MEMORY_FRACTION) >> 20

    def to_json(self) -> dict:
        return {"batch_size": self.batch_size, "batch_nums": self.batch_nums, "asked": self.asked,
                "lowered_for_memory": self.lowered, "sample_bytes": self.sample_bytes,
                "memory_bytes": self.memory_bytes}

    @classmethod
    def from_json(cls, raw: dict) -> "CalibrationBatches":
        return cls(int(raw["batch_size"]), int(raw["batch_nums"]), int(raw["asked"]), int(raw.get("sample_bytes", 0)),
                   raw.get("memory_bytes", raw.get("available_bytes")))     # older files: MemAvailable


@dataclass(frozen=True)
class QuantizedModel:
    """PaddleSlim's quantised inference model (fake-quant ops: the INT8 simulation on the host)."""

    model: StaticModel
    algo: str
    calibration_samples: int
    seconds: float
    calibration_sha256: str = ""         # digest of the exact calibration tensors used
    float_activations: tuple[str, ...] = ()   # activations of rank < 2 left uncalibrated (float), see quantize/ptq.py
    calibration_batches: CalibrationBatches | None = None   # None: made without a calibration record (old cache entry)


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
