"""INT8 within an accuracy budget: calibration algorithm search, then per-layer float fallback.

`quantize_to_budget` tries each calibration algorithm on the whole model, keeps
the best one that meets the budget, and when none does, ranks the layers of the
best one by measured sensitivity and keeps the worst in float until the budget
holds (`sensitivity.py`). With a cost counter (tier C available), the candidates that
meet the budget are then counted on the target's ARM kernels, op types whose INT8
kernels cost no less than float get a candidate of their own, and the cheapest within
the budget is chosen (`cost.py`). The result names every candidate tried.

Calibrations are memoised on disk in a folder the caller passes in: a quantised
model folder per (model files, calibration data, algorithm, settings, float
layers) key, and a score per (that key, evaluation data). A rerun with the same
inputs calibrates nothing. Without a cache folder the same keys live in the
build's scratch folder, so one run never calibrates the same candidate twice.

Only the whole-model candidate of an algorithm runs the calibration data (and the cost step's op-type candidates,
which change what PaddleSlim samples): the
thresholds it samples do not depend on the float list (`ptq` module docstring),
so every float list of that algorithm is built from them (`ptq.requantize_int8`,
seconds instead of a data pass per candidate) and is the model a calibration
with that list would give.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from dataclasses import dataclass, field, fields, replace
from importlib import metadata
from pathlib import Path
from typing import Callable, Mapping, Sequence


from edgekit.core import atomic, executors
from edgekit.model.artifacts import CalibrationBatches, QuantizedModel, StaticModel, sha256_file
from edgekit.contracts.settings import CALIBRATION_ALGOS, RANK_BY, QuantConfig
from edgekit.model.data import Samples
from edgekit.core.errors import ConfigError, QuantizeError
from edgekit.model.evalset import EvalSet

from . import cost as cost_mod
from . import ptq
from .cost import Coster, CostRecord
from .local import analyse_local
from .sensitivity import (LOCAL, SENSITIVITY_METHODS, Budget, Evaluator, Fallback, LayerSensitivity, QuantLayer, Score,
                          analyse, fallback, max_float_layers, quantizable_layers, sensitivity_skips)

log = logging.getLogger(__name__)

CACHE_FORMAT = "edgekit-ptq-cache/1"
# QuantConfig fields that steer the search but not one calibration: outside the key, so changing them reuses entries
SEARCH_ONLY_FIELDS = frozenset({"algo", "search_algos", "max_drop", "fallback", "max_float_fraction", "analyse_layers",
                                "sensitivity_method", "sensitivity_samples", "cache_dir", "cost_candidates",
                                "rank_by", "max_changed"})
ENTRY = "entry.json"
CALIBRATION_MEMORY_MB = 1536      # what one calibration task holds, for sizing a pool (PP-OCR rec measured ~1.2 GB)

Quantize = Callable[..., QuantizedModel]     # the signature of ptq.quantize_int8
Requantize = Callable[..., QuantizedModel]   # the signature of ptq.requantize_int8


# ---------------------------------------------------------------- cache keys (pure)


def model_digest(model: StaticModel) -> str:
    digest = hashlib.sha256()
    for path in model.files():
        digest.update(path.name.encode() + b"\0" + sha256_file(path).encode())
    for feed in model.feeds:
        digest.update(f"{feed.name}:{list(feed.shape)}:{feed.dtype}".encode())
    return digest.hexdigest()


def calibration_settings(cfg: QuantConfig) -> dict:
    """Everything besides model, data, algorithm and float layers that decides a calibration's result."""
    settings = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name not in SEARCH_ONLY_FIELDS}
    settings["quantizable_ops"] = list(ptq.QUANTIZABLE_OPS)
    # the one place PaddleSlim is called: a change to its arguments must not hit old entries
    settings["ptq_source"] = hashlib.sha256(Path(ptq.__file__).read_bytes()).hexdigest()
    for package in ("paddlepaddle", "paddleslim"):
        try:
            settings[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            settings[package] = None
    return settings


def cache_key(model: str, data: str, algo: str, settings: Mapping, skip: Sequence[str],
              float_ops: Sequence[str] = ()) -> str:
    payload = {"format": CACHE_FORMAT, "model": model, "data": data, "algo": algo,
               "settings": dict(settings), "skip": sorted(set(skip))}
    if float_ops:                   # only when set: the keys of every earlier entry stay what they were
        payload["float_ops"] = sorted(set(float_ops))
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def score_key(calibration_key: str, evaluation: str) -> str:
    return hashlib.sha256(f"{CACHE_FORMAT}|score|{calibration_key}|{evaluation}".encode()).hexdigest()


# ---------------------------------------------------------------- the on-disk stores


def _valid_entry(folder: Path) -> dict | None:
    """An entry is usable only when complete: written last, with the sha256 of every file."""
    try:
        entry = json.loads((folder / ENTRY).read_text(encoding="utf-8"))
        ok = entry.get("format") == CACHE_FORMAT and all(
            sha256_file(folder / name) == digest for name, digest in entry["files"].items())
    except (OSError, ValueError, KeyError, AttributeError):
        return None
    return entry if ok else None


def _publish(tmp: Path, folder: Path) -> None:
    """Rename a finished temp folder into place; a concurrent writer of the same key wins harmlessly."""
    atomic.publish_dir(tmp, folder, keep_existing=lambda existing: _valid_entry(existing) is not None)


@dataclass(frozen=True)
class Calibrated:
    quantized: QuantizedModel
    key: str
    reused: bool          # found in the cache or scratch: no calibration ran


class Calibrator:
    """`quantize_int8` for one model and calibration set, any algorithm and float list, memoised by key.

    Models are written to `scratch` (the build's work folder) unless `keep` asks
    for the persistent `cache`; `keep` on a scratch entry copies it into the cache.
    """

    def __init__(self, model: StaticModel, samples: Samples, cfg: QuantConfig, scratch: Path,
                 cache: Path | None = None, quantize: Quantize = ptq.quantize_int8,
                 requantize: Requantize | None = None, batches: CalibrationBatches | None = None) -> None:
        self.model, self.samples, self.cfg = model, samples, cfg
        self.scratch = scratch.absolute()            # PaddleSlim runs in its own working directory
        self.cache = cache.absolute() if cache is not None else None
        self._quantize = quantize
        # the thresholds of another quantize function are not ptq's: replay only ptq's own
        self._requantize = requantize or (ptq.requantize_int8 if quantize is ptq.quantize_int8 else None)
        self._model_digest = model_digest(model)
        self._data_digest = samples.digest()
        self._settings = calibration_settings(cfg)
        # one batch for every calibration of this model (a worker is handed the parent's): mse and emd thresholds
        # depend on it, so a batch lowered for memory is part of the key; a batch as asked keeps the keys as they were
        self.batches = batches or (ptq.plan_batches(model, samples, cfg, algos=cfg.search_algos or (cfg.algo,))
                                   if quantize is ptq.quantize_int8 else None)
        if self.batches is not None and self.batches.lowered:
            self._settings = dict(self._settings, calibration_batch=self.batches.batch_size)
        self.calibrations = 0                        # how many times PaddleSlim ran the calibration data
        self.replays = 0                             # float lists built from a calibration's thresholds

    def key(self, algo: str, skip: Sequence[str] = (), float_ops: Sequence[str] = ()) -> str:
        return cache_key(self._model_digest, self._data_digest, algo, self._settings, skip, float_ops)

    def __call__(self, algo: str, skip: Sequence[str] = (), keep: bool = False,
                 float_ops: Sequence[str] = ()) -> Calibrated:
        key = self.key(algo, skip, float_ops)
        roots = [r for r in (self.cache, self.scratch) if r is not None]
        for root in roots:
            entry = _valid_entry(root / key)
            if entry is not None:
                if keep and self.cache is not None and root != self.cache:
                    return Calibrated(self._copy_to_cache(root / key, key), key, True)
                return Calibrated(self._load(root / key, entry), key, True)
        target = self.cache if keep and self.cache is not None else self.scratch
        skip, float_ops = tuple(sorted(set(skip))), tuple(sorted(set(float_ops)))
        # a float list is built from the whole-model calibration's thresholds; op types kept float are calibrated
        scales = self.scales(algo) if skip and not float_ops else None
        return Calibrated(self._calibrate(algo, skip, key, target, scales, float_ops), key, False)

    def scales(self, algo: str) -> Path | None:
        """The thresholds the whole-model calibration of `algo` sampled, when it ran (cache or scratch) and this
        calibrator can replay them; calibrates it first when it has not run yet."""
        if self._requantize is None or algo not in ptq.REPLAYABLE_ALGOS:
            return None
        whole = self(algo)
        found = whole.quantized.model.model_file.parent / ptq.SCALES_FILE
        return found if found.is_file() else None

    def _calibrate(self, algo: str, skip: tuple[str, ...], key: str, root: Path, scales: Path | None = None,
                   float_ops: tuple[str, ...] = ()) -> QuantizedModel:
        with atomic.staging_dir(root, ".tmp-") as tmp:
            cfg = replace(self.cfg, algo=algo)
            if scales is not None:
                quantized = self._requantize(self.model, scales, cfg, tmp, skip)
                self.replays += 1
            else:
                extra = {"float_ops": float_ops} if float_ops else {}     # a Quantize without the keyword still works
                if self.batches is not None:
                    extra["batches"] = self.batches
                quantized = self._quantize(self.model, self.samples, cfg, tmp, skip, **extra)
                self.calibrations += 1
            names = [p.name for p in quantized.model.files()]
            if (tmp / ptq.SCALES_FILE).is_file():
                names.append(ptq.SCALES_FILE)
            entry = {"format": CACHE_FORMAT, "key": key, "algo": algo, "skip": list(skip), "float_ops": list(float_ops),
                     "replayed_from": str(scales.parent.name) if scales is not None else None,
                     "calibration_samples": quantized.calibration_samples, "seconds": round(quantized.seconds, 3),
                     "calibration_sha256": getattr(quantized, "calibration_sha256", ""),
                     "float_activations": list(getattr(quantized, "float_activations", ())),
                     "calibration_batches": quantized.calibration_batches.to_json()
                     if getattr(quantized, "calibration_batches", None) is not None else None,
                     "op_types": list(quantized.model.op_types), "model_file": quantized.model.model_file.name,
                     "params_file": quantized.model.params_file.name if quantized.model.params_file else None,
                     "files": {name: sha256_file(tmp / name) for name in names}}
            (tmp / ENTRY).write_text(json.dumps(entry, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            _publish(tmp, root / key)
        return self._load(root / key, _valid_entry(root / key) or {})

    def _copy_to_cache(self, source: Path, key: str) -> QuantizedModel:
        with atomic.staging_dir(self.cache, ".tmp-") as tmp:
            shutil.copytree(source, tmp, dirs_exist_ok=True)
            _publish(tmp, self.cache / key)
        return self._load(self.cache / key, _valid_entry(self.cache / key) or {})

    def _load(self, folder: Path, entry: dict) -> QuantizedModel:
        if not entry:
            raise QuantizeError(f"calibration cache entry {folder} is incomplete after writing it",
                                "check free disk space and permissions of the cache folder, or pass --no-cache")
        params = folder / entry["params_file"] if entry.get("params_file") else None
        static = StaticModel(folder / entry["model_file"], params, self.model.feeds, self.model.fetches, "paddleslim-ptq",
                             tuple(entry["op_types"]), self.model.sources)
        return QuantizedModel(static, entry["algo"], int(entry["calibration_samples"]), float(entry["seconds"]),
                              calibration_sha256=entry.get("calibration_sha256", ""),
                              float_activations=tuple(entry.get("float_activations", ())),
                              calibration_batches=CalibrationBatches.from_json(entry["calibration_batches"])
                              if entry.get("calibration_batches") else None)


class ScoreStore:
    """Scores of calibrated candidates, as small JSON files beside the models (or in memory without a cache).

    `agreement`: a budget checks each score's agreement with the FP32 results (`max_changed`), so a task score
    stored before scores carried it is scored again (its calibration stays cached); other budgets read it as it is.
    """

    def __init__(self, root: Path | None, agreement: bool = False) -> None:
        self.root = root.absolute() / "scores" if root is not None else None
        self.agreement = agreement
        self._memory: dict[str, Score] = {}

    def get(self, key: str) -> Score | None:
        if key in self._memory:
            return self._memory[key]
        if self.root is None:
            return None
        try:
            raw = json.loads((self.root / f"{key}.json").read_text(encoding="utf-8"))
            agreement = raw.get("agreement")
            score = Score(float(raw["cosine"]), float(raw["snr_db"]), raw["task"], raw["task_drop"],
                          raw.get("metrics"), raw.get("metric_drops"), None if agreement is None else float(agreement))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if score.task is not None and "metrics" not in raw:
            return None                 # scored before every task metric was kept: score it again (calibration cached)
        if score.task is not None and self.agreement and score.agreement is None:
            return None                 # scored before scores kept their agreement with FP32
        self._memory[key] = score
        return score

    def put(self, key: str, score: Score) -> None:
        self._memory[key] = score
        if self.root is None:
            return
        atomic.write_json(self.root / f"{key}.json", score.to_json(), indent=None)


# ---------------------------------------------------------------- the search


@dataclass(frozen=True)
class SearchPlan:
    budget: Budget
    algos: tuple[str, ...] = ("avg",)        # calibration algorithms to try, in order of preference for ties
    fallback: bool = True                    # keep sensitive layers in float when no algorithm meets the budget
    max_float_fraction: float = 0.5          # at most this share of the quantisable layers may stay float
    method: str = "alone"                    # see sensitivity.SENSITIVITY_METHODS
    sensitivity_samples: int = 0             # evaluation samples for ranking layers; 0 = all of them
    always_analyse: bool = False             # rank layers for the report even when no fallback is needed
    cost_candidates: int = 0                 # candidates within the budget counted under qemu (quantize/cost.py); 0 = off
    rank_by: str = "task"                    # see sensitivity.rank

    def __post_init__(self) -> None:
        unknown = [a for a in self.algos if a not in CALIBRATION_ALGOS]
        if not self.algos or unknown:
            raise ConfigError(f"calibration search algorithms {list(self.algos)} are not usable",
                              f"list one or more of {', '.join(CALIBRATION_ALGOS)}")
        if self.method not in SENSITIVITY_METHODS:
            raise ConfigError(f"sensitivity method {self.method!r} is unknown", f"use one of {', '.join(SENSITIVITY_METHODS)}")
        if self.sensitivity_samples < 0:
            raise ConfigError("sensitivity_samples is negative", "give a sample count, or 0 for all evaluation samples")
        if self.rank_by not in RANK_BY:
            raise ConfigError(f"rank_by {self.rank_by!r} is unknown", f"use one of {', '.join(RANK_BY)}")
        if self.cost_candidates < 0:
            raise ConfigError("cost_candidates is negative", "give how many candidates to count, or 0 to not count cost")
        max_float_layers(2, self.max_float_fraction)     # validates the fraction


@dataclass(frozen=True)
class Candidate:
    algo: str
    skip: tuple[str, ...]     # layers kept in float (skip_tensor_list)
    score: Score | None       # None when its calibration failed (`error` says why)
    holds: bool               # meets the budget (only meaningful on the full evaluation set)
    purpose: str              # "algorithm", "sensitivity" or "fallback"
    samples: int              # evaluation samples it was scored on
    reused: bool              # no calibration ran for it (cache or earlier in this run)
    seconds: float
    error: str = ""           # a calibration algorithm that crashed: a failed row of the search, not the build's end
    float_ops: tuple[str, ...] = ()                  # op types left out of quantisation (quantizable_op_type)
    instructions: tuple[tuple[str, int], ...] = ()   # (CPU profile, instructions per inference); () = not counted

    @property
    def failed(self) -> bool:
        return self.score is None

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.instructions)

    def describe_floats(self) -> str:
        parts = ([f"float: {', '.join(self.skip)}"] if self.skip else []) + (
            [f"float op types: {', '.join(self.float_ops)}"] if self.float_ops else [])
        return ", ".join(parts)


@dataclass(frozen=True)
class QuantSearchResult:
    quantized: QuantizedModel
    chosen: Candidate
    budget: Budget
    reference_task: float | None                       # the FP32 model's task metric (budget.task_metric), with truth
    layers: tuple[QuantLayer, ...]
    candidates: tuple[Candidate, ...]                  # every candidate, in the order tried
    sensitivity: tuple[LayerSensitivity, ...] = ()     # most sensitive first; empty when not measured
    fallback: Fallback | None = None
    plan: SearchPlan | None = None
    evaluation_samples: int = 0
    calibrations: int = 0                              # PaddleSlim runs this search needed (0 = all cached)
    notes: tuple[str, ...] = field(default_factory=tuple)
    task_metric: str | None = None                     # what Score.task measures (the task's primary metric)
    reference_metrics: dict[str, float] | None = None             # every task metric of the FP32 model, with truth
    cost: CostRecord | None = None    # the cost step: counted or why not, FP32's counts, the op-type profile
    replays: int = 0                                   # float lists built from a calibration's thresholds, no data pass

    @property
    def holds(self) -> bool:
        return self.chosen.holds

    @property
    def metric_name(self) -> str:
        return self.task_metric or self.budget.task_metric or "task metric"

    @property
    def float_layers(self) -> tuple[QuantLayer, ...]:
        keys, types = set(self.chosen.skip), set(self.chosen.float_ops)
        return tuple(layer for layer in self.layers if layer.key in keys or layer.op_type in types)

    def weight_bytes(self) -> dict:
        """Weights of the quantisable layers as deployed: 1 byte per int8 weight, 4 per float weight."""
        floated = sum(layer.weight_elements for layer in self.float_layers)
        total = sum(layer.weight_elements for layer in self.layers)
        return {"int8": total - floated, "float": 4 * floated, "all_fp32": 4 * total}

    def float_costs(self) -> list[dict]:
        """What each float layer costs and buys: its extra weight bytes over int8, and the budget drop measured
        with only that layer returned to int8 (the fallback's prune pass; None where no such candidate ran)."""
        full = [c for c in self.candidates if c.algo == self.chosen.algo and c.samples == self.evaluation_samples
                and set(c.float_ops) == set(self.chosen.float_ops)]
        costs = []
        for layer in self.float_layers:
            if layer.key not in self.chosen.skip:
                continue                 # float by its op type (a cost candidate): the candidates table has it
            without = set(self.chosen.skip) - {layer.key}
            measured = next((c for c in full if set(c.skip) == without), None)
            costs.append({"name": layer.name, "op_type": layer.op_type, "weights": layer.weight_elements,
                          "extra_bytes": 3 * layer.weight_elements,        # fp32 (4 bytes) instead of int8 (1 byte)
                          "drop_if_int8": self.budget.drop(measured.score) if measured else None,
                          "changed_if_int8": measured.score.changed
                          if measured and self.budget.max_changed is not None else None,
                          "task_if_int8": measured.score.task if measured else None})
        return costs

    def lines(self, with_notes: bool = True) -> list[str]:
        drop = self.budget.drop
        replayed = f", {self.replays} float list(s) from its thresholds" if self.replays else ""
        out = [f"int8 search ({self.budget.describe()}, {self.evaluation_samples} evaluation samples, "
               f"{self.calibrations} calibration(s) run{replayed}):"]
        for c in self.candidates:
            if c.failed:
                out.append(f"  ✗ {c.purpose} {c.algo}: failed: {c.error}")
            elif c.purpose in ("algorithm", "fallback", "op-float"):
                mark = "✓" if c.holds else "✗"
                floats = f", {c.describe_floats()}" if c.describe_floats() else ""
                task = f", {self.metric_name} {c.score.task:.2f} %" if c.score.task is not None else ""
                out.append(f"  {mark} {c.purpose} {c.algo}{floats}: drop {drop(c.score):.4g}"
                           f"{self.budget.changed_text(c.score)}{task}, cosine "
                           f"{c.score.cosine:.6f}{' (cached)' if c.reused else ''}{self._instructions(c)}")
        floats = ", ".join(f"{layer.name} ({layer.op_type})" for layer in self.float_layers) or "none"
        verdict = "meets" if self.holds else "MISSES"
        out.append(f"  chosen: {self.chosen.algo}, layers kept in float: {floats}; {verdict} the budget "
                   f"(drop {drop(self.chosen.score):.4g}{self.budget.changed_text(self.chosen.score)})")
        out.extend(f"  {line}" for line in self.cost_lines())
        if with_notes:
            out.extend(f"  note: {n}" for n in self.notes)
        return out


    def _instructions(self, c: Candidate) -> str:
        cpu = self.cost.cpu if self.cost is not None and self.cost.counted else None
        n = c.counts.get(cpu) if cpu else None
        if n is None:
            return ""
        fp32 = self.cost.fp32.get(cpu)
        return f", {n:,} instructions on {cpu}" + (f" ({n / fp32:.2f}x FP32)" if fp32 else "")

    def cost_lines(self) -> list[str]:
        """What the cost step found, or why it did not run; empty when the search was not asked to count."""
        cost = self.cost
        if cost is None:
            return []
        if not cost.counted:
            return [f"cost: not counted ({cost.reason}); chosen by accuracy alone"]
        cpu, fp32 = cost.cpu, cost.fp32
        shown = ", ".join(f"{p} {r:.2f}x" for p, r in cost.int8_vs_fp32.items())
        out = [f"cost on the {cpu} CPU profile: {cost.counted_candidates} candidate(s) within the budget counted; "
               f"chosen INT8 {self.chosen.counts.get(cpu, 0):,} instructions per inference, FP32 {fp32.get(cpu, 0):,}"
               + (f" (INT8/FP32 {shown})" if shown else "")]
        if cost.chosen_by == "instructions" and cost.accuracy_choice is not None:
            out.append(f"cost: chose the cheapest within the budget over the accuracy choice "
                       f"({cost.accuracy_choice[3]:,} instructions on {cpu})")
        for op_type, found in cost.op_types.items():
            out.append(f"cost: {op_type} kernels {found.int8:,} instructions in INT8, {found.fp32:,} in FP32 "
                       f"on {cpu}: " + ("tried float" if found.tried_float else "INT8 kept"))
        if cost.op_types_note:
            out.append(f"cost: {cost.op_types_note}")
        out.extend(f"cost: not counted: {line}" for line in cost.not_counted)
        return out

    def to_json(self) -> dict:
        return {
            "budget": {"metric": self.budget.metric, "max_drop": self.budget.max_drop,
                       "max_changed": self.budget.max_changed},
            "holds": self.holds, "algo": self.chosen.algo, "float_layers": list(self.chosen.skip),
            "float_op_types": list(self.chosen.float_ops), "cost": self.cost.to_json() if self.cost else None,
            "drop": self.budget.drop(self.chosen.score), "score": self.chosen.score.to_json(),
            "float_costs": self.float_costs(),
            "task_metric": self.task_metric, "reference_task": self.reference_task,
            "reference_metrics": self.reference_metrics,
            "evaluation_samples": self.evaluation_samples,
            "calibrations": self.calibrations, "replays": self.replays, "weight_bytes": self.weight_bytes(),
            "method": self.plan.method if self.plan else None,
            "candidates": [{"algo": c.algo, "float_layers": list(c.skip), "purpose": c.purpose, "holds": c.holds,
                            "samples": c.samples, "reused": c.reused, "seconds": round(c.seconds, 3),
                            "float_op_types": list(c.float_ops), "instructions": c.counts or None,
                            **(c.score.to_json() if c.score is not None else {"error": c.error})}
                           for c in self.candidates],
            "rank_by": self.plan.rank_by if self.plan is not None else None,
            # what a layer's points count: task points lost against the truth, or % of samples read unlike FP32
            "points_of": "changed" if self.budget.max_changed is not None else "drop",
            "layers": [{"name": s.layer.name, "op_type": s.layer.op_type, "rank": s.rank, "value": s.value,
                        "points": s.points, "float": s.layer in self.float_layers} for s in self.sensitivity],
        }


def calibration_memory_mb(calibrate: "Calibrator") -> int:
    """What one calibration task claims from a pool: the measured floor, or its batch's estimate when larger."""
    found = calibrate.batches.task_memory_mb() if calibrate.batches is not None else 0
    return max(CALIBRATION_MEMORY_MB, found)


def calibrate_and_score(model: StaticModel, samples: Samples, cfg: QuantConfig, scratch: Path, cache: Path | None,
                        quantize: Quantize, algo: str, skip: tuple[str, ...], judge: Evaluator,
                        batches: CalibrationBatches | None = None) -> tuple[Score, bool, int, int]:
    """One candidate on a worker: calibrate into the shared scratch/cache (as the search itself would), then score.
    Returns (score, reused, calibrations run, replays)."""
    calibrator = Calibrator(model, samples, cfg, scratch, cache, quantize, batches=batches)
    calibrated = calibrator(algo, skip)
    return judge.score(calibrated.quantized.model), calibrated.reused, calibrator.calibrations, calibrator.replays


def choose(candidates: Sequence[Candidate], budget: Budget) -> Candidate:
    """The best candidate that meets the budget (else the best one): least drop, then least error, then first.
    Failed candidates are never chosen; QuantizeError when every one failed."""
    scored = [c for c in candidates if not c.failed]
    if not scored:
        raise QuantizeError("every calibration algorithm failed: " + "; ".join(f"{c.algo}: {c.error}" for c in candidates),
                            "try other algorithms (--search-algos avg,hist,mse,KL), or --quant fp32 to check the rest")
    holding = [c for c in scored if c.holds]
    if holding:
        return min(enumerate(holding), key=lambda ic: (budget.drop(ic[1].score), ic[1].score.error, ic[0]))[1]
    # nothing holds: the nearest miss (with max_changed, the larger overshoot of its two bounds decides)
    return min(enumerate(scored), key=lambda ic: (budget.excess(ic[1].score), ic[1].score.error, ic[0]))[1]


def quantize_to_budget(model: StaticModel, calibration: Samples, evaluation: Samples, cfg: QuantConfig,
                       plan: SearchPlan, work_dir: Path, cache_dir: Path | None = None,
                       quantize: Quantize = ptq.quantize_int8, evaluator: Evaluator | None = None,
                       executor: executors.Executor | None = None, coster: Coster | None = None,
                       no_cost: str = "") -> QuantSearchResult:
    """INT8 of `model` that meets `plan.budget` on `evaluation`, or the best found (check `.holds`).

    `executor` (default: EDGEKIT_EXECUTOR, else serial) calibrates the independent candidates ahead: the
    algorithms, then the per-layer sensitivity runs. The search then walks them in the same order as a serial
    run and chooses by the same rule, so the choice does not depend on where they ran; the fallback loop, each
    step depending on the last, stays in this process.

    `evaluator` (default: output agreement with `model` on `evaluation`) judges candidates; one
    made with the task and its truth scores them in the task's primary metric, which a points
    budget needs, and the budget's metric must be that one.

    `coster` (with `plan.cost_candidates` > 0) weighs cost among the candidates within the budget (quantize/cost.py);
    without one the search chooses by accuracy, and `no_cost` says why in the result.
    """
    evaluator = evaluator or Evaluator.for_model(model, EvalSet(evaluation))
    wanted = plan.budget.task_metric
    if wanted is not None and wanted != evaluator.metric:
        raise ConfigError(f"the accuracy budget is in {wanted} points but the evaluation data "
                          + (f"is scored in {evaluator.metric}" if evaluator.metric else "has no ground truth"),
                          "give evaluation data with labels or a truth file of that task, or budget the output cosine")
    calibrate = Calibrator(model, calibration, cfg, work_dir / "calibrations", cache_dir, quantize)
    scores = ScoreStore(cache_dir, agreement=plan.budget.max_changed is not None)
    own = executor is None
    executor = executors.from_environment(memory_mb=calibration_memory_mb(calibrate)) if own else executor
    try:
        result = _search(model, calibration, evaluation, cfg, plan, quantize, evaluator, calibrate, scores, executor,
                         coster, no_cost)
    finally:
        if own:
            executor.close()
    return result


def _search(model: StaticModel, calibration: Samples, evaluation: Samples, cfg: QuantConfig, plan: SearchPlan,
            quantize: Quantize, evaluator: Evaluator, calibrate: Calibrator, scores: ScoreStore,
            executor: executors.Executor, coster: Coster | None = None, no_cost: str = "") -> QuantSearchResult:
    ahead: dict[str, tuple[Score, bool] | QuantizeError] = {}   # score key -> (score, reused) or the failure, from the executor

    judges = {id(evaluator): evaluator.digest()}
    candidates: list[Candidate] = []

    def prefetch(wanted: Sequence[tuple[str, tuple[str, ...]]], judge: Evaluator) -> None:
        """Calibrate and score the (algo, float list) candidates not known yet on the executor, all at once."""
        if not executor.concurrent:
            return                                  # in order, in this process: exactly the loop below
        keys, tasks = [], []
        task_memory = calibration_memory_mb(calibrate)
        for algo, skip in wanted:
            key = score_key(calibrate.key(algo, skip), judges[id(judge)])
            if key in ahead or key in keys or scores.get(key) is not None:
                continue
            keys.append(key)
            tasks.append(executors.Task(calibrate_and_score, (model, calibration, cfg, calibrate.scratch, calibrate.cache,
                                                              quantize, algo, tuple(skip), judge, calibrate.batches),
                                        executors.Resources(cpus=1, memory_mb=task_memory)))
        for key, outcome in zip(keys, executor.run(tasks)):
            if not outcome.ok:
                if isinstance(outcome.error, QuantizeError):
                    ahead[key] = outcome.error    # run() handles it as the same calibration failing here would be
                    continue
                raise outcome.error
            score, reused, ran, replayed = outcome.value
            ahead[key] = (score, reused)
            calibrate.calibrations += ran
            calibrate.replays += replayed

    def run(algo: str, skip: tuple[str, ...], purpose: str, judge: Evaluator, float_ops: tuple[str, ...] = ()) -> Candidate:
        start = time.monotonic()
        key = score_key(calibrate.key(algo, skip, float_ops), judges[id(judge)])
        score, reused = scores.get(key), True
        try:
            if score is None and key in ahead:
                done = ahead.pop(key)
                if isinstance(done, QuantizeError):
                    raise done
                score, reused = done
                scores.put(key, score)
            elif score is None:
                calibrated = calibrate(algo, skip, float_ops=float_ops)
                score, reused = judge.score(calibrated.quantized.model), calibrated.reused
                scores.put(key, score)
        except QuantizeError as exc:
            if purpose not in ("algorithm", "op-float"):   # a float list of an algorithm that worked: a real failure
                raise
            failed = Candidate(algo, tuple(skip), None, False, purpose, len(judge.samples), False,
                               time.monotonic() - start, exc.message, tuple(float_ops))
            candidates.append(failed)
            log.warning("calibration %s failed, trying the other algorithms: %s", algo, exc.message)
            return failed
        full_set = judge is evaluator
        candidate = Candidate(algo, tuple(skip), score, full_set and plan.budget.holds(score), purpose,
                              len(judge.samples), reused, time.monotonic() - start, "", tuple(float_ops))
        candidates.append(candidate)
        log.info("%s %s, float %s: drop %.4g%s, cosine %.6f%s", purpose, algo, list(skip), plan.budget.drop(score),
                 plan.budget.changed_text(score), score.cosine, " (cached)" if reused else "")
        return candidate

    prefetch([(algo, ()) for algo in plan.algos], evaluator)
    best = choose([run(algo, (), "algorithm", evaluator) for algo in plan.algos], plan.budget)
    layers = quantizable_layers(model)
    controllable = [layer for layer in layers if layer.key]
    limit = max_float_layers(len(controllable), plan.max_float_fraction)
    notes: list[str] = []
    need_fallback = not best.holds and plan.fallback and limit > 0
    sensitivity: tuple[LayerSensitivity, ...] = ()
    result_fallback = None
    chosen = best
    if need_fallback or plan.always_analyse:
        ranker = evaluator
        if 0 < plan.sensitivity_samples < len(evaluation):
            ranker = evaluator.spread(plan.sensitivity_samples)
            judges[id(ranker)] = ranker.digest()
        scales = calibrate.scales(best.algo) if plan.method == LOCAL else None
        if scales is not None:
            start = time.monotonic()
            sensitivity = analyse_local(model, layers, ranker.samples, json.loads(scales.read_text(encoding="utf-8")))
            log.info("local sensitivity of %d layers on %d samples in %.1f s", len(layers), len(ranker.samples),
                     time.monotonic() - start)
        else:
            method = plan.method if plan.method != LOCAL else "alone"
            if plan.method == LOCAL:
                notes.append(f"sensitivity method local needs the thresholds of PaddleSlim's own {best.algo} "
                             "calibration; ranked with alone instead")
            full = best.score if ranker is evaluator else run(best.algo, (), "sensitivity", ranker).score
            prefetch([(best.algo, skip) for skip in sensitivity_skips(layers, method)], ranker)
            sensitivity = analyse(layers, lambda skip: run(best.algo, skip, "sensitivity", ranker).score, full, method,
                                  plan.rank_by, changed=plan.budget.max_changed is not None)
    if need_fallback:
        result_fallback = fallback([s.layer.key for s in sensitivity],
                                   lambda skip: run(best.algo, skip, "fallback", evaluator).score,
                                   plan.budget, limit, start=best.score)
        tried = [c for c in candidates if c.purpose == "fallback" and c.algo == best.algo]
        chosen = next((c for c in reversed(tried) if set(c.skip) == set(result_fallback.skip)), best)
    elif not best.holds and not plan.fallback:
        notes.append("layer fallback is off ([quantize] fallback = false)")
    elif not best.holds:
        notes.append(f"no layer may stay in float (max_float_fraction {plan.max_float_fraction:g} of {len(controllable)} layers)")
    if len(plan.algos) > 1 or result_fallback is not None:
        notes.append("candidates were chosen on the evaluation samples the parity gate also uses: "
                     "a held-out set gives an unbiased figure")
    cost = None
    if plan.cost_candidates > 0 or coster is not None:
        chosen, cost = _weigh_cost(model, plan, evaluator, calibrate, candidates, chosen, layers, coster, no_cost, run)
    final = calibrate(chosen.algo, chosen.skip, keep=True, float_ops=chosen.float_ops)
    low = final.quantized.float_activations
    if low:
        notes.append(f"{len(low)} activation(s) of rank 0 or 1 left float, not calibrated (PaddleSlim's samplers read "
                     f"[batch, ...] tensors): {', '.join(low[:8])}{' ...' if len(low) > 8 else ''}")
    return QuantSearchResult(final.quantized, chosen, plan.budget, evaluator.reference_task, layers, tuple(candidates),
                             sensitivity, result_fallback, plan, len(evaluation), calibrate.calibrations, tuple(notes),
                             evaluator.metric, getattr(evaluator, "reference_metrics", None), cost,
                             calibrate.replays)


def _weigh_cost(model: StaticModel, plan: SearchPlan, evaluator: Evaluator, calibrate: Calibrator,
                candidates: list[Candidate], chosen: Candidate, layers: Sequence[QuantLayer], coster: Coster | None,
                no_cost: str, run: Callable[..., Candidate]) -> tuple[Candidate, CostRecord]:
    """The cost step (quantize/cost.py): count FP32 and the candidates within the budget, add candidates that keep
    an op type float where the profile finds its INT8 kernels no cheaper, and choose the cheapest within the budget.
    `candidates` gets the counted copies of the candidates (in place of the uncounted ones) and the new ones.
    Returns (chosen, the cost record)."""
    from edgekit.core.errors import EdgekitError

    if coster is None or plan.cost_candidates == 0:
        reason = no_cost or ("[quantize] cost_candidates = 0" if plan.cost_candidates == 0 else "no cost counter")
        return chosen, CostRecord(False, reason)
    if not chosen.holds:
        return chosen, CostRecord(False, "no candidate meets the accuracy budget")
    start = time.monotonic()
    cpu = coster.cpu
    try:
        fp32 = coster.count(model, "fp32")
    except EdgekitError as exc:
        log.warning("cost not counted: FP32 count failed: %s", exc.message)
        return chosen, CostRecord(False, f"the FP32 count failed: {exc.message}")
    counted: dict[int, Candidate] = {}       # id of the uncounted candidate -> its counted copy
    failures: list[str] = []

    def count(c: Candidate) -> Candidate | None:
        if id(c) in counted:
            return counted[id(c)]
        try:
            found = coster.count(calibrate(c.algo, c.skip, float_ops=c.float_ops).quantized.model, "int8")
        except EdgekitError as exc:
            log.warning("candidate %s %s not counted: %s", c.algo, c.describe_floats(), exc.message)
            failures.append(f"{c.purpose} {c.algo}{' ' + c.describe_floats() if c.describe_floats() else ''}: "
                            f"{exc.message}")
            return None
        done = replace(c, instructions=tuple(sorted(found.items())))
        candidates[next(i for i, x in enumerate(candidates) if x is c)] = done
        counted[id(c)] = done
        log.info("cost: %s %s %s: %s instructions on %s", c.purpose, c.algo, c.describe_floats() or "(all int8)",
                 f"{found.get(cpu, 0):,}", cpu)
        return done

    first = count(chosen)
    if first is None:
        return chosen, CostRecord(False, f"the accuracy choice could not be counted ({failures[0]})", cpu,
                                  plan.cost_candidates, fp32)
    present = sorted({layer.op_type for layer in layers} & set(cost_mod.OP_TYPE_KERNELS))
    op_types: dict[str, cost_mod.OpTypeCost] = {}
    note = ""
    if present and plan.cost_candidates < 2:
        note = "op types not profiled: [quantize] cost_candidates = 1 leaves no room to count an op-type candidate"
    elif present:
        try:
            op_costs = coster.op_costs(calibrate(chosen.algo, chosen.skip, float_ops=chosen.float_ops).quantized.model, model, present)
        except EdgekitError as exc:
            op_costs = {}
            note = f"op types not profiled ({exc.message})"
        wanted = cost_mod.float_op_types(op_costs, present)
        tried = {t for group in wanted for t in group}
        op_types = {t: cost_mod.OpTypeCost(int(op_costs[t]["int8"]), int(op_costs[t]["fp32"]), t in tried)
                    for t in present if t in op_costs}
        for group in wanted[:max(0, plan.cost_candidates - 1)]:
            run(chosen.algo, chosen.skip, "op-float", evaluator, group)
    else:
        note = f"no op type of {', '.join(cost_mod.OP_TYPE_KERNELS)} in the model: no op-type candidate"
    pool = cost_mod.cost_pool(candidates, plan.budget, first, plan.cost_candidates, len(evaluator.samples),
                              prefer="op-float")
    done = [count(c) if not c.instructions else c for c in pool]
    best = cost_mod.cheapest([c for c in done if c is not None], plan.budget, cpu, prefer=first) or first
    return best, CostRecord(
        True, "", cpu, plan.cost_candidates, fp32, best.counts, "instructions" if best is not first else "accuracy",
        (first.algo, first.skip, first.float_ops, first.counts[cpu]), op_types, note, tuple(failures),
        sum(1 for c in done if c is not None), round(time.monotonic() - start, 2))


__all__ = ["SearchPlan", "Candidate", "QuantSearchResult", "Calibrator", "ScoreStore", "quantize_to_budget", "choose",
           "cache_key", "score_key", "model_digest", "calibration_settings"]
