"""manifest.json, typed: the one reader and writer of a bundle's manifest.

`edgekit.build.manifest.build_manifest` assembles the JSON (everything needed to reproduce and audit a build);
`write_manifest` checks it and writes it, and `Manifest.read` reads it back. Both check the whole schema once (a
crafted or edited manifest is a one-line BundleError, never a KeyError later) and hand readers a `Manifest` of
frozen dataclasses: the fields consumers act on (model, twin, golden groups and tolerances, files, parity, gates,
task, tier C with its instruction counts) are typed; the rest (sources, commands, timings, quantisation) is the
audit record, kept as written (`to_json`). No module outside edgekit/contracts indexes the raw JSON (a test greps).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from edgekit.contracts.files import (BOOL, COUNT, DIM, DTYPE, FILES, MANIFEST, NAME, NUMBER, OBJECT, PATH, PRECISION,
                                     REBUILD, STRING, TARGET, FileEntry, Json, MapOf, Nullable, TensorDecl,
                                     check_file_table, conform, json_text)
from edgekit.contracts.golden import GOLDEN, Golden
from edgekit.core import limits
from edgekit.core.errors import BundleError
from edgekit.core.tables import Precision, Target

SCHEMA = "edgekit.bundle/1"
REQUIRED_KEYS = ("model", "host_twin", "golden", "files", "parity", "config")

# ---------------------------------------------------------------- the schema (files.conform's specs)
# one inference's guest instructions: the total, its disjoint classes and the dot products among simd_fp (lite/icount.py)
INSTRUCTION_FIELDS = ("total", "simd_fp", "load_store", "branch", "other", "dot_product")
PER_INFERENCE = {name: COUNT for name in INSTRUCTION_FIELDS}
INSTRUCTION_COUNTS = {
    "ran": BOOL, "reason?": Nullable(STRING),      # with ran true, paths are there (checked in _emulation)
    "paths?": MapOf({"kernel_path?": Nullable(STRING), "per_inference": PER_INFERENCE, "first_inference": COUNT}),
    "latency_estimate?": Nullable({"cores": MapOf({"ms": NUMBER, "loo_error_pct": {"median": NUMBER, "max?": NUMBER},
                                                    "outside_fit?": [STRING]})}),
}
EMULATION = {"ran": BOOL, "reason?": STRING, "samples?": COUNT, "abi?": STRING, "runtime_version?": STRING,
             "int8_kernels?": STRING, "ms_per_sample_median?": Nullable(NUMBER),
             "instruction_counts?": Nullable(INSTRUCTION_COUNTS)}
CONTENTS = {
    "created_utc?": STRING,
    "model": {"name": NAME, "file": PATH, "target": TARGET, "abi?": STRING, "precision": PRECISION, "opt_version": STRING,
              "runtime_required": {"paddlelite": STRING, "opt_version": STRING},
              "inputs": [{"name": STRING, "shape": [DIM], "dtype": DTYPE}], "outputs": [STRING],
              "bytes?": COUNT, "program_bytes?": COUNT, "params_bytes?": COUNT,
              "nms?": Nullable({"op": STRING, "kept": BOOL, "reason": STRING})},
    "host_twin": {"file?": PATH, "bytes?": COUNT, "target?": STRING, "precision?": STRING},   # the apps do without it
    "golden": GOLDEN,
    "files": FILES,
    "parity": {"passed?": BOOL, "samples?": COUNT, "accuracy?": MapOf(NUMBER)},
    "config": {"gates?": {"twin_max_abs?": NUMBER, "twin_min_cosine?": NUMBER}, "fold?": BOOL},
    "task?": Nullable({"kind": STRING, "primary?": Nullable(STRING)}),
    "versions?": OBJECT,
    "emulation?": Nullable(EMULATION),
    "pruning?": Nullable(OBJECT),
}


# ---------------------------------------------------------------- the typed parts

@dataclass(frozen=True)
class NmsEntry:
    """An NMS op in the source graph (lite/nms.py): kept in the .nb or cut off for task.json's NMS, and why."""

    op: str
    kept: bool
    reason: str


@dataclass(frozen=True)
class ModelEntry:
    """The manifest's `model`: what runs on the device and what it takes."""

    name: str
    file: str
    target: Target
    precision: Precision
    opt_version: str
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[str, ...]
    abi: str | None = None
    paddlelite: str = ""                  # runtime_required.paddlelite: the runtime release an app must link
    nms: NmsEntry | None = None
    bytes: int | None = None              # the .nb's size, its program (graph) and params (weights) parts
    program_bytes: int | None = None
    params_bytes: int | None = None

    @property
    def nms_kept(self) -> bool:
        """The graph kept its NMS op: its outputs are rows of all samples + a count per sample (the runner's --rows,
        lite/nms.py). The one answer every reader of a bundle uses."""
        return self.nms is not None and self.nms.kept


@dataclass(frozen=True)
class HostTwin:
    """The FP32 x86 twin that runs the bundle on the host (`file` None: a bundle without one)."""

    file: str | None
    bytes: int | None
    target: str = Target.x86.value
    precision: str = Precision.fp32.value


@dataclass(frozen=True)
class Parity:
    """The build's parity verdict as readers show it (the full report stays in the audit record)."""

    passed: bool | None
    samples: int | None
    accuracy: Mapping[str, float]


@dataclass(frozen=True)
class Gates:
    """The twin's limits the build used (tier A), which a replay of the golden vectors on the host applies again."""

    twin_max_abs: float | None
    twin_min_cosine: float | None


@dataclass(frozen=True)
class TaskEntry:
    kind: str
    primary: str | None


@dataclass(frozen=True)
class PathCounts:
    """Tier C's instruction counts of one inference on one kernel path (edgekit/verify/counts.py)."""

    kernel_path: str | None
    per_inference: Mapping[str, int]       # INSTRUCTION_FIELDS: "total", the instruction classes, "dot_product"
    first_inference: int                   # the first run's total (Lite's one-time work included)

    @property
    def total(self) -> int:
        return self.per_inference["total"]


@dataclass(frozen=True)
class CoreEstimate:
    """A latency estimate from the counts for one published core: not a measurement."""

    ms: float
    median_error_pct: float               # leave-one-model-out |error| of the fit on the published table
    max_error_pct: float | None = None    # (bundles built before the max was recorded have none)
    outside_fit: tuple[str, ...] = ()     # class shares outside those the costs were fitted on: an extrapolation


@dataclass(frozen=True)
class InstructionCounts:
    ran: bool
    reason: str | None
    paths: Mapping[str, PathCounts]        # kernel path (CPU profile) -> counts
    latency: Mapping[str, CoreEstimate]    # core -> estimate; empty without one


@dataclass(frozen=True)
class Emulation:
    """Tier C as the build ran it (model.nb under qemu), or why it did not run."""

    ran: bool
    reason: str | None
    samples: int | None
    abi: str | None
    runtime_version: str | None
    int8_kernels: str | None
    ms_per_sample_median: float | None
    instruction_counts: InstructionCounts | None


@dataclass(frozen=True)
class Manifest:
    """A bundle's manifest.json, checked and typed."""

    model: ModelEntry
    host_twin: HostTwin
    golden: Golden
    files: Mapping[str, FileEntry]
    parity: Parity
    gates: Gates
    fold: bool | None                      # config.fold (None: not recorded)
    task: TaskEntry | None
    emulation: Emulation | None
    pruned: bool
    versions: Mapping[str, str | None]     # tool -> version (the string-valued entries)
    created_utc: str | None
    document: Mapping[str, Json] = field(repr=False, compare=False)     # the JSON as written: to_json()

    def to_json(self) -> dict[str, Json]:
        """The manifest as written (a copy): the whole audit record, for `edgekit inspect --json` and reports."""
        return copy.deepcopy(dict(self.document))

    @classmethod
    def read(cls, folder: Path) -> "Manifest":
        """The manifest of the bundle in `folder`, read within the JSON limits and checked field by field."""
        file = folder / MANIFEST
        if not file.is_file():
            raise BundleError(f"{folder} has no {MANIFEST}: not an edgekit bundle", "build one with `edgekit build`")
        return cls.of(limits.read_json(file, BundleError, "rebuild the bundle"), file)

    @classmethod
    def of(cls, raw: Json, file: Path) -> "Manifest":
        """`raw` (the parsed manifest.json, kept as the document: not to be changed after) checked against the
        schema, the golden vectors against the model, typed. A BundleError (one line) for the first thing that does
        not hold."""
        if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
            found = raw.get("schema") if isinstance(raw, dict) else type(raw).__name__
            raise BundleError(f"{file} has schema {found!r}, expected {SCHEMA}", "rebuild the bundle with this edgekit")
        missing = [key for key in REQUIRED_KEYS if not isinstance(raw.get(key), dict)]
        if missing:
            raise BundleError(f"{file} lacks {', '.join(missing)}: the bundle is incomplete or was edited",
                              "rebuild it with `edgekit build`")
        conform(raw, CONTENTS, file)
        model = _model(raw["model"], file)
        twin, config, parity = raw["host_twin"], raw["config"], raw["parity"]
        gates = config.get("gates", {})
        task = raw.get("task")
        versions = raw.get("versions") or {}
        return cls(
            model=model,
            host_twin=HostTwin(twin.get("file"), twin.get("bytes"), twin.get("target", Target.x86.value),
                               twin.get("precision", Precision.fp32.value)),
            golden=Golden.of(raw["golden"], model.inputs, model.outputs, file),
            files=check_file_table(raw["files"], file),
            parity=Parity(parity.get("passed"), parity.get("samples"), dict(parity.get("accuracy") or {})),
            gates=Gates(gates.get("twin_max_abs"), gates.get("twin_min_cosine")),
            fold=config.get("fold"),
            task=TaskEntry(task["kind"], task.get("primary")) if task else None,
            emulation=_emulation(raw.get("emulation"), file),
            pruned=bool(raw.get("pruning")),
            versions={k: v for k, v in versions.items() if v is None or isinstance(v, str)},
            created_utc=raw.get("created_utc"),
            document=raw)


def _model(m: Mapping[str, Json], file: Path) -> ModelEntry:
    if m["opt_version"] != m["runtime_required"]["opt_version"]:
        raise BundleError(f"{file}: model.opt_version {m['opt_version']!r} differs from runtime_required.opt_version "
                          f"{m['runtime_required']['opt_version']!r}", REBUILD)
    nms = m.get("nms")
    return ModelEntry(m["name"], m["file"], Target(m["target"]), Precision(m["precision"]), m["opt_version"],
                      tuple(TensorDecl(i["name"], tuple(i["shape"]), i["dtype"]) for i in m["inputs"]),
                      tuple(m["outputs"]), m.get("abi"), m["runtime_required"]["paddlelite"],
                      NmsEntry(nms["op"], nms["kept"], nms["reason"]) if nms else None,
                      m.get("bytes"), m.get("program_bytes"), m.get("params_bytes"))


def _emulation(e: Mapping[str, Json] | None, file: Path) -> Emulation | None:
    if e is None:
        return None
    counts = e.get("instruction_counts")
    typed = None
    if counts is not None:
        if counts["ran"] and not counts.get("paths"):
            raise BundleError(f"{file}: emulation.instruction_counts says it ran but has no paths", REBUILD)
        paths = {p: PathCounts(c.get("kernel_path"), {k: c["per_inference"][k] for k in INSTRUCTION_FIELDS},
                               c["first_inference"]) for p, c in (counts.get("paths") or {}).items()}
        cores = ((counts.get("latency_estimate") or {}).get("cores") or {})
        latency = {core: CoreEstimate(c["ms"], c["loo_error_pct"]["median"], c["loo_error_pct"].get("max"),
                                      tuple(c.get("outside_fit") or ())) for core, c in cores.items()}
        typed = InstructionCounts(counts["ran"], counts.get("reason"), paths, latency)
    return Emulation(e["ran"], e.get("reason"), e.get("samples"), e.get("abi"), e.get("runtime_version"),
                     e.get("int8_kernels"), e.get("ms_per_sample_median"), typed)


def write_manifest(folder: Path, manifest: Mapping[str, Json]) -> Manifest:
    """The final manifest (schema set) written into `folder`, checked first as `Manifest.read` checks what it reads
    (the typed manifest returned is the one a reader of the file gets)."""
    text = json_text(dict(manifest, schema=SCHEMA))
    typed = Manifest.of(json.loads(text), folder / MANIFEST)
    (folder / MANIFEST).write_text(text, encoding="utf-8")
    return typed
