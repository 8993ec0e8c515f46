"""`edgekit package`: verified bundles -> an app-ready asset set the apps' core loads and checks at start-up.

    <destination>/
      assets.json             schema edgekit.assets/1: platform, the Paddle-Lite runtime the app must link
                              (opt version), the models (name, task, folder) and the sha256 + size of every file
      <model name>/           one folder per bundle: model.nb, preprocess.json, task.json, labels.txt,
                              golden/ (inputs, outputs, images and results for the apps' self-tests)
                              and the bundle's manifest.json

The asset set is written to a staging folder beside the destination and renamed into
place; an app's loader (native/'s core) refuses a set whose files do not match
assets.json, or whose models were written by an opt other than its runtime's version.
"""

from __future__ import annotations

import datetime as dt
import enum
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import atomic
from .artifacts import sha256_file
from .errors import BundleError, ConfigError

SCHEMA = "edgekit.assets/1"
INDEX = "assets.json"
# what each model folder carries: the app needs these; the x86 twin and host reports stay behind
MODEL_FILES = ("model.nb", "preprocess.json", "task.json", "labels.txt", "manifest.json")


class Platform(str, enum.Enum):
    android = "android"
    ios = "ios"
    linux = "linux"


@dataclass(frozen=True)
class PlatformInfo:
    assets: str              # the demo app's asset folder, relative to the repository root
    targets: tuple[str, ...]  # bundle targets the platform's runtime runs
    note: str


PLATFORMS: dict[Platform, PlatformInfo] = {
    Platform.android: PlatformInfo("android_demo/app/src/main/assets/edgekit", ("arm64", "armv7"),
                                   "Android app assets (arm64-v8a / armeabi-v7a)"),
    Platform.ios: PlatformInfo("ios_demo/EdgekitDemo/Resources/edgekit", ("arm64",), "iOS app bundle resources (arm64)"),
    Platform.linux: PlatformInfo("camera_demo/assets", ("arm64", "armv7"), "the Linux camera demo's assets (aarch64 / armhf)"),
}


def default_destination(platform: Platform, repo_root: Path) -> Path:
    return repo_root / PLATFORMS[platform].assets


def package(bundles: Sequence[Path], platform: Platform, destination: Path) -> dict:
    """Verify every bundle, check they fit the platform and one runtime, and write the asset set atomically."""
    from .inspection import verified

    if not bundles:
        raise ConfigError("no bundle given", "pass one or more bundle folders written by `edgekit build`")
    info = PLATFORMS[platform]
    loaded = [verified(Path(b)) for b in bundles]
    names = [b.manifest["model"]["name"] for b in loaded]
    if len(set(names)) != len(names):
        raise ConfigError(f"two bundles of the same model name ({', '.join(names)})",
                          "package one bundle per model (build them with different --name)")
    for bundle in loaded:
        target = bundle.manifest["model"]["target"]
        if target not in info.targets:
            raise ConfigError(f"{bundle.path} is built for {target}; {platform.value} apps run "
                              f"{'/'.join(info.targets)} models", f"build it with --target {info.targets[0]}")
    versions = {b.manifest["model"]["opt_version"] for b in loaded}
    if len(versions) > 1:
        raise BundleError(f"the bundles were written by different opt versions ({', '.join(sorted(versions))}); "
                          "an app links one Paddle-Lite runtime", "rebuild them with one edgekit/paddlelite version")
    destination = Path(destination).absolute()
    with atomic.staging_dir(destination.parent, f".{destination.name}.") as staging:
        models = [_copy_model(bundle, staging) for bundle in loaded]
        index = {"schema": SCHEMA, "platform": platform.value,
                 "created_utc": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
                 "runtime_required": {"opt_version": versions.pop(),
                                      "paddlelite": loaded[0].manifest["model"]["runtime_required"]["paddlelite"]},
                 "models": models, "files": _file_table(staging)}
        atomic.write_json(staging / INDEX, index)
        atomic.publish_dir(staging, destination)
    return index


def _copy_model(bundle, staging: Path) -> dict:
    m = bundle.manifest
    folder = staging / m["model"]["name"]
    folder.mkdir()
    for name in MODEL_FILES:
        if (bundle.path / name).is_file():
            shutil.copyfile(bundle.path / name, folder / name)
    shutil.copytree(bundle.path / "golden", folder / "golden")
    task = (m.get("task") or {}).get("kind")
    return {"name": m["model"]["name"], "dir": m["model"]["name"], "task": task, "target": m["model"]["target"],
            "precision": m["model"]["precision"], "opt_version": m["model"]["opt_version"],
            "inputs": m["model"]["inputs"], "outputs": m["model"]["outputs"],
            "bundle_manifest_sha256": sha256_file(bundle.path / "manifest.json")}


def _file_table(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): {"sha256": sha256_file(p), "bytes": p.stat().st_size}
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != INDEX}


def verify_assets(folder: Path) -> list[str]:
    """The same checks an app's loader makes (minus the runtime version): problems, empty when it verifies."""
    import json

    try:
        index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{INDEX} unreadable: {exc}"]
    if index.get("schema") != SCHEMA:
        return [f"{INDEX} has schema {index.get('schema')!r}, expected {SCHEMA}"]
    problems = []
    for rel, meta in index.get("files", {}).items():
        path = folder / rel
        if not path.is_file():
            problems.append(f"missing: {rel}")
        elif path.stat().st_size != meta["bytes"] or sha256_file(path) != meta["sha256"]:
            problems.append(f"checksum mismatch: {rel}")
    return problems
