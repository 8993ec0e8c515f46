"""The build record: what the stages of `edgekit build` hand each other.

One frozen object, passed from stage to stage: each stage returns a new record with
the fields it provides filled in (`record.with_(...)`) and leaves its input alone.
Which stage provides which field, and which fields it needs, is declared in
`edgekit.pipeline.STAGES`; the bundle's manifest is built from the final record
(`edgekit.manifest.build_manifest`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .artifacts import LiteModel, QuantizedModel, StaticModel
from .config import BuildConfig, InputSpec
from .data import Samples
from .evalset import EvalSet
from .parity import ParityReport


@dataclass(frozen=True)
class BuildRecord:
    cfg: BuildConfig
    work: Path                                   # the build's scratch folder, beside the bundle's destination
    staging: Path                                # the bundle being assembled (renamed into place at the end)
    feeds: tuple[InputSpec, ...] = ()            # the program's inputs (a factory's: its input specs)
    static: StaticModel | None = None            # the FP32 program every later stage starts from
    onnx_import: Mapping | None = None           # the ONNX import report (names, feeds, ONNX Runtime check)
    paddle3: Mapping | None = None               # a Paddle 3 source: the PIR translation, its check against Paddle 3
    evaluation: EvalSet | None = None            # evaluation samples (+ task and truth), cut to [parity] max_samples
    calibration: Samples | None = None
    pruned: Any = None                           # edgekit.prune.stage.PrunedModel
    folding: Mapping | None = None               # what the fold stage folded, and its check (or why it was not used)
    quantized: QuantizedModel | None = None      # the host's simulation of the reduced precision
    search: Any = None                           # edgekit.quantize.search.QuantSearchResult (int8)
    data_warnings: tuple[str, ...] = ()
    reference: tuple[np.ndarray, ...] | None = None   # FP32 outputs of `static` on `evaluation`
    simulated: tuple[np.ndarray, ...] | None = None   # tier B's outputs (the host's simulation of the precision)
    device: LiteModel | None = None              # model.nb for the target
    twin: LiteModel | None = None                # the FP32 x86 twin .nb (tier A)
    report: ParityReport | None = None
    emulation: Mapping | None = None             # tier C: runtime, qemu, kernel path, figures (or why it did not run)
    golden: Mapping | None = None
    bundle: Any = None                           # edgekit.bundle.Bundle, once written
    timings: Mapping[str, float] = field(default_factory=dict)

    def with_(self, **changes: Any) -> "BuildRecord":
        return replace(self, **changes)

    @property
    def aliases(self) -> Mapping[str, str]:
        """ONNX input names -> program feeds (users name .npz arrays after the ONNX inputs)."""
        return dict(self.onnx_import["feeds"]) if self.onnx_import else {}
