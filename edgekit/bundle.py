"""Stage `package`: the verified bundle on disk, written atomically, and its verification."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from . import atomic
from .artifacts import sha256_file
from .errors import BundleError

MANIFEST = "manifest.json"
SCHEMA = "edgekit.bundle/1"
REQUIRED_KEYS = ("model", "host_twin", "golden", "files", "parity", "config")


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
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST):
        table[path.relative_to(root).as_posix()] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return table


def finalize(staging: Path, destination: Path, manifest: dict) -> Bundle:
    """Write the manifest, then move the staged folder into place in one rename."""
    manifest = dict(manifest, schema=SCHEMA, files=file_table(staging))
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if destination.exists() and not destination.is_dir():
        raise BundleError(f"{destination} exists and is not a bundle folder", "move that file away or pick another --out")
    atomic.publish_dir(staging, destination)
    return Bundle(destination, manifest)


def load(path: Path) -> Bundle:
    file = path / MANIFEST
    if not file.is_file():
        raise BundleError(f"{path} has no {MANIFEST}: not an edgekit bundle", "build one with `edgekit build`")
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BundleError(f"{file} is not valid JSON", "rebuild the bundle") from exc
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        found = manifest.get("schema") if isinstance(manifest, dict) else type(manifest).__name__
        raise BundleError(f"{file} has schema {found!r}, expected {SCHEMA}", "rebuild the bundle with this edgekit")
    missing = [key for key in REQUIRED_KEYS if not isinstance(manifest.get(key), dict)]
    if missing:
        raise BundleError(f"{file} lacks {', '.join(missing)}: the bundle is incomplete or was edited",
                          "rebuild it with `edgekit build`")
    return Bundle(path, manifest)


def verify(bundle: Bundle) -> list[str]:
    """Problems with the bundle's files: missing, changed or unlisted. Empty when it verifies."""
    problems = []
    listed = bundle.manifest.get("files", {})
    for rel, meta in listed.items():
        path = bundle.path / rel
        if not path.is_file():
            problems.append(f"missing: {rel}")
        elif sha256_file(path) != meta["sha256"]:
            problems.append(f"checksum mismatch: {rel}")
    for path in bundle.path.rglob("*"):
        rel = path.relative_to(bundle.path).as_posix()
        if path.is_file() and rel != MANIFEST and rel not in listed:
            problems.append(f"not in manifest: {rel}")
    return problems
