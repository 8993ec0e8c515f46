"""`edgekit build`: declared stages, chained over one build record.

Each stage is a function `BuildRecord -> BuildRecord` (`edgekit.stages`) with a
declaration: the record fields it needs, the fields it provides, and when the build
needs it at all (by model kind, precision, target, options). `plan` picks the stages
a configuration needs and refuses an order in which a stage would run before what it
needs is provided, before anything runs; `run_stages` runs them and times each.
Adding a stage is one function plus one line in `STAGES`.

    model in (inputs | load | import | load-pir) -> data -> export | export-paddle3 -> paddle3-reference -> prune
    -> reference -> fold -> import-metric -> coverage
    -> quantize | simulate -> lite -> twin -> parity (A) -> simulation (B) -> emulation (C)
    -> gates -> prune-report -> package
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from . import atomic, stages
from .bundle import Bundle
from .config import BuildConfig, is_paddle3_source
from .errors import BundleError, EdgekitError
from .parity import ParityReport
from .record import BuildRecord
from .tables import PRECISIONS, TARGETS, Precision

log = logging.getLogger(__name__)

Progress = Callable[[str, str], None]   # (stage, "start" | "done")
STAGING_PREFIX = ".edgekit-staging-"
GIVEN = ("cfg", "work", "staging")      # what every record starts with


class StageOrderError(EdgekitError):
    """A stage declared to need what no earlier stage provides: a bug in the declarations, caught before running."""

    exit_code = 1


def _always(cfg: BuildConfig) -> bool:
    return True


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[BuildRecord], BuildRecord]
    needs: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    when: Callable[[BuildConfig], bool] = _always


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


def _pruning(cfg: BuildConfig) -> bool:
    return cfg.prune is not None


def _int8(cfg: BuildConfig) -> bool:
    return cfg.precision is Precision.int8


def _weights_rounded(cfg: BuildConfig) -> bool:
    info = PRECISIONS[cfg.precision]
    return info.opt_fp16 or info.opt_weight_quant is not None


def _simulated(cfg: BuildConfig) -> bool:
    return _int8(cfg) or _weights_rounded(cfg)


def _folding(cfg: BuildConfig) -> bool:
    return cfg.fold


def _emulable(cfg: BuildConfig) -> bool:
    return TARGETS[cfg.target].emulation is not None


STAGES: tuple[Stage, ...] = (
    Stage("inputs", stages.factory_inputs, provides=("feeds",), when=_factory),
    Stage("load", stages.load_exported, provides=("static", "feeds"), when=_exported),
    Stage("import", stages.import_onnx, provides=("static", "feeds", "onnx_import"), when=_onnx),
    Stage("load-pir", stages.load_pir, provides=("static", "feeds", "paddle3"), when=_pir),
    Stage("data", stages.read_data, needs=("feeds",), provides=("evaluation",)),
    Stage("export", stages.export_factory, needs=("feeds", "evaluation"), provides=("static",), when=_factory2),
    Stage("export-paddle3", stages.export_paddle3, needs=("feeds", "evaluation"), provides=("static", "paddle3"),
          when=_factory3),
    Stage("paddle3-reference", stages.paddle3_reference, needs=("static", "evaluation", "paddle3"),
          provides=("reference", "paddle3"), when=_paddle3),
    Stage("prune", stages.prune, needs=("static", "evaluation"), provides=("static", "pruned"), when=_pruning),
    Stage("reference", stages.cross_check_reference, needs=("static", "evaluation"), provides=("static",), when=_exported),
    Stage("fold", stages.fold_graph, needs=("static", "evaluation"), provides=("static", "folding"), when=_folding),
    Stage("import-metric", stages.import_metric, needs=("static", "evaluation", "onnx_import"),
          provides=("onnx_import", "reference"), when=_onnx),
    Stage("coverage", stages.coverage, needs=("static",)),
    Stage("quantize", stages.quantize_int8, needs=("static", "evaluation", "calibration"),
          provides=("quantized", "search", "reference"), when=_int8),
    Stage("simulate", stages.simulate_weights, needs=("static",), provides=("quantized",), when=_weights_rounded),
    Stage("lite", stages.convert_target, needs=("static", "evaluation"), provides=("device",)),
    Stage("twin", stages.convert_twin, needs=("static", "evaluation", "device"), provides=("twin",)),
    Stage("parity", stages.tier_a, needs=("static", "evaluation", "twin"), provides=("report", "reference")),
    Stage("simulation", stages.tier_b, needs=("report", "quantized"), provides=("report", "simulated"), when=_simulated),
    Stage("emulation", stages.tier_c, needs=("report", "device", "evaluation"), provides=("report", "emulation"),
          when=_emulable),
    Stage("gates", stages.gates, needs=("report",)),
    Stage("prune-report", stages.prune_report, needs=("pruned", "report", "device"), when=_pruning),
    Stage("package", stages.write_bundle, needs=("static", "evaluation", "report", "device", "twin"), provides=("bundle",)),
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


def run_stages(record: BuildRecord, chosen: Sequence[Stage], progress: Progress) -> BuildRecord:
    for stage in chosen:
        progress(stage.name, "start")
        start = time.monotonic()
        record = stage.run(record)
        lacking = [name for name in stage.provides if getattr(record, name) is None]
        if lacking:
            raise StageOrderError(f"stage {stage.name!r} did not provide {', '.join(lacking)}",
                                  "this is a bug in edgekit's stage declarations: please report it")
        record = record.with_(timings={**record.timings, stage.name: round(time.monotonic() - start, 3)})
        progress(stage.name, "done")
    return record


@dataclass
class BuildResult:
    bundle: Bundle
    report: ParityReport
    timings: dict = field(default_factory=dict)
    quant_search: list = field(default_factory=list)     # the int8 search's summary lines
    prune: object | None = None          # edgekit.prune.PruneReport when --prune was given


def build(cfg: BuildConfig, progress: Progress = lambda stage, state: None) -> BuildResult:
    chosen = plan(cfg)
    try:
        cfg.out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundleError(f"cannot create the output folder {cfg.out_dir}: {exc.strerror}", "pass a writable --out") from exc
    _remove_stale_staging(cfg.out_dir)
    # beside the destination, so the final rename is atomic; the pid lets a later run recognise
    # staging left by a killed process
    with atomic.staging_dir(cfg.out_dir, f"{STAGING_PREFIX}{os.getpid()}-") as work:
        (work / "bundle").mkdir()
        done = run_stages(BuildRecord(cfg, work, work / "bundle"), chosen, progress)
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
