"""Stage `package`: the verified bundle on disk, written atomically, and its verification."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.contracts import golden as golden_contract
from edgekit.contracts.files import MANIFEST, FileEntry
from edgekit.contracts.manifest import SCHEMA, Manifest, write_manifest  # noqa: F401  (SCHEMA re-exported)
from edgekit.core import atomic
from edgekit.model.artifacts import sha256_file
from edgekit.core.errors import BundleError


@dataclass(frozen=True)
class Bundle:
    path: Path
    manifest: Manifest

    @property
    def nb_file(self) -> Path:
        return self.path / self.manifest.model.file


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


def write_golden_width(folder: Path, width: int, feeds: Mapping[str, np.ndarray], outputs: Sequence[np.ndarray],
                       output_names: Sequence[str]) -> dict:
    """A dynamic-width bundle's golden vectors at another tensor width, golden/w<width>_input_<i>.npy and
    _output_<i>.npy (names of their own: the device suite pushes golden inputs into one folder): the entry of
    golden.json's (and the manifest's) `golden.widths` list (edgekit.contracts.golden reads it back)."""
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"width": int(width), "inputs": [], "outputs": [], "count": 0}
    for kind, pairs in (("input", list(feeds.items())), ("output", list(zip(output_names, outputs)))):
        for i, (name, arr) in enumerate(pairs):
            file = f"w{int(width)}_{kind}_{i}.npy"
            np.save(folder / file, np.ascontiguousarray(arr), allow_pickle=False)
            entry[f"{kind}s"].append({"name": name, "file": f"golden/{file}", "shape": list(arr.shape),
                                      "dtype": str(arr.dtype)})
    entry["count"] = int(next(iter(feeds.values())).shape[0])
    return entry


def write_golden_index(folder: Path, entry: dict) -> None:
    golden_contract.write_golden_index(folder, entry)


def write_golden_images(folder: Path, files: Sequence[Path], spec, feed: str, run, postprocess) -> dict:
    """Source images with what the host computes from them, for the apps' equality tests.

    Per image, in order: the file (copied byte for byte), its preprocessed tensor (the
    bundle's preprocess.json applied by the Python path), the FP32 reference outputs and
    the post-processed result (task.json). An app's core must reproduce each step.
    """
    from edgekit.core.images import decode_image

    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i, source in enumerate(files):
        name = f"{i:04d}{source.suffix.lower()}"
        shutil.copyfile(source, folder / name)
        names.append(f"golden/images/{name}")
    tensors = [spec.apply(decode_image(Path(f))) for f in files]
    if len({t.shape for t in tensors}) > 1:      # a variable-width spec: lines of other widths, a file each
        return _golden_images_apart(folder, names, tensors, feed, run, postprocess)
    stacked = np.stack(tensors)
    outputs = run({feed: stacked})
    np.save(folder / "input.npy", stacked, allow_pickle=False)
    for i, out in enumerate(outputs):
        np.save(folder / f"output_{i}.npy", np.ascontiguousarray(out), allow_pickle=False)
    return {"files": names, "input": "golden/images/input.npy",
            "outputs": [f"golden/images/output_{i}.npy" for i in range(len(outputs))],
            "results": postprocess(outputs) if postprocess else None}


def _golden_images_apart(folder: Path, names: list[str], tensors: Sequence[np.ndarray], feed: str, run,
                         postprocess) -> dict:
    """Golden images whose tensors differ in shape (a dynamic width): per image its tensor [1, ...] and the FP32
    reference outputs on it, `per_image` in golden.json (the app self-test reads either form)."""
    per, results = [], []
    for k, tensor in enumerate(tensors):
        outputs = run({feed: tensor[None]})
        np.save(folder / f"input_{k:04d}.npy", tensor[None], allow_pickle=False)
        for i, out in enumerate(outputs):
            np.save(folder / f"output_{k:04d}_{i}.npy", np.ascontiguousarray(out), allow_pickle=False)
        per.append({"input": f"golden/images/input_{k:04d}.npy",
                    "outputs": [f"golden/images/output_{k:04d}_{i}.npy" for i in range(len(outputs))]})
        if postprocess:
            results.extend(postprocess(outputs))
    return {"files": names, "per_image": per, "results": results if postprocess else None}


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
    manifest = write_manifest(staging, dict(manifest, files=file_table(staging)))
    if destination.exists() and not destination.is_dir():
        raise BundleError(f"{destination} exists and is not a bundle folder", "move that file away or pick another --out")
    atomic.publish_dir(staging, destination)
    return Bundle(destination, manifest)


def load(path: Path) -> Bundle:
    """The bundle at `path` with its manifest, read within the JSON limits and checked field by field (golden vectors
    that fit the model included): a BundleError (one line) for the first thing that does not hold."""
    return Bundle(path, Manifest.read(path))


def verify(bundle: Bundle) -> list[str]:
    """Problems with the bundle's files: links, missing, changed or unlisted. Empty when it verifies."""
    return file_problems(bundle.path, bundle.manifest.files, {MANIFEST}, "manifest")


def file_problems(folder: Path, listed: Mapping[str, FileEntry], own: set[str], index: str) -> list[str]:
    """`folder` against its file table (`listed`: relative path -> sha256 and bytes): links and special files,
    missing files, changed ones, and files the table (`index`) does not list besides its `own` files."""
    present, odd = walk_files(folder)
    problems = [f"{kind}: {rel}" for rel, kind in sorted(odd.items())]
    for rel, meta in listed.items():
        path = folder / rel
        if rel in odd:
            continue
        if rel not in present:
            problems.append(f"missing: {rel}")
        elif path.stat().st_size != meta.bytes or sha256_file(path) != meta.sha256:
            problems.append(f"checksum mismatch: {rel}")
    for rel in sorted(present - set(listed) - own):
        problems.append(f"not in {index}: {rel}")
    return problems
