"""Tiny fake bundles for the untrusted-input tests: real files and a complete manifest, no Paddle build.

`make_bundle` writes what `edgekit build` writes (model.nb with a naive_buffer header, the
x86 twin, preprocess.json, task.json, labels, golden vectors) through `bundle.finalize`,
so the manifest's file table is genuine; `rewrite_manifest` edits a manifest the way an
attacker would, keeping the checksums of the files consistent.
"""

from __future__ import annotations

import copy
import json
import re
import struct
from pathlib import Path
from typing import Callable

import numpy as np

from edgekit.build.bundle import MANIFEST, file_table, finalize, write_golden
from edgekit.contracts.files import safe_name

OPT = "v2.13-rc"


def nb_bytes(opt: str = OPT, program: bytes = b"\0" * 8, params: bytes = b"params") -> bytes:
    return struct.pack("<H16sQ", 2, opt.encode(), len(program)) + program + params


def document(name: str = "digits", *, target: str = "arm64", precision: str = "fp32", opt: str = OPT) -> dict:
    """A complete manifest.json as `edgekit build` writes it (golden vectors 2x1x8x8 -> 2x2, no file behind it):
    for tests of the manifest's readers."""
    tensor = {"name": "x", "file": "golden/input_0.npy", "shape": [2, 1, 8, 8], "dtype": "float32"}
    return {
        "schema": "edgekit.bundle/1",
        "created_utc": "2024-01-01T00:00:00+00:00",
        "model": {"name": name, "file": "model.nb", "target": target, "abi": "arm64-v8a", "precision": precision,
                  "opt_version": opt, "runtime_required": {"paddlelite": "2.13rc0", "opt_version": opt},
                  "inputs": [{"name": "x", "shape": [-1, 1, 8, 8], "dtype": "float32"}], "outputs": ["y"]},
        "host_twin": {"file": "host/model_x86.nb", "bytes": 40, "target": "x86"},
        "golden": {"inputs": [tensor], "count": 2, "tolerances": {"min_cosine": 0.99, "max_abs": None},
                   "outputs": [dict(tensor, name="y", file="golden/output_0.npy", shape=[2, 2])]},
        "files": {},
        "parity": {"passed": True, "samples": 2, "accuracy": {"fp32": 100.0}},
        "config": {"gates": {"twin_max_abs": 1e-4, "twin_min_cosine": 0.9999}},
        "task": {"kind": "classification", "primary": "top1"},
        "versions": {"paddlepaddle": "2.6.2", "paddlelite": "2.13rc0", "opt": opt, "python": "3.10"},
        "emulation": None,
    }


def make_bundle(root: Path, name: str = "digits", *, target: str = "arm64", opt: str = OPT, nb_opt: str | None = None,
                edit: Callable[[dict], None] | None = None) -> Path:
    """A verified bundle at root/bundles/<name>; `nb_opt` writes another version into model.nb's header than the
    manifest says; `edit` changes the manifest as an attacker would (written after the bundle, files rehashed)."""
    staging = root / f"stage-{abs(hash(name))}-{len(list(root.glob('stage-*')))}"
    staging.mkdir(parents=True)
    (staging / "model.nb").write_bytes(nb_bytes(nb_opt or opt))
    (staging / "host").mkdir()
    (staging / "host" / "model_x86.nb").write_bytes(nb_bytes(opt))
    (staging / "preprocess.json").write_text(json.dumps({"inputs": ["x"], "preprocess": {
        "color": "gray", "resize": [8, 8], "scale": 1.0, "mean": [0.0], "std": [1.0], "layout": "NCHW"}}) + "\n")
    (staging / "task.json").write_text('{"kind": "classification", "options": {}, "primary": "top1"}\n')
    (staging / "labels.txt").write_text("zero\none\n")
    golden = write_golden(staging / "golden", {"x": np.zeros((2, 1, 8, 8), np.float32)},
                          [np.ones((2, 2), np.float32)], ["y"], {"min_cosine": 0.99, "max_abs": None}, None)
    manifest = document(name, target=target, opt=opt)
    manifest["golden"] = golden
    manifest.pop("schema")
    manifest.pop("files")
    valid = copy.deepcopy(manifest)
    if not safe_name(name):
        valid["model"]["name"] = "fake"
    if edit is not None:
        edit(manifest)
    path = finalize(staging, root / "bundles" / (re.sub(r"[^A-Za-z0-9_-]", "_", name) or "_"), valid).path
    if manifest != valid:        # what an attacker writes: edgekit itself never writes a manifest it would refuse

        def crafted(m: dict) -> None:
            schema = m["schema"]
            m.clear()
            m.update(copy.deepcopy(manifest))
            m.setdefault("schema", schema)
        rewrite_manifest(path, crafted)
    return path


def rewrite_manifest(bundle: Path, edit: Callable[[dict], None], rehash: bool = True) -> None:
    """Edit the manifest on disk; with `rehash` the file table is recomputed, as an attacker would."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    edit(manifest)
    if rehash:
        manifest["files"] = file_table(bundle)
    (bundle / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
