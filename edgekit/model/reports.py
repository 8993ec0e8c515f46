"""The reports the build's transforms and checks hand on, as frozen dataclasses: what a later stage reads is a typed
field, and the rest of a report (figures no stage reads, written into the manifest as they came) is kept frozen.

Each report is made from the dict its producer returns (`of`) and gives that dict back for the manifest (`to_json`):
the manifest's JSON is the same, key for key, and no stage indexes a report by key.

    OnnxImport   export/onnx_import.py: ONNX -> program feed and fetch names, the source file, the ONNX Runtime
                 check; judged on the data later (export/import_gate.py)
    Paddle3      export/pir.py: the PIR source, the Paddle 3 that describes and runs it, the translation's check
    Folding      export/fold.py: what was folded, its check, or why it was not used
    NmsDecision  lite/nms.py: an NMS op in the graph kept or cut off, and the measurements why
    Geometry     export/geometry.py: PaddleDetection's im_shape/scale_factor inputs bound into the graph, or why not
    Emulation    edgekit/verify/tier_c.py: what tier C ran (or why not), its figures and instruction counts
    Golden       edgekit/build/bundle.py: the golden vectors written into the bundle, their tolerances
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Sequence, Union

# A JSON value no stage reads, frozen: objects are read-only mappings, arrays tuples.
Frozen = Union[None, bool, int, float, str, Sequence["Frozen"], Mapping[str, "Frozen"]]
Written = Mapping[str, Frozen]        # a frozen JSON object written into the manifest as its producer made it

EMPTY: Written = MappingProxyType({})


def freeze(value):
    """`value` (JSON: dicts, lists, tuples, scalars) with every dict read-only and every list a tuple."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value):
    """The plain JSON (dicts and lists) of a frozen value: what the manifest writer takes."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def _names(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType({str(k): str(v) for k, v in value.items()})


def _rest(raw: Mapping, typed: Sequence[str]) -> Written:
    return freeze({k: v for k, v in raw.items() if k not in typed})


@dataclass(frozen=True)
class SourceFile:
    """A file the build started from, as the manifest's `source` names it."""

    path: str
    sha256: str | None


# ---------------------------------------------------------------- the model in


@dataclass(frozen=True)
class ImportJudgement:
    """The ONNX import judged on the build's data (export/import_gate.py `judge_on_data`)."""

    data_check: Written                 # ONNX Runtime vs the imported model, output by output
    task_metric: Written | None         # the task metric of both, with truth
    verdict: Written                    # what decided

    def to_json(self) -> dict:
        return {"data_check": thaw(self.data_check), "task_metric": thaw(self.task_metric),
                "verdict": thaw(self.verdict)}


@dataclass(frozen=True)
class OnnxImport:
    """An ONNX model imported by X2Paddle (export/onnx_import.py `import_onnx`)."""

    source: SourceFile
    feeds: Mapping[str, str]            # ONNX input name -> program feed (users name .npz arrays after the ONNX inputs)
    fetches: Mapping[str, str]          # ONNX output name -> program fetch
    check: Written                      # the ONNX Runtime check on seeded inputs
    details: Written = EMPTY            # source opset and producer, versions, rewrites, X2Paddle command, names, notes
    description: Written | None = None  # an inference.yml beside the .onnx, checked against the program
    judged: ImportJudgement | None = None

    TYPED = ("feeds", "fetches", "check", "description", "data_check", "task_metric", "verdict")

    @classmethod
    def of(cls, raw: Mapping) -> "OnnxImport":
        source = raw["source"]
        judged = ImportJudgement(freeze(raw["data_check"]), freeze(raw["task_metric"]), freeze(raw["verdict"])) \
            if "verdict" in raw else None
        return cls(SourceFile(source["path"], source["sha256"]), _names(raw["feeds"]), _names(raw["fetches"]),
                   freeze(raw["check"]), _rest(raw, cls.TYPED), freeze(raw.get("description")), judged)

    def with_description(self, description: Mapping) -> "OnnxImport":
        return _replace(self, description=freeze(description))

    def with_judgement(self, found: Mapping) -> "OnnxImport":
        """`judge_on_data`'s result: data_check, task_metric and verdict."""
        return _replace(self, judged=ImportJudgement(freeze(found["data_check"]), freeze(found["task_metric"]),
                                                     freeze(found["verdict"])))

    def to_json(self) -> dict:
        found = dict(thaw(self.details), feeds=dict(self.feeds), fetches=dict(self.fetches), check=thaw(self.check))
        if self.description is not None:
            found["description"] = thaw(self.description)
        if self.judged is not None:
            found.update(self.judged.to_json())
        return found


@dataclass(frozen=True)
class Paddle3:
    """A Paddle 3 PIR program translated into a legacy one (export/pir.py), and its check against Paddle 3."""

    source: Written                     # the PIR program and its parameters, with their hashes
    python: str                         # the Paddle 3 interpreter that describes and runs the source
    paddle: str                         # its Paddle version
    prefix: str                         # the staged source program Paddle 3 runs
    details: Written = EMPTY            # op counts, control-flow blocks, a factory's export check
    check: Written | None = None        # the translated program vs Paddle 3 on the evaluation set
    task_metric: Written | None = None  # both in the task's metric, with truth (set with `check`)
    description: Written | None = None  # an inference.yml beside the program, checked against it

    TYPED = ("source", "python", "paddle", "prefix", "check", "task_metric", "description")

    @classmethod
    def of(cls, raw: Mapping) -> "Paddle3":
        return cls(freeze(raw["source"]), raw["python"], raw["paddle"], raw["prefix"], _rest(raw, cls.TYPED),
                   freeze(raw.get("check")), freeze(raw.get("task_metric")), freeze(raw.get("description")))

    @property
    def source_file(self) -> SourceFile:
        return SourceFile(self.source["path"], self.source["sha256"])

    def with_description(self, description: Mapping) -> "Paddle3":
        return _replace(self, description=freeze(description))

    def with_check(self, check: Mapping, task_metric: Mapping | None) -> "Paddle3":
        return _replace(self, check=freeze(check), task_metric=freeze(task_metric))

    def to_json(self) -> dict:
        found = dict(thaw(self.details), source=thaw(self.source), python=self.python, paddle=self.paddle,
                     prefix=self.prefix)
        if self.check is not None:
            found.update(check=thaw(self.check), task_metric=thaw(self.task_metric))
        if self.description is not None:
            found["description"] = thaw(self.description)
        return found


# ---------------------------------------------------------------- transforms of the program


@dataclass(frozen=True)
class Folding:
    """What the fold stage folded (export/fold.py), its check, or why the folded graph was not used."""

    applied: bool
    reason: str | None = None           # why it was not applied
    check: Written | None = None        # the folded graph vs the unfolded one
    details: Written = EMPTY            # conv chains folded, activations, op counts before and after

    @classmethod
    def of(cls, raw: Mapping) -> "Folding":
        return cls(bool(raw["applied"]), raw.get("reason"), freeze(raw.get("check")),
                   _rest(raw, ("applied", "reason", "check")))

    def to_json(self) -> dict:
        found = dict(thaw(self.details), applied=self.applied)
        if self.reason is not None:
            found["reason"] = self.reason
        if self.check is not None:
            found["check"] = thaw(self.check)
        return found


@dataclass(frozen=True)
class NmsDecision:
    """An NMS op in the graph: kept (Lite runs it, and tiers A and C agree with Paddle) or cut off (lite/nms.py)."""

    kept: bool
    reason: str
    outputs: tuple[str, ...]            # the built program's fetches
    details: Written = EMPTY            # the op, its attributes, what was measured, the cut's check, the task options

    @classmethod
    def of(cls, raw: Mapping) -> "NmsDecision":
        return cls(bool(raw["kept"]), str(raw["reason"]), tuple(raw["outputs"]),
                   _rest(raw, ("kept", "reason", "outputs")))

    def to_json(self) -> dict:
        return dict(thaw(self.details), kept=self.kept, reason=self.reason, outputs=list(self.outputs))


@dataclass(frozen=True)
class Geometry:
    """PaddleDetection's im_shape/scale_factor inputs written into the graph (export/geometry.py), or why not."""

    bound: Written | None               # input -> the values written in; None: kept as inputs (`details` says why)
    details: Written = EMPTY            # the inputs, the image input, the check, or why they were not bound

    @classmethod
    def of(cls, raw: Mapping) -> "Geometry":
        return cls(freeze(raw["bound"]), _rest(raw, ("bound",)))

    def to_json(self) -> dict:
        return dict(thaw(self.details), bound=thaw(self.bound))


# ---------------------------------------------------------------- checks and outputs


@dataclass(frozen=True)
class Emulation:
    """Tier C: model.nb on Paddle-Lite's ARM kernels under qemu (edgekit/verify/tier_c.py), or why it did not run."""

    ran: bool
    reason: str | None = None           # why it did not run
    abi: str | None = None
    int8_kernels: str | None = None     # the kernel path(s) the runner reported
    matched: Written | None = None      # reduced precision: the task's golden_key figures (detections matched, class
    matched_key: str | None = None      #   maps compared per image) that set the golden floors
    details: Written = EMPTY            # runtime, qemu, CPU profile, timings, agreement with tier B, instruction counts

    TYPED = ("ran", "reason", "abi", "int8_kernels")

    @classmethod
    def of(cls, raw: Mapping, matched_key: str | None = None) -> "Emulation":
        key = matched_key if matched_key is not None and matched_key in raw else None
        return cls(bool(raw["ran"]), raw.get("reason"), raw.get("abi"), raw.get("int8_kernels"),
                   freeze(raw[key]) if key else None, key, _rest(raw, cls.TYPED + ((key,) if key else ())))

    def measured(self, key: str) -> dict | None:
        """The figures under the task's `golden_key`, when tier C measured them (a copy: golden.json takes it)."""
        return thaw(self.matched) if key == self.matched_key else None

    def to_json(self) -> dict:
        found = dict(thaw(self.details), ran=self.ran)
        for name in ("reason", "abi", "int8_kernels"):
            if getattr(self, name) is not None:
                found[name] = getattr(self, name)
        if self.matched_key is not None:
            found[self.matched_key] = thaw(self.matched)
        return found


@dataclass(frozen=True)
class Golden:
    """The golden vectors written into the bundle (edgekit/build/bundle.py), as golden.json and the manifest list them."""

    count: int                          # samples
    tolerances: Written | None          # what a device replaying them must meet
    widths: tuple[Written, ...] = ()    # a dynamic-width bundle's groups at other widths
    images: Written | None = None       # source images for the apps' equality tests
    details: Written = EMPTY            # the input and output files, the labels file

    TYPED = ("count", "tolerances", "widths", "images")

    @classmethod
    def of(cls, raw: Mapping) -> "Golden":
        return cls(int(raw["count"]), freeze(raw.get("tolerances")), freeze(raw.get("widths", ())),
                   freeze(raw.get("images")), _rest(raw, cls.TYPED))

    def to_json(self) -> dict:
        found = dict(thaw(self.details), count=self.count)
        if self.tolerances is not None:
            found["tolerances"] = thaw(self.tolerances)
        if self.widths:
            found["widths"] = thaw(self.widths)
        if self.images is not None:
            found["images"] = thaw(self.images)
        return found


def _replace(report, **changes):
    from dataclasses import replace

    return replace(report, **changes)
