"""`edgekit build`: declared stages, chained over one build record.

Each stage is a function of the build record (`edgekit.build.stages`) that declares, on
itself (`@declares(reads=..., writes=...)`), the record fields it reads and writes;
`STAGES` adds when the build needs it at all (by model kind, precision, target,
options) and names it after its function. `plan` picks the stages a configuration
needs and refuses an order in which a stage would read what no earlier stage writes,
before anything runs; `run_stages` hands each stage a `StageView` that enforces its
declaration, keeps what it wrote, and times it. Adding a stage is one function plus one
line in `STAGES`.

    model in (factory-inputs | load-exported | import-onnx | load-pir) -> read-data
    -> export-factory | export-paddle3 -> paddle3-reference -> prune -> optimise (passes: engine, geometry, nms, fold)
    -> import-metric -> coverage -> fp32-reference -> quantize-int8 | simulate-weights -> convert-target -> convert-twin
    -> tier-a -> tier-b -> tier-c -> gates -> unpruned-int8 -> prune-report -> write-bundle
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from edgekit.build import stages
from edgekit.contracts import files as contracts
from edgekit.core import atomic
from edgekit.build.bundle import Bundle
from edgekit.build.config import is_paddle3_source
from edgekit.contracts.settings import BuildConfig
from edgekit.core.errors import BundleError
from edgekit.model.parity import ParityReport
from edgekit.build.record import GIVEN, BuildRecord, StageOrderError, StageOutput, StageView
from edgekit.core.tables import PRECISIONS, TARGETS, Precision

if TYPE_CHECKING:
    from edgekit.prune.report import PruneReport

log = logging.getLogger(__name__)

Progress = Callable[[str, str], None]   # (stage, "start" | "done")
Observer = Callable[[str, frozenset, frozenset], None]   # (stage, fields it read, fields it wrote)
STAGING_PREFIX = ".edgekit-staging-"
__all__ = ["GIVEN", "STAGES", "Stage", "StageOrderError", "build", "plan", "run_stages"]


def _always(cfg: BuildConfig) -> bool:
    return True


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[StageView], StageView]
    needs: tuple[str, ...] = ()          # fields an earlier stage must have written
    provides: tuple[str, ...] = ()       # fields it must write (not None afterwards)
    when: Callable[[BuildConfig], bool] = _always
    reads: tuple[str, ...] = ()          # all it may read: needs + fields that may be absent (None)
    writes: tuple[str, ...] = ()         # all it may write: provides + fields it may leave None

    def __post_init__(self) -> None:
        object.__setattr__(self, "reads", tuple(dict.fromkeys(self.needs + self.reads)))
        object.__setattr__(self, "writes", tuple(dict.fromkeys(self.provides + self.writes)))

    @classmethod
    def of(cls, run: Callable[[StageView], StageView], when: Callable[[BuildConfig], bool] = _always) -> "Stage":
        """A stage function as a stage: named after it, needs and provides from its own declaration."""
        reads, writes = run.declared
        return cls(run.__name__.replace("_", "-"), run, reads.required, writes.required, when, reads.all, writes.all)


# ---------------------------------------------------------------- when each stage is needed

def _factory(cfg: BuildConfig) -> bool:
    return cfg.model.factory is not None


def _factory2(cfg: BuildConfig) -> bool:
    return _factory(cfg) and cfg.model.paddle == 2


def _factory3(cfg: BuildConfig) -> bool:
    return _factory(cfg) and cfg.model.paddle == 3


def _onnx(cfg: BuildConfig) -> bool:
    return cfg.model.model_file is not None and cfg.model.model_file.suffix.lower() == ".onnx"


def _pir(cfg: BuildConfig) -> bool:
    return not _factory(cfg) and not _onnx(cfg) and is_paddle3_source(cfg.model)


def _paddle3(cfg: BuildConfig) -> bool:
    return is_paddle3_source(cfg.model)


def _exported(cfg: BuildConfig) -> bool:
    return not _factory(cfg) and not _onnx(cfg) and not _pir(cfg)


def _own_reference(cfg: BuildConfig) -> bool:
    """The FP32 program is its own reference: not an ONNX import (ONNX Runtime's, import-metric) nor a Paddle 3
    source (Paddle 3's own inference, paddle3-reference)."""
    return not _onnx(cfg) and not _paddle3(cfg)


def _pruning(cfg: BuildConfig) -> bool:
    return cfg.prune is not None


def _int8(cfg: BuildConfig) -> bool:
    return cfg.precision is Precision.int8


def _weights_rounded(cfg: BuildConfig) -> bool:
    info = PRECISIONS[cfg.precision]
    return info.opt_fp16 or info.opt_weight_quant is not None


def _simulated(cfg: BuildConfig) -> bool:
    return _int8(cfg) or _weights_rounded(cfg)


def _emulable(cfg: BuildConfig) -> bool:
    return TARGETS[cfg.target].emulation is not None


def _pruning_int8(cfg: BuildConfig) -> bool:
    return _pruning(cfg) and _int8(cfg)


STAGES: tuple[Stage, ...] = (
    Stage.of(stages.factory_inputs, _factory),
    Stage.of(stages.load_exported, _exported),
    Stage.of(stages.import_onnx, _onnx),
    Stage.of(stages.load_pir, _pir),
    Stage.of(stages.read_data),
    Stage.of(stages.export_factory, _factory2),
    Stage.of(stages.export_paddle3, _factory3),
    Stage.of(stages.paddle3_reference, _paddle3),
    Stage.of(stages.prune, _pruning),
    Stage.of(stages.optimise),
    Stage.of(stages.import_metric, _onnx),
    Stage.of(stages.coverage),
    Stage.of(stages.fp32_reference, _own_reference),
    Stage.of(stages.quantize_int8, _int8),
    Stage.of(stages.simulate_weights, _weights_rounded),
    Stage.of(stages.convert_target),
    Stage.of(stages.convert_twin),
    Stage.of(stages.tier_a),
    Stage.of(stages.tier_b, _simulated),
    Stage.of(stages.tier_c, _emulable),
    Stage.of(stages.gates),
    Stage.of(stages.unpruned_int8, _pruning_int8),
    Stage.of(stages.prune_report, _pruning),
    Stage.of(stages.write_bundle),
)


def plan(cfg: BuildConfig, declared: Sequence[Stage] = STAGES) -> tuple[Stage, ...]:
    """The stages `cfg` needs, in order; a stage needing what no earlier one provides is refused here."""
    chosen = tuple(s for s in declared if s.when(cfg))
    have = set(GIVEN)
    if cfg.data.calibration is not None:   # read by the data stage when given (int8 requires it: config checks)
        have.add("calibration")
    for stage in chosen:
        missing = [need for need in stage.needs if need not in have]
        if missing:
            raise StageOrderError(f"stage {stage.name!r} needs {', '.join(missing)}, which no earlier stage provides",
                                  "this is a bug in edgekit's stage declarations: please report it")
        have.update(stage.provides)
    return chosen


def run_stages(record: BuildRecord, chosen: Sequence[Stage], progress: Progress,
               observe: Observer | None = None) -> BuildRecord:
    """Each stage on a view of the record that enforces its declaration; what it wrote is kept in `history`."""
    for stage in chosen:
        progress(stage.name, "start")
        start = time.monotonic()
        view = StageView(record, stage.name, stage.reads, stage.writes)
        done = stage.run(view)
        after = done.record if isinstance(done, StageView) else done
        lacking = [name for name in stage.provides if getattr(after, name) is None]
        if lacking:
            raise StageOrderError(f"stage {stage.name!r} did not provide {', '.join(lacking)}",
                                  "this is a bug in edgekit's stage declarations: please report it")
        wrote = {name: getattr(after, name) for name in stage.writes if name in view.writes}
        record = after.with_(timings=MappingProxyType({**after.timings, stage.name: round(time.monotonic() - start, 3)}),
                             history=after.history + (StageOutput(stage.name, MappingProxyType(wrote)),))
        if observe is not None:
            observe(stage.name, frozenset(view.reads), frozenset(view.writes))
        progress(stage.name, "done")
    return record


@dataclass
class BuildResult:
    bundle: Bundle
    report: ParityReport
    timings: Mapping[str, float] = field(default_factory=dict)     # stage name -> seconds
    quant_search: list[str] = field(default_factory=list)     # the int8 search's summary lines
    prune: PruneReport | None = None            # when --prune was given


def build(cfg: BuildConfig, progress: Progress = lambda stage, state: None, observe: Observer | None = None) -> BuildResult:
    chosen = plan(cfg)
    contracts.check_inside(cfg.out_dir, cfg.bundle_dir, "the bundle folder")   # before anything is written
    try:
        cfg.out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundleError(f"cannot create the output folder {cfg.out_dir}: {exc.strerror}", "pass a writable --out") from exc
    _remove_stale_staging(cfg.out_dir)
    # beside the destination, so the final rename is atomic; the pid lets a later run recognise
    # staging left by a killed process
    with atomic.staging_dir(cfg.out_dir, f"{STAGING_PREFIX}{os.getpid()}-") as work:
        (work / "bundle").mkdir()
        done = run_stages(BuildRecord(cfg, work, work / "bundle"), chosen, progress, observe)
    return BuildResult(done.bundle, done.report, dict(done.timings), done.search.lines() if done.search else [],
                       done.pruned.report if done.pruned is not None else None)


def _remove_stale_staging(out_dir: Path) -> None:
    """Staging folders of builds whose process is gone (killed by a signal, power loss)."""
    for folder in out_dir.glob(STAGING_PREFIX + "*"):
        pid = folder.name[len(STAGING_PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:   # alive, owned by someone else
            continue
