"""What every file contract shares: the names of a bundle's files, the one JSON serialisation, the schema check, safe
names and paths, and `conform`, the schema checker the readers of edgekit/contracts/ apply before anything indexes
the data.

Each file has its own module beside this one (manifest.py, task.py, preprocess.py, golden.py, runner.py; env.py for
the settings read from the environment), and nothing outside edgekit/contracts/ names the files (a test greps for
their names). The C++ core's twin readers are native/core/src/{preprocess,postprocess}.cc and
native/app/src/selftest.cc: they ignore keys they do not know, so a field added here is backward compatible; a
changed meaning takes a new schema version.

Readers check shapes and types before anything indexes the data: a crafted or edited file is a one-line
`BundleError`, never a KeyError or TypeError later.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence, Tuple, Union

from edgekit.core.errors import BundleError, ConfigError
from edgekit.core.tables import Precision, Target

# ---------------------------------------------------------------- the files of a bundle
MANIFEST = "manifest.json"
TASK = "task.json"
PREPROCESS = "preprocess.json"
GOLDEN_DIR = "golden"
GOLDEN_INDEX = "golden.json"          # inside GOLDEN_DIR
LABELS = "labels.txt"
REBUILD = "rebuild the bundle with `edgekit build`"
EDITED = "the bundle is corrupt or was edited; rebuild it with `edgekit build`"

Json = Union[None, bool, int, float, str, Sequence["Json"], Mapping[str, "Json"]]


def write_json(path: Path, value: Json, *, indent: int = 2, ascii_only: bool = True) -> None:
    """The one serialisation of edgekit's JSON files: sorted keys, a final newline, UTF-8 (same input, same bytes).
    Non-finite numbers (an exact match's infinite SNR) are written as null: JSON has no Infinity or NaN, and the
    C++ reader, like every strict one, refuses them."""
    path.write_text(json_text(value, indent=indent, ascii_only=ascii_only), encoding="utf-8")


def json_text(value: Json, *, indent: int = 2, ascii_only: bool = True) -> str:
    """What write_json writes."""
    return json.dumps(finite(value), indent=indent, sort_keys=True, ensure_ascii=ascii_only, allow_nan=False) + "\n"


def finite(value: Json) -> Json:
    """`value` with every non-finite float replaced by None (what write_json writes)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def schema_ok(raw: Mapping[str, Json], schema: str, file: Path) -> None:
    """A file without a schema is version 1 (bundles written before it was recorded); another version is refused."""
    found = raw.get("schema", schema)
    if found != schema:
        raise BundleError(f"{file} has schema {found!r}; this edgekit reads {schema}",
                          "rebuild the bundle with this edgekit, or use the edgekit that wrote it")


# ---------------------------------------------------------------- names and paths
# a model name becomes a folder name (build output, asset sets): one rule, checked wherever a name is read
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
NAME_TEXT = "1-64 letters, digits, '_', '-' or '.', starting with a letter or digit"


def safe_name(value: Json) -> bool:
    """What a model, cell, setting or bundle name may be: the one rule (it becomes a folder name)."""
    return isinstance(value, str) and NAME_RULE.fullmatch(value) is not None


def check_name(value: Json, what: str, error: type = ConfigError, hint: str = "") -> str:
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


def safe_relative(value: Json) -> bool:
    """A path inside the bundle: relative, POSIX, no empty, '.' or '..' parts, no backslash or NUL."""
    if not isinstance(value, str) or not value or value.startswith("/") or "\\" in value or "\0" in value:
        return False
    # longer names than file systems take (255 bytes a part) would be an OSError, not a missing file
    return len(value) <= 1024 and all(part not in ("", ".", "..") and len(part.encode()) <= 255
                                      for part in value.split("/"))


def integer(value: Json) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def number(value: Json) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class TensorDecl:
    """A tensor a model declares (manifest.json's model.inputs): name, shape (-1 = any) and dtype."""

    name: str
    shape: tuple[int, ...]         # -1 = any
    dtype: str

    @property
    def text(self) -> str:
        """name:dims:dtype, as the runner's --input takes it."""
        return f"{self.name}:{'x'.join(str(d) for d in self.shape)}:{self.dtype}"

    def to_json(self) -> dict[str, Json]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


# ---------------------------------------------------------------- the schema checker
# A spec is (description, test), a dict (an object; a key ending in "?" may be absent), [spec] (a list of spec),
# MapOf(spec) (an object of any keys) or Nullable(spec). Fields not named in a spec are not read and may be anything.

Leaf = Tuple[str, Callable[[Json], bool]]
DTYPES = ("float32", "float16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool")
STRING: Leaf = ("a string", lambda v: isinstance(v, str))
NAME: Leaf = (f"a name of {NAME_TEXT}", safe_name)
PATH: Leaf = ("a relative path inside the bundle (no '..', not absolute)", safe_relative)
COUNT: Leaf = ("a non-negative integer", lambda v: integer(v) and v >= 0)
POSITIVE: Leaf = ("a positive integer", lambda v: integer(v) and v > 0)
DIM: Leaf = ("-1 or a positive integer", lambda v: integer(v) and (v == -1 or v > 0))
NUMBER: Leaf = ("a number", number)
BOOL: Leaf = ("true or false", lambda v: isinstance(v, bool))
OBJECT: Leaf = ("an object", lambda v: isinstance(v, dict))
DTYPE: Leaf = (f"one of {', '.join(DTYPES)}", lambda v: isinstance(v, str) and v in DTYPES)
TARGET: Leaf = (f"one of {', '.join(t.value for t in Target)}",
                lambda v: isinstance(v, str) and v in {t.value for t in Target})
PRECISION: Leaf = (f"one of {', '.join(p.value for p in Precision)}",
                   lambda v: isinstance(v, str) and v in {p.value for p in Precision})
SHA256: Leaf = ("64 lowercase hex digits", lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) is not None)


@dataclass(frozen=True)
class MapOf:
    value: "Spec"


@dataclass(frozen=True)
class Nullable:
    value: "Spec"


Spec = Union[Leaf, Mapping[str, "Spec"], Sequence["Spec"], MapOf, Nullable]
FILES = MapOf({"sha256": SHA256, "bytes": COUNT})


def conform(value: Json, spec: Spec, file: Path, where: str = "") -> None:
    """Raise a one-line BundleError at the first field of `value` that does not match `spec` (recursion follows the
    spec, whose depth is fixed, never the data)."""
    def wrong(expected: str) -> BundleError:
        shown = json.dumps(value, default=str)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return BundleError(f"{file}: {where or 'the manifest'} is {shown}, expected {expected}", EDITED)

    if isinstance(spec, Nullable):
        if value is not None:
            conform(value, spec.value, file, where)
    elif isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise wrong("an object")
        for key, item in value.items():
            if spec is FILES and not safe_relative(key):
                raise BundleError(f"{file}: files lists {key!r}, which is not a relative path inside the bundle", EDITED)
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


@dataclass(frozen=True)
class FileEntry:
    """One row of a file table: the file's sha256 and size."""

    sha256: str
    bytes: int


def check_file_table(table: Json, file: Path) -> dict[str, FileEntry]:
    """A file table (manifest.json's, assets.json's), checked and typed: relative paths inside the folder -> sha256
    and size."""
    conform(table, FILES, file, "files")
    return {rel: FileEntry(meta["sha256"], meta["bytes"]) for rel, meta in table.items()}
