"""Build matrices: models × targets × precisions × settings, each cell an ordinary `edgekit build` in its own process.

A matrix file (TOML) lists the models and what to build them as:

    targets = ["arm64", "armv7"]           # every model, unless a [[model]] names its own
    precisions = ["fp32", "int8"]
    timeout = 3600                         # seconds per cell
    [[model]]
    name = "digits"                        # the bundle's --name; config/model/calib/eval are build's flags,
    config = "digits/edgekit.toml"         # paths relative to the matrix file
    args = ["--no-emulation"]              # any other build flags
    [[setting]]                            # optional: named sets of extra flags, one bundle folder each
    name = "no-fold"
    args = ["--no-fold"]

Each cell runs `edgekit build` as a child (edgekit.core.proc) and publishes its bundle the way
a build always does (staged, then one rename), into OUT/bundles/[SETTING/]NAME/TARGET-PRECISION.
Its row (OUT/cells/*.json) holds the cell's key: a digest of everything its result depends
on (the flags, the content of every file they or the config name, the factory's source, the
tool versions, edgekit's own source, the EDGEKIT_* settings a build reads). A cell whose key,
row and bundle are unchanged and verify is a cache hit. The table is OUT/matrix.json and
OUT/matrix.md. Cells run on any executor (edgekit/core/executors.py); a killed build is retried.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from edgekit.contracts import files as contracts
from edgekit.core import atomic, proc, versions
from edgekit.build.config import ENV_KEYS
from edgekit.contracts.manifest import Manifest
from edgekit.contracts.settings import load_toml
from edgekit.core.errors import ConfigError
from edgekit.core.executors import Executor, Resources, Task, WorkerLost
from edgekit.core.tables import Precision, Target

log = logging.getLogger(__name__)

SCHEMA = "edgekit.matrix/1"
KEY_FORMAT = "edgekit-matrix-key/1"
STAGING_PREFIX = ".edgekit-staging-"           # pipeline.STAGING_PREFIX: what a killed build leaves behind
FACTORY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
TOP_KEYS = {"targets", "precisions", "timeout", "model", "setting"}
MODEL_KEYS = {"name", "config", "model", "calib", "eval", "args", "targets", "precisions"}
SETTING_KEYS = {"name", "args"}
CLI = ("-c", "from edgekit.cli import main; main()")
# what a cell's build reads from the environment besides ENV_KEYS (the output folder is the matrix's own)
EXTRA_ENV = ("EDGEKIT_PADDLE3_PYTHON", "EDGEKIT_NO_PADDLE3")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
SOURCE_PACKAGES = ("edgekit", "edgekit.export", "edgekit.quantize", "edgekit.lite", "edgekit.prune")
SOURCE_SUFFIXES = {".py", ".toml", ".txt", ".json", ".cpp", ".cc", ".h", ".hpp", ".cmake", ".pdparams"}


@dataclass(frozen=True)
class ModelEntry:
    name: str
    config: Path | None = None
    model: str | None = None          # a path (absolute) or package.module:factory
    calib: Path | None = None
    eval: Path | None = None
    args: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Setting:
    name: str = "default"
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cell:
    model: ModelEntry
    target: str
    precision: str
    setting: Setting

    @property
    def id(self) -> str:
        base = f"{self.model.name}/{self.target}-{self.precision}"
        return base if self.setting.name == "default" else f"{self.setting.name}/{base}"

    def out_dir(self, root: Path) -> Path:
        bundles = root / "bundles"
        return bundles if self.setting.name == "default" else bundles / self.setting.name

    def bundle_dir(self, root: Path) -> Path:
        return self.out_dir(root) / self.model.name / f"{self.target}-{self.precision}"

    def flags(self) -> list[str]:
        """build's flags for this cell, apart from --out (the same for every executor, so the manifests are)."""
        m = self.model
        flags = ["build", "--target", self.target, "--quant", self.precision, "--name", m.name, "--quiet"]
        for option, value in (("--config", m.config), ("--model", m.model), ("--calib", m.calib), ("--eval", m.eval)):
            if value is not None:
                flags += [option, str(value)]
        return flags + list(m.args) + list(self.setting.args)


@dataclass(frozen=True)
class Matrix:
    cells: tuple[Cell, ...]
    source: Path
    timeout: float = 3600.0


# ---------------------------------------------------------------- reading the matrix file


def _strings(value, what: str, where: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{what} in {where} is not a list of strings", f'write it as {what} = ["..."]')
    return tuple(value)


def _checked(values: Sequence[str], kind, what: str, where: Path) -> tuple[str, ...]:
    known = [k.value for k in kind]
    for v in values:
        if v not in known:
            raise ConfigError(f"{what} {v!r} in {where} is not supported", f"use one of {', '.join(known)}")
    return tuple(values)


def _path_or_factory(value, base: Path) -> str:
    return value if FACTORY.fullmatch(value) else str((base / value).expanduser().absolute())


def load(path: Path) -> Matrix:
    """Read and validate a matrix file; every cell is known before anything runs."""
    path = Path(path).absolute()
    raw = load_toml(path)
    base = path.parent
    unknown = set(raw) - TOP_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}", f"use {', '.join(sorted(TOP_KEYS))}")
    targets = _checked(_strings(raw.get("targets", ["arm64"]), "targets", path), Target, "target", path)
    precisions = _checked(_strings(raw.get("precisions", ["fp32"]), "precisions", path), Precision, "precision", path)
    models_raw = raw.get("model")
    if not isinstance(models_raw, list) or not models_raw:
        raise ConfigError(f"{path} lists no models", 'add one or more [[model]] tables with a name = "..."')
    models, names = [], set()
    for table in models_raw:
        unknown = set(table) - MODEL_KEYS
        name = table.get("name")
        if unknown:
            raise ConfigError(f"{path}: a [[model]] has unknown key(s) {', '.join(sorted(unknown))}",
                              f"give each a name and only {', '.join(sorted(MODEL_KEYS))}")
        contracts.check_name(name, f"{path}: [[model]] name", hint=f'write name = "..." of {contracts.NAME_TEXT}')
        if name in names:
            raise ConfigError(f"{path}: model name {name!r} appears twice", "give every [[model]] its own name")
        names.add(name)
        files = {k: (base / str(table[k])).expanduser().absolute() for k in ("config", "calib", "eval") if k in table}
        models.append(ModelEntry(
            name, files.get("config"), _path_or_factory(str(table["model"]), base) if "model" in table else None,
            files.get("calib"), files.get("eval"), _strings(table.get("args", []), "args", path),
            _checked(_strings(table["targets"], "targets", path), Target, "target", path) if "targets" in table else (),
            _checked(_strings(table["precisions"], "precisions", path), Precision, "precision", path)
            if "precisions" in table else ()))
    settings = [Setting(str(s.get("name", "")), _strings(s.get("args", []), "args", path))
                for s in raw.get("setting", [])] or [Setting()]
    for s, table in zip(settings, raw.get("setting", [])):
        if set(table) - SETTING_KEYS:
            raise ConfigError(f"{path}: a [[setting]] needs a name and only args",
                              'write [[setting]] name = "..." args = ["--flag"]')
        contracts.check_name(s.name, f"{path}: [[setting]] name", hint=f'write name = "..." of {contracts.NAME_TEXT}')
    if len({s.name for s in settings}) != len(settings):
        raise ConfigError(f"{path}: two [[setting]] tables share a name", "give every setting its own name")
    timeout = raw.get("timeout", 3600)
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ConfigError(f"timeout in {path} is not a positive number of seconds", "write e.g. timeout = 3600")
    cells = tuple(Cell(m, t, p, s) for m in models for t in (m.targets or targets)
                  for p in (m.precisions or precisions) for s in settings)
    return Matrix(cells, path, float(timeout))


# ---------------------------------------------------------------- cache keys


def digest_path(path: Path) -> str:
    """A file's sha256, or a folder's: every file below it by relative path and content."""
    path = Path(path)
    if path.is_file():
        return _file_sha256(path)
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(item.relative_to(path).as_posix().encode() + b"\0" + _file_sha256(item).encode() + b"\n")
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _named_paths(value, base: Path) -> list[Path]:
    """Every string in a config table that names an existing file or folder (relative to the config's folder)."""
    if isinstance(value, Mapping):
        return [p for v in value.values() for p in _named_paths(v, base)]
    if isinstance(value, list):
        return [p for v in value for p in _named_paths(v, base)]
    if isinstance(value, str) and value and not FACTORY.fullmatch(value) and "\n" not in value:
        candidate = (base / value).expanduser()
        try:
            return [candidate.absolute()] if candidate.exists() else []
        except OSError:
            return []
    return []


def _factories(value) -> list[str]:
    if isinstance(value, Mapping):
        return [f for v in value.values() for f in _factories(v)]
    if isinstance(value, list):
        return [f for v in value for f in _factories(v)]
    return [value] if isinstance(value, str) and FACTORY.fullmatch(value) else []


def _factory_file(spec: str) -> str | None:
    try:
        found = importlib.util.find_spec(spec.split(":")[0])
    except (ImportError, ValueError):
        return None
    origin = found.origin if found is not None else None
    return origin if origin and Path(origin).is_file() else None


def source_digest() -> str:
    """edgekit's own code and data (the build's stages, the examples, native/'s sources): any change re-keys."""
    digest = hashlib.sha256()
    roots = []
    for name in SOURCE_PACKAGES:
        spec = importlib.util.find_spec(name)
        roots += list(spec.submodule_search_locations or []) if spec is not None else []
    native = Path(roots[0]).parent / "native" if roots else None
    for root in [Path(r) for r in roots] + ([native] if native is not None and native.is_dir() else []):
        outputs = root / "build" if not (root / "build" / "__init__.py").is_file() else None   # edgekit/build is code
        for item in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file()
                           and "__pycache__" not in p.parts and (outputs is None or outputs not in p.parents)):
            digest.update(f"{root.name}/{item.relative_to(root).as_posix()}".encode() + b"\0"
                          + _file_sha256(item).encode() + b"\n")
    return digest.hexdigest()


BUILD_VARS = frozenset(ENV_KEYS) | frozenset(EXTRA_ENV) | {"EDGEKIT_EXECUTOR"}


def build_environment(environ: Mapping[str, str]) -> dict:
    """The EDGEKIT_* values a cell's build reads (its output folder excepted: the matrix sets it)."""
    names = sorted(BUILD_VARS - {"EDGEKIT_OUT", "EDGEKIT_EXECUTOR"})
    return {name: environ[name] for name in names if environ.get(name)}


def cell_inputs(cell: Cell) -> dict:
    """Path -> digest of every file the cell's build reads that the flags or its config name."""
    paths: list[Path] = []
    factories: list[str] = []
    m = cell.model
    if m.config is not None:
        if not m.config.is_file():
            raise ConfigError(f"cell {cell.id}: config {m.config} does not exist", "fix config = in the matrix file")
        paths.append(m.config)
        table = load_toml(m.config)
        paths += _named_paths(table, m.config.parent)
        factories += _factories(table)
    if m.model is not None:
        (factories if FACTORY.fullmatch(m.model) else paths).append(m.model if FACTORY.fullmatch(m.model)
                                                                   else Path(m.model))
    for value in (m.calib, m.eval):
        if value is not None:
            paths.append(value)
    for arg in list(m.args) + list(cell.setting.args):
        if "/" in arg or "." in arg:
            candidate = Path(arg).expanduser()
            if candidate.exists():
                paths.append(candidate.absolute())
    found = {}
    for path in paths:
        path = Path(path)
        found[str(path)] = digest_path(path) if path.exists() else "missing"
    for spec in factories:
        origin = _factory_file(spec)
        found[f"factory:{spec}"] = _file_sha256(Path(origin)) if origin else "not found"
    return found


def cell_key(cell: Cell, inputs: Mapping[str, str], tools: Mapping, source: str, environment: Mapping[str, str]) -> str:
    payload = {"format": KEY_FORMAT, "flags": cell.flags(), "setting": cell.setting.name, "inputs": dict(inputs),
               "tools": dict(tools), "edgekit_source": source, "environment": dict(environment)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


# ---------------------------------------------------------------- one cell (runs on a worker)


@dataclass(frozen=True)
class CellJob:
    id: str
    args: tuple[str, ...]             # edgekit's arguments (build ...), run with the worker's own interpreter
    env: Mapping[str, str]            # set over the worker's environment, whose own build settings are dropped
    bundle: str
    timeout: float


def run_cell(job: CellJob) -> dict:
    """Run one cell's build; its figures from the published bundle, or its one-line error. Raises `WorkerLost`
    when the build was killed by a signal (the executor retries it)."""
    start = time.monotonic()
    try:
        env = {k: v for k, v in os.environ.items() if k not in BUILD_VARS}
        env.update(job.env)
        record = proc.run([sys.executable, *CLI, *job.args], timeout=job.timeout, env=env,
                          what=f"edgekit build of cell {job.id}")
    except Exception as error:       # a timeout or a missing interpreter: the cell's own failure
        return {"status": "failed", "error": str(error), "seconds": round(time.monotonic() - start, 2)}
    seconds = round(record.seconds, 2)
    if record.returncode < 0:
        raise WorkerLost(f"the build of {job.id} died from {record.signal_name}")
    if record.returncode != 0:
        errors = [line for line in record.stderr.splitlines() if line.startswith("error: ")]
        error = errors[-1][len("error: "):] if errors else (record.tail(1) or f"exited with {record.returncode}")
        return {"status": "failed", "error": error, "exit_code": record.returncode, "seconds": seconds}
    from edgekit.build import bundle as bundle_mod

    manifest = bundle_mod.load(Path(job.bundle)).manifest
    return dict(figures(manifest), status="built", seconds=seconds)


def figures(manifest: Manifest) -> dict:
    """What the table shows of a bundle: sizes, the task's primary metric on every tier, the files' hashes."""
    model, parity = manifest.model, manifest.parity
    return {"nb_bytes": model.bytes, "graph_bytes": model.program_bytes, "weights_bytes": model.params_bytes,
            "metric": manifest.task.primary if manifest.task is not None else None, "accuracy": dict(parity.accuracy),
            "passed": parity.passed, "files": {name: meta.sha256 for name, meta in sorted(manifest.files.items())}}


# ---------------------------------------------------------------- the run


Progress = Callable[[str, Cell, dict | None], None]     # (event, cell, row) event: running/retry/built/cached/failed


@dataclass
class MatrixResult:
    rows: list[dict]
    out: Path
    table_json: Path
    table_md: Path
    seconds: float
    executor: str

    @property
    def failed(self) -> list[dict]:
        return [r for r in self.rows if r["status"] == "failed"]

    def counts(self) -> dict:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out


def _row_path(out: Path, cell: Cell) -> Path:
    return out / "cells" / (cell.id.replace("/", "__") + ".json")


def _cached(out: Path, cell: Cell, key: str) -> dict | None:
    from edgekit.build import bundle as bundle_mod
    from edgekit.core.errors import EdgekitError

    try:
        row = json.loads(_row_path(out, cell).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if row.get("key") != key or row.get("status") not in ("built", "cached"):
        return None
    try:
        bundle = bundle_mod.load(cell.bundle_dir(out))
        if bundle_mod.verify(bundle) or figures(bundle.manifest)["files"] != row.get("files"):
            return None
    except (EdgekitError, OSError, KeyError, ValueError):
        return None
    return row


def _remove(path: Path, root: Path) -> None:
    """Take a stale bundle away in one rename (readers never see half of it), then delete it; only inside `root`."""
    contracts.check_inside(root, path, "a cell's bundle folder")
    if path.exists():
        gone = path.with_name(f".{path.name}.stale-{os.getpid()}")
        os.replace(path, gone)
        shutil.rmtree(gone, ignore_errors=True)


def remove_dead_staging(folder: Path) -> None:
    """Staging folders of builds that are gone (killed with the matrix): only complete bundles stay."""
    for staged in Path(folder).rglob(STAGING_PREFIX + "*"):
        pid = staged.name[len(STAGING_PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(staged, ignore_errors=True)
        except PermissionError:
            continue


def run(matrix: Matrix, out: Path, executor: Executor, *, cache_dir: Path | None = None, memory_mb: int = 2048,
        retries: int = 2, force: bool = False, progress: Progress = lambda event, cell, row: None,
        environ: Mapping[str, str] | None = None, source: str | None = None) -> MatrixResult:
    """Build every cell not already built with the same key; write the table. Raises KeyboardInterrupt on Ctrl-C
    after cancelling (what finished is kept, rows included). `source`: edgekit's source digest to key with (default:
    computed now; a caller running several matrices over one checkout may take it once)."""
    environ = dict(os.environ if environ is None else environ)
    out = Path(out).absolute()
    for cell in matrix.cells:       # paths built from names: inside --out, checked before anything is written
        contracts.check_inside(out, cell.bundle_dir(out), f"cell {cell.id}'s bundle folder")
        contracts.check_inside(out, _row_path(out, cell), f"cell {cell.id}'s row")
    start = time.monotonic()
    tools, environment = versions.collect(), build_environment(environ)
    source = source or source_digest()
    # cells do not fan out again inside their builds: the matrix already fills the executor
    # what the key says about the environment is what every worker's build sees, on any node
    child_env = dict(environment, EDGEKIT_EXECUTOR="serial")
    if executor.workers > 1:      # each cell holds one CPU (its Resources): as many math threads (Ray does the same)
        for name in THREAD_VARS:
            child_env[name] = environ.get(name, "1")
    rows: dict[int, dict] = {}
    todo: list[tuple[int, Cell, str]] = []
    for i, cell in enumerate(matrix.cells):
        key = cell_key(cell, cell_inputs(cell), tools, source, environment)
        hit = None if force else _cached(out, cell, key)
        if hit is not None:
            rows[i] = dict(hit, status="cached")
            progress("cached", cell, rows[i])
        else:
            todo.append((i, cell, key))
    tasks = []
    for i, cell, key in todo:
        argv = [*cell.flags(), "--out", str(cell.out_dir(out))]
        # without a cache every cell (a retry too) calibrates afresh, so its reports do not depend on what ran before
        argv += ["--cache-dir", str(cache_dir)] if cache_dir is not None else ["--no-cache"]
        tasks.append(Task(run_cell, (CellJob(cell.id, tuple(argv), child_env, str(cell.bundle_dir(out)), matrix.timeout),),
                          Resources(cpus=1, memory_mb=memory_mb), retries))

    def on_event(kind: str, index: int, attempt: int, outcome) -> None:
        i, cell, key = todo[index]
        if kind in ("running", "retry"):
            progress(kind, cell, None)
            return
        if outcome.ok:
            row = dict(outcome.value)
        else:
            row = {"status": "failed", "error": str(outcome.error).splitlines()[0] if str(outcome.error) else
                   type(outcome.error).__name__}
        row.update(_identity(cell), key=key, attempts=attempt)
        if row["status"] == "failed":
            _remove(cell.bundle_dir(out), out)      # an older bundle of this cell no longer matches its inputs
        atomic.write_json(_row_path(out, cell), row)
        rows[i] = row
        progress(row["status"], cell, row)

    try:
        executor.run(tasks, on_event)
    finally:
        remove_dead_staging(out / "bundles")
    ordered = [dict(rows[i], **_identity(cell)) for i, cell in enumerate(matrix.cells)]
    seconds = time.monotonic() - start
    table = {"schema": SCHEMA, "matrix": str(matrix.source), "executor": executor.name, "seconds": round(seconds, 2),
             "cells": ordered}
    atomic.write_json(out / "matrix.json", table)
    atomic.write_text(out / "matrix.md", markdown(ordered))
    return MatrixResult(ordered, out, out / "matrix.json", out / "matrix.md", seconds, executor.name)


def _identity(cell: Cell) -> dict:
    return {"cell": cell.id, "model": cell.model.name, "target": cell.target, "precision": cell.precision,
            "setting": cell.setting.name, "bundle": str(Path(cell.bundle_dir(Path("."))).as_posix())}


def markdown(rows: Sequence[dict]) -> str:
    tiers: list[str] = []
    for r in rows:
        tiers += [t for t in r.get("accuracy", {}) if t not in tiers]
    head = ["cell", "status", ".nb KiB", "metric", *tiers, "build s", "error"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        acc = r.get("accuracy", {})
        nb = f"{r['nb_bytes'] / 1024:.1f}" if r.get("nb_bytes") else ""
        cells = [r["cell"], r["status"], nb, r.get("metric") or "", *[f"{acc[t]:.2f}" if t in acc else "" for t in tiers],
                 f"{r['seconds']:.1f}" if r.get("seconds") is not None else "", (r.get("error") or "").replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["Matrix", "Cell", "ModelEntry", "Setting", "load", "run", "run_cell", "cell_key", "cell_inputs",
           "digest_path", "source_digest", "figures", "markdown", "MatrixResult"]
