"""The file contracts: every file edgekit writes for another program, and every file it reads back, in one module.

A bundle's `manifest.json`, `task.json`, `preprocess.json` and golden index are each read and
written here, through one versioned type each, and nowhere else (a test greps for their names
outside this module). What the environment configures (`EDGEKIT_LITE_ARM`, ...) is read here
too. The C++ core's twin readers are native/core/src/{preprocess,postprocess}.cc and
native/app/src/selftest.cc: they ignore keys they do not know, so a field added here is
backward compatible; a changed meaning takes a new schema version.

Readers check shapes and types before anything indexes the data: a crafted or edited file is a
one-line `BundleError`, never a KeyError or TypeError later.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from edgekit.core import limits
from edgekit.core.errors import BundleError, ConfigError
from edgekit.core.tables import Precision, Target

# ---------------------------------------------------------------- the files of a bundle
MANIFEST = "manifest.json"
TASK = "task.json"
PREPROCESS = "preprocess.json"
GOLDEN_DIR = "golden"
GOLDEN_INDEX = "golden.json"          # inside GOLDEN_DIR
LABELS = "labels.txt"
SCHEMA = "edgekit.bundle/1"
TASK_SCHEMA = "edgekit.task/1"
PREPROCESS_SCHEMA = "edgekit.preprocess/1"
REBUILD = "rebuild the bundle with `edgekit build`"


def write_json(path: Path, value: object, *, indent: int = 2, ascii_only: bool = True) -> None:
    """The one serialisation of edgekit's JSON files: sorted keys, a final newline, UTF-8 (same input, same bytes).
    Non-finite numbers (an exact match's infinite SNR) are written as null: JSON has no Infinity or NaN, and the
    C++ reader, like every strict one, refuses them."""
    path.write_text(json.dumps(_finite(value), indent=indent, sort_keys=True, ensure_ascii=ascii_only, allow_nan=False)
                    + "\n", encoding="utf-8")


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _schema_ok(raw: dict, schema: str, file: Path) -> None:
    """A file without a schema is version 1 (bundles written before it was recorded); another version is refused."""
    found = raw.get("schema", schema)
    if found != schema:
        raise BundleError(f"{file} has schema {found!r}; this edgekit reads {schema}",
                          "rebuild the bundle with this edgekit, or use the edgekit that wrote it")


# ---------------------------------------------------------------- task.json

@dataclass(frozen=True)
class TaskFile:
    """What `edgekit run` and the apps need to post-process outputs: the task kind, its primary metric, options."""

    kind: str
    primary: str | None
    options: Mapping

    @classmethod
    def of(cls, task) -> "TaskFile":
        return cls(task.kind.value, task.primary, task.options())

    def write(self, folder: Path) -> None:
        write_json(folder / TASK, {"schema": TASK_SCHEMA, "kind": self.kind, "primary": self.primary,
                                   "options": dict(self.options)}, indent=1, ascii_only=False)

    @classmethod
    def read(cls, folder: Path) -> "TaskFile | None":
        """The bundle's task, or None when it has none (built without labels or truth)."""
        file = folder / TASK
        if not file.is_file():
            return None
        raw = limits.read_json(file, BundleError, REBUILD)
        if not isinstance(raw, dict) or not isinstance(raw.get("kind"), str) \
                or not isinstance(raw.get("options", {}), dict) or not isinstance(raw.get("primary"), (str, type(None))):
            raise BundleError(f"{file} is not a task.json (an object with a kind and an options object)", REBUILD)
        _schema_ok(raw, TASK_SCHEMA, file)
        return cls(raw["kind"], raw.get("primary"), raw.get("options", {}))


# ---------------------------------------------------------------- preprocess.json

@dataclass(frozen=True)
class PreprocessFile:
    """How an image becomes the model's input (edgekit.contracts.preprocess.PreprocessSpec), or None for a tensor-data build."""

    inputs: tuple[str, ...]
    spec: object | None          # edgekit.contracts.preprocess.PreprocessSpec

    def write(self, folder: Path) -> None:
        self.write_file(folder / PREPROCESS)

    def write_file(self, file: Path) -> None:
        write_json(file, {"schema": PREPROCESS_SCHEMA, "inputs": list(self.inputs),
                          "preprocess": self.spec.to_json() if self.spec is not None else None})

    @classmethod
    def read(cls, folder: Path) -> "PreprocessFile":
        """The bundle's preprocessing; a bundle without the file has none (spec None)."""
        from edgekit.contracts.preprocess import PreprocessSpec

        file = folder / PREPROCESS
        if not file.is_file():
            return cls((), None)
        raw = limits.read_json(file, BundleError, REBUILD)
        if not isinstance(raw, dict) or not isinstance(raw.get("preprocess", {}), (dict, type(None))) \
                or not isinstance(raw.get("inputs", []), list):
            raise BundleError(f"{file} is not a preprocess.json (an object with a preprocess object or null)", REBUILD)
        _schema_ok(raw, PREPROCESS_SCHEMA, file)
        spec = raw.get("preprocess")
        # "order" documents the steps for the C++ core; PreprocessSpec's order is fixed
        parsed = PreprocessSpec.from_mapping({k: v for k, v in spec.items() if k != "order"}) if spec else None
        return cls(tuple(str(name) for name in raw.get("inputs", [])), parsed)


# ---------------------------------------------------------------- the golden index

def write_golden_index(folder: Path, entry: Mapping) -> None:
    """golden/golden.json: the golden vectors and images the device suite and the apps' self-tests replay (the
    manifest's `golden` holds the same entry)."""
    write_json(folder / GOLDEN_INDEX, dict(entry), ascii_only=False)


# ---------------------------------------------------------------- manifest.json

def write_manifest(folder: Path, manifest: Mapping) -> dict:
    """The final manifest (schema set), written into `folder`; returns what was written."""
    manifest = dict(manifest, schema=SCHEMA)
    write_json(folder / MANIFEST, manifest)
    return manifest


def read_manifest(folder: Path) -> dict:
    """The manifest of the bundle in `folder`, read within the JSON limits, with the fields every reader needs."""
    file = folder / MANIFEST
    if not file.is_file():
        raise BundleError(f"{folder} has no {MANIFEST}: not an edgekit bundle", "build one with `edgekit build`")
    manifest = limits.read_json(file, BundleError, "rebuild the bundle")
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        found = manifest.get("schema") if isinstance(manifest, dict) else type(manifest).__name__
        raise BundleError(f"{file} has schema {found!r}, expected {SCHEMA}", "rebuild the bundle with this edgekit")
    missing = [key for key in REQUIRED_KEYS if not isinstance(manifest.get(key), dict)]
    if missing:
        raise BundleError(f"{file} lacks {', '.join(missing)}: the bundle is incomplete or was edited",
                          "rebuild it with `edgekit build`")
    conform(manifest, LOADED, file)
    return manifest


@dataclass(frozen=True)
class TensorDecl:
    name: str
    shape: tuple[int, ...]         # -1 = any
    dtype: str

    @property
    def text(self) -> str:
        """name:dims:dtype, as the runner's --input takes it."""
        return f"{self.name}:{'x'.join(str(d) for d in self.shape)}:{self.dtype}"


@dataclass(frozen=True)
class ModelEntry:
    """The manifest's `model`, typed: what runs on the device and what it takes."""

    name: str
    file: str
    target: Target
    precision: Precision
    opt_version: str
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[str, ...]

    @classmethod
    def of(cls, manifest: Mapping) -> "ModelEntry":
        """From a manifest that passed `check_contents` (bundle.load + verified): the types hold."""
        m = manifest["model"]
        return cls(m["name"], m["file"], Target(m["target"]), Precision(m["precision"]), m["opt_version"],
                   tuple(TensorDecl(i["name"], tuple(i["shape"]), i["dtype"]) for i in m["inputs"]), tuple(m["outputs"]))


@dataclass(frozen=True)
class Gates:
    """The twin's limits the build used (tier A), which a replay of the golden vectors on the host applies again."""

    twin_max_abs: float | None
    twin_min_cosine: float | None

    @classmethod
    def of(cls, manifest: Mapping) -> "Gates":
        gates = manifest["config"].get("gates", {})
        return cls(gates.get("twin_max_abs"), gates.get("twin_min_cosine"))


# ---------------------------------------------------------------- settings from the environment

LITE_ARM_ENV = "EDGEKIT_LITE_ARM"


def lite_arm_root(explicit: Path | None = None, environ: Mapping[str, str] | None = None) -> Path | None:
    """Paddle-Lite's ARM Linux runtime: `--lite-arm` when given, else EDGEKIT_LITE_ARM, else None; absolute."""
    environ = os.environ if environ is None else environ
    root = explicit or (Path(environ[LITE_ARM_ENV]) if environ.get(LITE_ARM_ENV) else None)
    return root.expanduser().absolute() if root is not None else None


# ---------------------------------------------------------------- the manifest's schema
# A spec is (description, test), a dict (an object; a key ending in "?" may be absent), [spec] (a list of spec),
# MapOf(spec) (an object of any keys) or Nullable(spec). Fields not named here are not read and may be anything.

REQUIRED_KEYS = ("model", "host_twin", "golden", "files", "parity", "config")
# a model name becomes a folder name (build output, asset sets): one rule, checked wherever a name is read
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
NAME_TEXT = "1-64 letters, digits, '_', '-' or '.', starting with a letter or digit"


def safe_name(value: object) -> bool:
    """What a model, cell, setting or bundle name may be: the one rule (it becomes a folder name)."""
    return isinstance(value, str) and NAME_RULE.fullmatch(value) is not None


def check_name(value: object, what: str, error: type = ConfigError, hint: str = "") -> str:
    """`value` when it is a usable name (safe_name), else `error` saying so: every reader of a name calls this."""
    if not safe_name(value):
        shown = repr(value) if len(repr(value)) <= 70 else repr(value)[:67] + "..."
        raise error(f"{what} {shown} is not usable as a folder name", hint or f"use {NAME_TEXT}")
    return value


def check_inside(root: Path, path: Path, what: str, error: type = ConfigError) -> Path:
    """`path` (built from `root` and names) when it stays inside `root` once links and '..' are resolved; else
    `error`. Called before anything is written to or removed from a path built from a name."""
    base, real = os.path.realpath(root), os.path.realpath(path)
    if os.path.commonpath([base, real]) != base:
        raise error(f"{what} {path} resolves to {real}, outside {root}",
                    f"use names of {NAME_TEXT}, and an output folder without links leading out of it")
    return Path(path)


def safe_relative(value: object) -> bool:
    """A path inside the bundle: relative, POSIX, no empty, '.' or '..' parts, no backslash or NUL."""
    if not isinstance(value, str) or not value or value.startswith("/") or "\\" in value or "\0" in value:
        return False
    # longer names than file systems take (255 bytes a part) would be an OSError, not a missing file
    return len(value) <= 1024 and all(part not in ("", ".", "..") and len(part.encode()) <= 255
                                      for part in value.split("/"))


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


DTYPES = ("float32", "float16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool")
_STR = ("a string", lambda v: isinstance(v, str))
_NAME = (f"a name of {NAME_TEXT}", safe_name)
_PATH = ("a relative path inside the bundle (no '..', not absolute)", safe_relative)
_COUNT = ("a non-negative integer", lambda v: _integer(v) and v >= 0)
_DIM = ("-1 or a positive integer", lambda v: _integer(v) and (v == -1 or v > 0))
_NUMBER = ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
_BOOL = ("true or false", lambda v: isinstance(v, bool))
_OBJECT = ("an object", lambda v: isinstance(v, dict))
_DTYPE = (f"one of {', '.join(DTYPES)}", lambda v: isinstance(v, str) and v in DTYPES)
_TARGET = (f"one of {', '.join(t.value for t in Target)}", lambda v: isinstance(v, str) and v in {t.value for t in Target})
_PRECISION = (f"one of {', '.join(p.value for p in Precision)}", lambda v: isinstance(v, str) and v in {p.value for p in Precision})
_SHA256 = ("64 lowercase hex digits", lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) is not None)


@dataclass(frozen=True)
class MapOf:
    value: object


@dataclass(frozen=True)
class Nullable:
    value: object


_GOLDEN_TENSOR = {"name": _STR, "file": _PATH, "shape": [_COUNT], "dtype": _DTYPE}
_WIDTH = ("a positive integer", lambda v: _integer(v) and v > 0)
# a dynamic-width bundle's golden vectors at another tensor width (preprocess width_mode = "dynamic")
_GOLDEN_GROUP = {"width": _WIDTH, "inputs": [_GOLDEN_TENSOR], "outputs": [_GOLDEN_TENSOR], "count": _COUNT}
FILES = MapOf({"sha256": _SHA256, "bytes": _COUNT})
LOADED = {"model": {"file": _PATH}, "files": FILES}
# tier C's instruction counts (edgekit/costs.py, lite/icount.py) as `inspect` and `bench` read them; with ran true,
# the paths are there (check_counts)
_PER_INFERENCE = {"total": _COUNT, **{k: _COUNT for k in ("simd_fp", "load_store", "branch", "other", "dot_product")}}
COUNTS = {"ran": _BOOL, "reason?": Nullable(_STR),
          "paths?": MapOf({"per_inference": _PER_INFERENCE, "first_inference": _COUNT, "kernel_path?": Nullable(_STR)}),
          "latency_estimate?": Nullable({"cores": MapOf({"ms": _NUMBER, "loo_error_pct": {"median": _NUMBER}})})}
CONTENTS = {
    "created_utc?": _STR,
    "model": {"name": _NAME, "file": _PATH, "target": _TARGET, "abi?": _STR, "precision": _PRECISION, "opt_version": _STR,
              "runtime_required": {"paddlelite": _STR, "opt_version": _STR},
              "inputs": [{"name": _STR, "shape": [_DIM], "dtype": _DTYPE}], "outputs": [_STR],
              "nms?": Nullable({"op": _STR, "kept": _BOOL, "reason": _STR})},
    "host_twin": {"file?": _PATH, "bytes?": _COUNT},        # what runs on the host; the apps do without it
    "golden": {"inputs": [_GOLDEN_TENSOR], "outputs": [_GOLDEN_TENSOR], "count": _COUNT, "labels?": _PATH,
               "widths?": [_GOLDEN_GROUP], "tolerances": {"min_cosine": _NUMBER, "max_abs?": Nullable(_NUMBER)}},
    "parity": {"passed?": _BOOL, "samples?": _COUNT, "accuracy?": MapOf(_NUMBER)},
    "config": {"gates?": {"twin_max_abs?": _NUMBER, "twin_min_cosine?": _NUMBER}},
    "task?": Nullable({"kind": _STR}),
    "versions?": _OBJECT,
    "emulation?": Nullable({"ran?": _BOOL, "instruction_counts?": Nullable(COUNTS)}),
}


def conform(value: object, spec: object, file: Path, where: str = "") -> None:
    """Raise a one-line BundleError at the first field of `value` that does not match `spec` (recursion follows the
    spec, whose depth is fixed, never the data)."""
    def wrong(expected: str) -> BundleError:
        shown = json.dumps(value, default=str)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return BundleError(f"{file}: {where or 'the manifest'} is {shown}, expected {expected}",
                           "the bundle is corrupt or was edited; rebuild it with `edgekit build`")

    if isinstance(spec, Nullable):
        if value is not None:
            conform(value, spec.value, file, where)
    elif isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise wrong("an object")
        for key, item in value.items():
            if spec is FILES and not safe_relative(key):
                raise BundleError(f"{file}: files lists {key!r}, which is not a relative path inside the bundle",
                                  "the bundle is corrupt or was edited; rebuild it with `edgekit build`")
            conform(item, spec.value, file, f"{where}[{json.dumps(key)}]")
    elif isinstance(spec, dict):
        if not isinstance(value, dict):
            raise wrong("an object")
        for key, sub in spec.items():
            name = key.rstrip("?")
            if name not in value:
                if key.endswith("?"):
                    continue
                raise BundleError(f"{file}: {where + '.' if where else ''}{name} is missing",
                                  "the bundle is incomplete or was edited; rebuild it with `edgekit build`")
            conform(value[name], sub, file, f"{where}.{name}" if where else name)
    elif isinstance(spec, list):
        if not isinstance(value, list):
            raise wrong("a list")
        for i, item in enumerate(value):
            conform(item, spec[0], file, f"{where}[{i}]")
    else:
        description, test = spec
        if not test(value):
            raise wrong(description)


def check_file_table(table: object, file: Path) -> None:
    """A file table (manifest.json's, assets.json's): relative paths inside the folder -> sha256 and size."""
    conform(table, FILES, file, "files")


def check_contents(manifest: Mapping, file: Path) -> None:
    """What every consumer of a verified bundle reads: the manifest's fields, typed, and golden vectors that fit
    the model. A BundleError (one line) for the first thing that does not hold."""
    m = manifest
    conform(m, CONTENTS, file)
    counts = (m.get("emulation") or {}).get("instruction_counts")
    if counts and counts["ran"] and not counts.get("paths"):
        raise BundleError(f"{file}: emulation.instruction_counts says it ran but has no paths", REBUILD)
    model, golden = m["model"], m["golden"]
    if model["opt_version"] != model["runtime_required"]["opt_version"]:
        raise BundleError(f"{file}: model.opt_version {model['opt_version']!r} differs from runtime_required.opt_version "
                          f"{model['runtime_required']['opt_version']!r}", REBUILD)
    declared = {i["name"]: i for i in model["inputs"]}
    names = [g["name"] for g in golden["inputs"]]
    if len(declared) != len(model["inputs"]) or sorted(names) != sorted(declared):
        raise BundleError(f"{file}: golden inputs {names} are not the model's inputs {list(declared)}", REBUILD)
    for g in golden["inputs"]:
        want = declared[g["name"]]
        fits = len(g["shape"]) == len(want["shape"]) > 0 and g["shape"][0] == golden["count"] and all(
            w in (-1, d) for w, d in zip(want["shape"][1:], g["shape"][1:]))
        if g["dtype"] != want["dtype"] or not fits:
            raise BundleError(f"{file}: golden input {g['name']!r} is {g['dtype']} {g['shape']} for {golden['count']} "
                              f"samples; the model takes {want['dtype']} {want['shape']} (-1 = any)", REBUILD)
    outputs = [o["name"] for o in golden["outputs"]]
    if outputs != model["outputs"]:
        raise BundleError(f"{file}: golden outputs {outputs} are not the model's outputs {model['outputs']}", REBUILD)
    widths = [g["width"] for g in golden.get("widths", [])]
    if len(set(widths)) != len(widths):
        raise BundleError(f"{file}: golden.widths lists width {widths} more than once", REBUILD)
    for group in golden.get("widths", []):
        _width_axis(group, golden, model, file)
    pushed = [t["file"].rsplit("/", 1)[-1] for g in [golden, *golden.get("widths", [])] for t in g["inputs"]]
    if len(set(pushed)) != len(pushed):       # the device suite pushes every golden input into one folder
        raise BundleError(f"{file}: golden input files {pushed} share a file name", REBUILD)


@dataclass(frozen=True)
class GoldenGroup:
    """One set of golden vectors: the main one (`width` None: the evaluation tensors' own shape) or one of a
    dynamic-width bundle's `golden.widths`, whose inputs differ from the main ones only in axis `axis` (= width)."""

    width: int | None
    axis: int | None
    count: int
    inputs: tuple[Mapping, ...]          # {"name", "file", "shape", "dtype"}, as the manifest lists them
    outputs: tuple[Mapping, ...]

    @property
    def label(self) -> str:
        """What a replay's lines add for this group ("" for the main one)."""
        return "" if self.width is None else f" at width {self.width}"

    def expect(self, declared: Sequence[TensorDecl]) -> tuple[TensorDecl, ...]:
        """The model's declared inputs with this group's width axis free (-1): what a runner must accept for it."""
        if self.axis is None:
            return tuple(declared)
        return tuple(TensorDecl(d.name, d.shape[:self.axis] + (-1,) + d.shape[self.axis + 1:], d.dtype)
                     for d in declared)

    @classmethod
    def all_of(cls, manifest: Mapping) -> "tuple[GoldenGroup, ...]":
        """From a manifest that passed `check_contents`: the main group, then one per `golden.widths` entry."""
        golden, model = manifest["golden"], manifest["model"]
        main = cls(None, None, golden["count"], tuple(golden["inputs"]), tuple(golden["outputs"]))
        return (main,) + tuple(cls(g["width"], _width_axis(g, golden, model, Path(MANIFEST)), g["count"],
                                   tuple(g["inputs"]), tuple(g["outputs"])) for g in golden.get("widths", []))


def _width_axis(group: Mapping, golden: Mapping, model: Mapping, file: Path) -> int:
    """The axis where a `golden.widths` group's inputs hold its width: each input is the main golden input's shape
    but for the sample count and that one axis, of the model's dtype. A BundleError (one line) otherwise."""
    where = f"{file}: golden group at width {group['width']}"
    names = [g["name"] for g in group["inputs"]]
    main = {g["name"]: g for g in golden["inputs"]}
    if sorted(names) != sorted(main) or len(set(names)) != len(names):
        raise BundleError(f"{where}: inputs {names} are not the model's inputs {sorted(main)}", REBUILD)
    if [o["name"] for o in group["outputs"]] != model["outputs"]:
        raise BundleError(f"{where}: outputs {[o['name'] for o in group['outputs']]} are not the model's outputs "
                          f"{model['outputs']}", REBUILD)
    axes = set()
    for g in group["inputs"]:
        want = main[g["name"]]["shape"]
        other = [a for a in range(1, len(want)) if len(g["shape"]) == len(want) and g["shape"][a] != want[a]]
        if (g["dtype"] != main[g["name"]]["dtype"] or len(g["shape"]) != len(want) or g["shape"][0] != group["count"]
                or group["count"] == 0 or len(other) != 1 or g["shape"][other[0]] != group["width"]):
            raise BundleError(f"{where}: input {g['name']!r} is {g['dtype']} {g['shape']} for {group['count']} samples; "
                              f"it must be the golden input's {main[g['name']]['dtype']} {want} with one axis "
                              f"{group['width']} wide", REBUILD)
        axes.add(other[0])
    if len(axes) != 1:
        raise BundleError(f"{where}: its inputs hold the width in different axes {sorted(axes)}", REBUILD)
    return axes.pop()


# ---------------------------------------------------------------- the runner's record and exit codes
# edgekit-lite-run (native/runner) writes OUT/record.json and exits with one of these codes (native/README.md); the
# tier-C emulation (lite/native.py) and the device suite (edgekit/device/session.py) read both through this.

RUNNER_RECORD = "record.json"
RUNNER_SCHEMA = "edgekit.runner/1"
RUNNER_ERROR_MARK = "edgekit-lite-run: error: "     # the runner's one stderr line when it fails


def runner_errors() -> dict:
    """The runner's exit code -> the error a caller gets (codes 1..7 of native/README.md)."""
    from edgekit.core.errors import DataError, InputModelError, ToolError

    return {
        1: ToolError,          # internal error in the runner
        2: ToolError,          # usage: edgekit built a bad command line
        3: InputModelError,    # unreadable, truncated or foreign .nb; Lite could not load it
        4: InputModelError,    # the .nb's opt version differs from the runtime's
        5: DataError,          # input count, names, shapes or dtypes do not fit the model
        6: ToolError,          # Lite failed while running
        7: ToolError,          # outputs or record could not be written
    }


def read_runner_record(folder: Path) -> dict | None:
    """The runner's record in `folder` (its --out), or None when it wrote none or not a JSON object (killed)."""
    from edgekit.core.errors import ToolError

    file = folder / RUNNER_RECORD
    if not file.is_file():
        return None
    try:
        record = limits.read_json(file, ToolError, "rebuild native/ and rerun")
    except ToolError:
        return None
    return record if isinstance(record, dict) else None


def runner_finished(record: Mapping | None) -> bool:
    """A record of this runner version that says it finished."""
    return record is not None and record.get("schema") == RUNNER_SCHEMA and record.get("status", "ok") == "ok"


def runner_error_line(stderr: str) -> tuple[str, str]:
    """(message, fix) from the runner's last error line on stderr, ("", "") without one."""
    line = next((ln for ln in reversed(stderr.splitlines()) if RUNNER_ERROR_MARK in ln), "")
    message, _, fix = line.partition(RUNNER_ERROR_MARK)[2].partition("; ")
    return message, fix
