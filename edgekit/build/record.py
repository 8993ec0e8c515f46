"""The build record: what the stages of `edgekit build` hand each other.

One frozen, fully typed object, passed from stage to stage: each stage returns a new
record with the fields it provides filled in (`record.with_(...)`) and leaves its input
alone. What a stage reads and writes is declared on the stage function itself
(`@declares(reads=("static", "evaluation"), writes=("?static", "folding"))`),
and the pipeline hands each stage a `StageView` that lets it read only what it declared
and write only what it declared: a stage that reaches for anything else fails the build
(`StageOrderError`), so the declarations cannot drift from the code. Every stage's
writes are kept (`history`), so a later reader can name the one it means
(`output_of("prune", "static")`: the pruned program, not "whatever `static` holds now").
The bundle's manifest is built from the final record (`edgekit.build.manifest.build_manifest`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from edgekit.model.artifacts import LiteModel, QuantizedModel, StaticModel
from edgekit.contracts.settings import BuildConfig, InputSpec
from edgekit.model.data import Samples
from edgekit.core.errors import EdgekitError
from edgekit.model.evalset import EvalSet
from edgekit.model.parity import ParityReport
from edgekit.model.passes import PassRecord
from edgekit.model.reports import Emulation, Folding, Geometry, Golden, NmsDecision, OnnxImport, Paddle3

if TYPE_CHECKING:
    from edgekit.build.bundle import Bundle
    from edgekit.prune.stage import PrunedModel
    from edgekit.quantize.search import QuantSearchResult

GIVEN = ("cfg", "work", "staging", "timings", "history")   # every stage may read these; the pipeline writes them


class StageOrderError(EdgekitError):
    """A stage read or wrote what it does not declare, or needs what no earlier stage provides: a bug in edgekit."""

    exit_code = 1


@dataclass(frozen=True)
class StageOutput:
    """What one stage wrote, kept for later readers."""

    stage: str
    artifacts: Mapping[str, object]


@dataclass(frozen=True)
class BuildRecord:
    cfg: BuildConfig
    work: Path                                   # the build's scratch folder, beside the bundle's destination
    staging: Path                                # the bundle being assembled (renamed into place at the end)
    feeds: tuple[InputSpec, ...] = ()            # the program's inputs (a factory's: its input specs)
    static: StaticModel | None = None            # the FP32 program as of the last stage that wrote it (history: which)
    onnx_import: OnnxImport | None = None        # the ONNX import report (names, feeds, ONNX Runtime check)
    paddle3: Paddle3 | None = None               # a Paddle 3 source: the PIR translation, its check against Paddle 3
    evaluation: EvalSet | None = None            # evaluation samples (+ task and truth), cut to [parity] max_samples
    calibration: Samples | None = None
    pruned: PrunedModel | None = None
    passes: tuple[PassRecord, ...] = ()          # the optimise stage's passes: what each changed and its check
    folding: Folding | None = None               # what the fold pass folded, and its check (or why it was not used)
    nms: NmsDecision | None = None               # an NMS op in the graph: kept or cut off, and the measurements why
    geometry: Geometry | None = None             # PaddleDetection's im_shape/scale_factor inputs bound into the graph
    quantized: QuantizedModel | None = None      # the host's simulation of the reduced precision
    search: QuantSearchResult | None = None      # the int8 search, its candidates and fallback
    data_warnings: tuple[str, ...] = ()
    reference: tuple[np.ndarray, ...] | None = None   # FP32 outputs of `static` on `evaluation`
    simulated: tuple[np.ndarray, ...] | None = None   # tier B's outputs (the host's simulation of the precision)
    device: LiteModel | None = None              # model.nb for the target
    twin: LiteModel | None = None                # the FP32 x86 twin .nb (tier A)
    unpruned_int8: LiteModel | None = None       # a pruned int8 build: the unpruned model through the same path
    report: ParityReport | None = None
    emulation: Emulation | None = None           # tier C: runtime, qemu, kernel path, figures (or why it did not run)
    golden: Golden | None = None
    bundle: Bundle | None = None                 # once written
    timings: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))   # stage -> seconds
    history: tuple[StageOutput, ...] = ()        # every stage's writes, in order

    def with_(self, **changes: object) -> "BuildRecord":
        return replace(self, **changes)

    @property
    def aliases(self) -> Mapping[str, str]:
        """ONNX input names -> program feeds (users name .npz arrays after the ONNX inputs)."""
        return self.onnx_import.feeds if self.onnx_import is not None else MappingProxyType({})

    def output_of(self, stage: str, name: str) -> object | None:
        """What `stage` wrote as `name`, or None when it did not run (or wrote no such artifact)."""
        return next((out.artifacts[name] for out in self.history if out.stage == stage and name in out.artifacts), None)

    def writers_of(self, name: str) -> tuple[str, ...]:
        """The stages that wrote `name`, in order (`static`: the export, then each transform that replaced it)."""
        return tuple(out.stage for out in self.history if name in out.artifacts)


FIELDS = frozenset(f.name for f in fields(BuildRecord))
PROPERTIES = {"aliases": ("onnx_import",), "output_of": (), "writers_of": ()}   # what each derived value reads


@dataclass(frozen=True)
class Declared:
    """Record fields a stage reads or writes; a name starting with `?` may be absent (None) for some builds."""

    names: tuple[str, ...]

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(n for n in self.names if not n.startswith("?"))

    @property
    def all(self) -> tuple[str, ...]:
        return tuple(n.lstrip("?") for n in self.names)


def declares(reads: tuple[str, ...], writes: tuple[str, ...]):
    """A stage's declaration, on the stage function itself: the record fields it reads and writes. The pipeline
    takes needs and provides from here, and the StageView it hands the stage enforces them."""
    unknown = [n for n in reads + writes if n.lstrip("?") not in FIELDS or n.lstrip("?") in GIVEN]
    if unknown:
        raise StageOrderError(f"a stage declares {', '.join(unknown)}, which are no record fields a stage provides",
                              "this is a bug in edgekit's stage declarations: please report it")

    def mark(fn):
        fn.declared = (Declared(tuple(reads)), Declared(tuple(writes)))
        return fn
    return mark


class StageView:
    """The record as one stage sees it: reads limited to its needs (and GIVEN), writes to what it provides.

    `reads` and `writes` collect what the stage actually touched (a test compares them with the declaration)."""

    def __init__(self, record: BuildRecord, stage: str, needs: Sequence[str], provides: Sequence[str],
                 reads: set | None = None, writes: set | None = None) -> None:
        object.__setattr__(self, "_state", (record, stage, frozenset(needs), frozenset(provides),
                                            set() if reads is None else reads, set() if writes is None else writes))

    @property
    def record(self) -> BuildRecord:
        return self._state[0]

    @property
    def reads(self) -> set:
        return self._state[4]

    @property
    def writes(self) -> set:
        return self._state[5]

    def __getattr__(self, name: str):
        record, stage, needs, provides, reads, writes = self._state
        if name in PROPERTIES:
            for inner in PROPERTIES[name]:
                self.__getattr__(inner)
            return getattr(record, name)
        if name not in FIELDS:
            raise AttributeError(name)
        if name not in GIVEN and name not in needs and name not in writes:   # its own writes it may read back
            raise StageOrderError(f"stage {stage!r} read {name!r}, which it does not declare",
                                  "this is a bug in edgekit's stage declarations: please report it")
        if name not in GIVEN and name not in writes:
            reads.add(name)
        return getattr(record, name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("the build record is frozen: return rec.with_(...)")

    def with_(self, **changes: object) -> "StageView":
        record, stage, needs, provides, reads, writes = self._state
        undeclared = sorted(set(changes) - provides)
        if undeclared:
            raise StageOrderError(f"stage {stage!r} wrote {', '.join(undeclared)}, which it does not declare",
                                  "this is a bug in edgekit's stage declarations: please report it")
        writes.update(changes)
        return StageView(record.with_(**changes), stage, needs, provides, reads, writes)
