"""Stage `package`: the verified bundle on disk, written atomically, and its verification."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from . import atomic, limits
from .artifacts import sha256_file
from .errors import BundleError
from .tables import Precision, Target

MANIFEST = "manifest.json"
SCHEMA = "edgekit.bundle/1"
REQUIRED_KEYS = ("model", "host_twin", "golden", "files", "parity", "config")
# a model name becomes a folder name (build output, asset sets): one rule, checked wherever a name is read
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
NAME_TEXT = "1-64 letters, digits, '_', '-' or '.', starting with a letter or digit"


@dataclass(frozen=True)
class Bundle:
    path: Path
    manifest: dict

    @property
    def nb_file(self) -> Path:
        return self.path / self.manifest["model"]["file"]


def write_golden(folder: Path, feeds: Mapping[str, np.ndarray], outputs: Sequence[np.ndarray], output_names: Sequence[str],
                 tolerances: dict, labels: np.ndarray | None) -> dict:
    """Sample inputs and reference outputs for the device suite, with the tolerances to apply."""
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"inputs": [], "outputs": [], "tolerances": tolerances, "count": 0}
    for i, (name, arr) in enumerate(feeds.items()):
        file = f"input_{i}.npy"
        np.save(folder / file, np.ascontiguousarray(arr), allow_pickle=False)
        entry["inputs"].append({"name": name, "file": f"golden/{file}", "shape": list(arr.shape), "dtype": str(arr.dtype)})
        entry["count"] = int(arr.shape[0])
    for i, (name, arr) in enumerate(zip(output_names, outputs)):
        file = f"output_{i}.npy"
        np.save(folder / file, np.ascontiguousarray(arr), allow_pickle=False)
        entry["outputs"].append({"name": name, "file": f"golden/{file}", "shape": list(arr.shape), "dtype": str(arr.dtype)})
    if labels is not None:
        np.save(folder / "labels.npy", labels.astype(np.int64), allow_pickle=False)
        entry["labels"] = "golden/labels.npy"
    write_golden_index(folder, entry)
    return entry


def write_golden_index(folder: Path, entry: dict) -> None:
    (folder / "golden.json").write_text(json.dumps(entry, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                                        encoding="utf-8")


def write_golden_images(folder: Path, files: Sequence[Path], spec, feed: str, run, postprocess) -> dict:
    """Source images with what the host computes from them, for the apps' equality tests.

    Per image, in order: the file (copied byte for byte), its preprocessed tensor (the
    bundle's preprocess.json applied by the Python path), the FP32 reference outputs and
    the post-processed result (task.json). An app's core must reproduce each step.
    """
    from .data import decode_image

    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i, source in enumerate(files):
        name = f"{i:04d}{source.suffix.lower()}"
        shutil.copyfile(source, folder / name)
        names.append(f"golden/images/{name}")
    tensors = np.stack([spec.apply(decode_image(Path(f))) for f in files])
    outputs = run({feed: tensors})
    np.save(folder / "input.npy", tensors, allow_pickle=False)
    for i, out in enumerate(outputs):
        np.save(folder / f"output_{i}.npy", np.ascontiguousarray(out), allow_pickle=False)
    return {"files": names, "input": "golden/images/input.npy",
            "outputs": [f"golden/images/output_{i}.npy" for i in range(len(outputs))],
            "results": postprocess(outputs) if postprocess else None}


def file_table(root: Path) -> dict:
    table = {}
    for rel in sorted(walk_files(root)[0]):
        if rel != MANIFEST:
            path = root / rel
            table[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return table


def walk_files(root: Path) -> tuple[set[str], dict[str, str]]:
    """The regular files below `root` (relative POSIX paths), and what else is there: symlinks and special files.

    Never follows a link: a bundle holds its own bytes, and a link (`golden/x -> ~/.ssh`)
    would make readers hash and copy files from elsewhere.
    """
    files, odd = set(), {}
    for folder, dirs, names in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in sorted(dirs + names):
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                odd[rel] = "symbolic link"
            elif name in names and not stat.S_ISREG(path.lstat().st_mode):
                odd[rel] = "not a regular file"
            elif name in names:
                files.add(rel)
        dirs[:] = [d for d in dirs if not (base / d).is_symlink()]
    return files, odd


def finalize(staging: Path, destination: Path, manifest: dict) -> Bundle:
    """Write the manifest, then move the staged folder into place in one rename."""
    manifest = dict(manifest, schema=SCHEMA, files=file_table(staging))
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if destination.exists() and not destination.is_dir():
        raise BundleError(f"{destination} exists and is not a bundle folder", "move that file away or pick another --out")
    atomic.publish_dir(staging, destination)
    return Bundle(destination, manifest)


def load(path: Path) -> Bundle:
    """The manifest of the bundle at `path`, read within the JSON limits; its file table and model file checked."""
    file = path / MANIFEST
    if not file.is_file():
        raise BundleError(f"{path} has no {MANIFEST}: not an edgekit bundle", "build one with `edgekit build`")
    manifest = limits.read_json(file, BundleError, "rebuild the bundle")
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        found = manifest.get("schema") if isinstance(manifest, dict) else type(manifest).__name__
        raise BundleError(f"{file} has schema {found!r}, expected {SCHEMA}", "rebuild the bundle with this edgekit")
    missing = [key for key in REQUIRED_KEYS if not isinstance(manifest.get(key), dict)]
    if missing:
        raise BundleError(f"{file} lacks {', '.join(missing)}: the bundle is incomplete or was edited",
                          "rebuild it with `edgekit build`")
    _conform(manifest, LOADED, file)
    return Bundle(path, manifest)


def verify(bundle: Bundle) -> list[str]:
    """Problems with the bundle's files: links, missing, changed or unlisted. Empty when it verifies."""
    present, odd = walk_files(bundle.path)
    problems = [f"{kind}: {rel}" for rel, kind in sorted(odd.items())]
    listed = bundle.manifest["files"]
    for rel, meta in listed.items():
        path = bundle.path / rel
        if rel in odd:
            continue
        if rel not in present:
            problems.append(f"missing: {rel}")
        elif path.stat().st_size != meta["bytes"] or sha256_file(path) != meta["sha256"]:
            problems.append(f"checksum mismatch: {rel}")
    for rel in sorted(present - set(listed) - {MANIFEST}):
        problems.append(f"not in manifest: {rel}")
    return problems


def check_file_table(table: object, file: Path) -> None:
    """A file table (manifest.json's, assets.json's): relative paths inside the folder -> sha256 and size."""
    _conform(table, _FILES, file, "files")


def check_contents(bundle: Bundle) -> None:
    """What every consumer of a verified bundle reads: the manifest's fields, typed, and golden vectors that fit
    the model. A BundleError (one line) for the first thing that does not hold."""
    file = bundle.path / MANIFEST
    m = bundle.manifest
    _conform(m, CONTENTS, file)
    model, golden = m["model"], m["golden"]
    if model["opt_version"] != model["runtime_required"]["opt_version"]:
        raise BundleError(f"{file}: model.opt_version {model['opt_version']!r} differs from runtime_required.opt_version "
                          f"{model['runtime_required']['opt_version']!r}", "rebuild the bundle with `edgekit build`")
    declared = {i["name"]: i for i in model["inputs"]}
    names = [g["name"] for g in golden["inputs"]]
    if len(declared) != len(model["inputs"]) or sorted(names) != sorted(declared):
        raise BundleError(f"{file}: golden inputs {names} are not the model's inputs {list(declared)}",
                          "rebuild the bundle with `edgekit build`")
    for g in golden["inputs"]:
        want = declared[g["name"]]
        fits = len(g["shape"]) == len(want["shape"]) > 0 and g["shape"][0] == golden["count"] and all(
            w in (-1, d) for w, d in zip(want["shape"][1:], g["shape"][1:]))
        if g["dtype"] != want["dtype"] or not fits:
            raise BundleError(f"{file}: golden input {g['name']!r} is {g['dtype']} {g['shape']} for {golden['count']} "
                              f"samples; the model takes {want['dtype']} {want['shape']} (-1 = any)",
                              "rebuild the bundle with `edgekit build`")
    outputs = [o["name"] for o in golden["outputs"]]
    if outputs != model["outputs"]:
        raise BundleError(f"{file}: golden outputs {outputs} are not the model's outputs {model['outputs']}",
                          "rebuild the bundle with `edgekit build`")


# --- the manifest's contract: the fields readers index, with the type each must have ------------------------------
# A spec is (description, test), a dict (an object; a key ending in "?" may be absent), [spec] (a list of spec),
# _MapOf(spec) (an object of any keys) or _Nullable(spec). Fields not named here are not read and may be anything.

def safe_name(value: object) -> bool:
    return isinstance(value, str) and NAME_RULE.fullmatch(value) is not None


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
class _MapOf:
    value: object


@dataclass(frozen=True)
class _Nullable:
    value: object


_GOLDEN_TENSOR = {"name": _STR, "file": _PATH, "shape": [_COUNT], "dtype": _DTYPE}
_FILES = _MapOf({"sha256": _SHA256, "bytes": _COUNT})
LOADED = {"model": {"file": _PATH}, "files": _FILES}
CONTENTS = {
    "created_utc?": _STR,
    "model": {"name": _NAME, "file": _PATH, "target": _TARGET, "abi?": _STR, "precision": _PRECISION, "opt_version": _STR,
              "runtime_required": {"paddlelite": _STR, "opt_version": _STR},
              "inputs": [{"name": _STR, "shape": [_DIM], "dtype": _DTYPE}], "outputs": [_STR]},
    "host_twin": {"file?": _PATH, "bytes?": _COUNT},        # what runs on the host; the apps do without it
    "golden": {"inputs": [_GOLDEN_TENSOR], "outputs": [_GOLDEN_TENSOR], "count": _COUNT, "labels?": _PATH,
               "tolerances": {"min_cosine": _NUMBER, "max_abs?": _Nullable(_NUMBER)}},
    "parity": {"passed?": _BOOL, "samples?": _COUNT, "accuracy?": _MapOf(_NUMBER)},
    "config": {"gates?": {"twin_max_abs?": _NUMBER, "twin_min_cosine?": _NUMBER}},
    "task?": _Nullable({"kind": _STR}),
    "versions?": _OBJECT,
    "emulation?": _Nullable(_OBJECT),
}


def _conform(value: object, spec: object, file: Path, where: str = "") -> None:
    """Raise a one-line BundleError at the first field of `value` that does not match `spec` (recursion follows the
    spec, whose depth is fixed, never the data)."""
    def wrong(expected: str) -> BundleError:
        shown = json.dumps(value, default=str)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return BundleError(f"{file}: {where or 'the manifest'} is {shown}, expected {expected}",
                           "the bundle is corrupt or was edited; rebuild it with `edgekit build`")

    if isinstance(spec, _Nullable):
        if value is not None:
            _conform(value, spec.value, file, where)
    elif isinstance(spec, _MapOf):
        if not isinstance(value, dict):
            raise wrong("an object")
        for key, item in value.items():
            if spec is _FILES and not safe_relative(key):
                raise BundleError(f"{file}: files lists {key!r}, which is not a relative path inside the bundle",
                                  "the bundle is corrupt or was edited; rebuild it with `edgekit build`")
            _conform(item, spec.value, file, f"{where}[{json.dumps(key)}]")
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
            _conform(value[name], sub, file, f"{where}.{name}" if where else name)
    elif isinstance(spec, list):
        if not isinstance(value, list):
            raise wrong("a list")
        for i, item in enumerate(value):
            _conform(item, spec[0], file, f"{where}[{i}]")
    else:
        description, test = spec
        if not test(value):
            raise wrong(description)
