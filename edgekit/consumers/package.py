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
import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from edgekit.contracts import files as contracts
from edgekit.core import atomic, limits
from edgekit.model.artifacts import sha256_file
from edgekit.build.bundle import MANIFEST
from edgekit.core.errors import BundleError, ConfigError, EdgekitError, SignatureError

SCHEMA = "edgekit.assets/1"
INDEX = "assets.json"
SIGNATURE = "assets.json.sig"      # optional Ed25519 signature over assets.json (docs/security.md)
# what each model folder carries: the app needs these; the x86 twin and host reports stay behind
MODEL_FILES = ("model.nb", contracts.PREPROCESS, contracts.TASK, contracts.LABELS, contracts.MANIFEST)


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


def package(bundles: Sequence[Path], platform: Platform, destination: Path, sign: Path | None = None) -> dict:
    """Verify every bundle, check they fit the platform and one runtime, and write the asset set atomically;
    with `sign` (an Ed25519 private key), assets.json's signature beside it."""
    from edgekit.consumers.inspection import locked
    from edgekit.lite.nbfile import read_header

    if not bundles:
        raise ConfigError("no bundle given", "pass one or more bundle folders written by `edgekit build`")
    if sign is not None:
        _read_key(sign, private=True)                   # a bad key fails before anything is read or written
    info = PLATFORMS[platform]
    loaded = [locked(Path(b)) for b in bundles]     # checksums, the manifest's fields, .nb header = manifest version
    names = [b.manifest.model.name for b in loaded]
    # a model name is a folder of the set: equal names, or names equal but for case (Digits, digits), would collide
    # in one folder on the case-insensitive file systems of macOS, iOS and Windows
    folded = [n.casefold() for n in names]
    if len(set(folded)) != len(folded):
        same = sorted({n for n in names if folded.count(n.casefold()) > 1})
        raise ConfigError(f"two bundles of the same model name ({', '.join(same)}; names that differ only in case "
                          "collide on case-insensitive file systems)",
                          "package one bundle per model (build them with different --name)")
    for bundle in loaded:
        target = bundle.manifest.model.target.value
        if target not in info.targets:
            raise ConfigError(f"{bundle.path} is built for {target}; {platform.value} apps run "
                              f"{'/'.join(info.targets)} models", f"build it with --target {info.targets[0]}")
    versions = {read_header(b.nb_file).opt_version for b in loaded}
    if len(versions) > 1:
        raise BundleError(f"the bundles were written by different opt versions ({', '.join(sorted(versions))}); "
                          "an app links one Paddle-Lite runtime", "rebuild them with one edgekit/paddlelite version")
    destination = Path(destination).absolute()
    with atomic.staging_dir(destination.parent, f".{destination.name}.") as staging:
        models = [_copy_model(bundle, staging) for bundle in loaded]
        index = {"schema": SCHEMA, "platform": platform.value,
                 "created_utc": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
                 "runtime_required": {"opt_version": versions.pop(),
                                      "paddlelite": loaded[0].manifest.model.paddlelite},
                 "models": models, "files": _file_table(staging)}
        atomic.write_json(staging / INDEX, index)
        if sign is not None:
            atomic.write_json(staging / SIGNATURE, signature_record((staging / INDEX).read_bytes(), sign))
        atomic.publish_dir(staging, destination)
    return index


def _copy_model(bundle, staging: Path) -> dict:
    """The files the app needs, as the (verified) manifest lists them: never a link, never a file it does not list."""
    m, model = bundle.manifest, bundle.manifest.model
    folder = staging / model.name
    folder.mkdir()
    wanted = [rel for rel in m.files if rel in MODEL_FILES or rel.startswith("golden/")] + [MANIFEST]
    for rel in sorted(wanted):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bundle.path / rel, folder / rel, follow_symlinks=False)
    return {"name": model.name, "dir": model.name, "task": m.task.kind if m.task is not None else None,
            "target": model.target.value, "precision": model.precision.value, "opt_version": model.opt_version,
            "inputs": [i.to_json() for i in model.inputs], "outputs": list(model.outputs),
            "bundle_manifest_sha256": sha256_file(bundle.path / contracts.MANIFEST)}


def _file_table(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): {"sha256": sha256_file(p), "bytes": p.stat().st_size}
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != INDEX}


def verify_assets(folder: Path) -> list[str]:
    """The same checks an app's loader makes (minus the runtime version and the signature): problems, empty when it
    verifies."""
    from edgekit.build.bundle import file_problems
    from edgekit.contracts.files import check_file_table

    try:
        index = limits.read_json(folder / INDEX, BundleError, "write the asset set again with `edgekit package`")
        if not isinstance(index, dict) or index.get("schema") != SCHEMA:
            found = index.get("schema") if isinstance(index, dict) else type(index).__name__
            return [f"{INDEX} has schema {found!r}, expected {SCHEMA}"]
        listed = check_file_table(index.get("files"), folder / INDEX)
        check_index(index, folder / INDEX)
    except BundleError as exc:
        return [f"{INDEX} unusable: {exc.message}"]
    return file_problems(folder, listed, {INDEX, SIGNATURE}, INDEX) or _versions(folder, index)


# What an app's loader reads of assets.json (native/app/src/assets.cc), typed the same way on both sides: the rule
# of docs/security.md ("What a signed set may contain").
MODEL_ENTRY = {"name": contracts.NAME, "dir": contracts.PATH, "task": contracts.Nullable(contracts.STRING),
               "target": contracts.STRING, "precision": contracts.STRING, "opt_version": contracts.STRING}
INDEX_CONTENTS = {"runtime_required": {"opt_version": contracts.STRING}, "models": [MODEL_ENTRY]}


def check_index(index: dict, file: Path) -> None:
    """assets.json's fields as the app's loader reads them: a BundleError for the first that does not hold."""
    contracts.conform(index, INDEX_CONTENTS, file)
    names = [m["name"] for m in index["models"]]
    if not names:
        raise BundleError(f"{file}: models lists no model", "write the asset set again with `edgekit package`")
    if len(set(names)) != len(names):
        raise BundleError(f"{file}: models names one model twice ({', '.join(sorted(names))})",
                          "write the asset set again with `edgekit package`")
    for i, m in enumerate(index["models"]):
        if f"{m['dir']}/model.nb" not in index["files"]:
            raise BundleError(f"{file}: models[{i}] dir {m['dir']!r} has no model.nb in the file table",
                              "write the asset set again with `edgekit package`")


def _versions(folder: Path, index: dict) -> list[str]:
    """Each model.nb's header names the opt version its entry and runtime_required say (the loader checks it too)."""
    from edgekit.lite.nbfile import read_header

    want = index["runtime_required"]["opt_version"]
    problems = []
    for m in index["models"]:
        try:
            found = read_header(folder / m["dir"] / "model.nb").opt_version
        except EdgekitError as exc:
            problems.append(f"model {m['name']}: {exc.message}")
            continue
        if found != m["opt_version"] or found != want:
            problems.append(f"model {m['name']}: model.nb's header says opt {found}, {INDEX} says "
                            f"{m['opt_version'] if found != m['opt_version'] else want}")
    return problems


# --- authenticity: an optional Ed25519 signature over assets.json (docs/security.md) --------------------------------
# assets.json holds every file's sha256, so signing its exact bytes signs the whole set. The signature file is
# JSON: {"schema": "edgekit.signature/1", "algorithm": "ed25519", "signed": "assets.json",
#        "public_key": <32-byte raw key, hex>, "signature": <64 bytes, hex>}; hex, so a C++ reader needs no base64.

SIGNATURE_SCHEMA = "edgekit.signature/1"
HEX = re.compile(r"[0-9a-f]+")


def _read_key(path: Path, private: bool):
    """An Ed25519 key from a PEM file (`openssl genpkey -algorithm ed25519`; `openssl pkey -pubout` for the public)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    kind = "private" if private else "public"
    try:
        data = Path(path).read_bytes()
        key = (serialization.load_pem_private_key(data, password=None) if private
               else serialization.load_pem_public_key(data))
    except OSError as exc:
        raise ConfigError(f"cannot read the {kind} key {path}: {exc.strerror}", "check the path") from exc
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path} is not an unencrypted PEM {kind} key ({exc})",
                          "make one with `openssl genpkey -algorithm ed25519 -out key.pem` "
                          "(public: `openssl pkey -in key.pem -pubout -out key.pub.pem`)") from exc
    wanted = ed25519.Ed25519PrivateKey if private else ed25519.Ed25519PublicKey
    if not isinstance(key, wanted):
        raise ConfigError(f"{path} is a {type(key).__name__}, not an Ed25519 {kind} key",
                          "make one with `openssl genpkey -algorithm ed25519 -out key.pem`")
    return key


def _raw_public(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def signature_record(index_bytes: bytes, key_file: Path) -> dict:
    key = _read_key(key_file, private=True)
    return {"schema": SIGNATURE_SCHEMA, "algorithm": "ed25519", "signed": INDEX,
            "public_key": _raw_public(key.public_key()).hex(), "signature": key.sign(index_bytes).hex()}


def check_signature(folder: Path, pubkey: Path | None) -> str:
    """One line on the set's signature; with `pubkey`, a SignatureError unless assets.json is signed by that key."""
    from cryptography.exceptions import InvalidSignature

    sig_file = Path(folder) / SIGNATURE
    fix = "sign the set with `edgekit package ... --sign KEY` using the key whose public half you passed"
    if not sig_file.is_file():
        if pubkey is not None:
            raise SignatureError(f"{folder} is not signed (no {SIGNATURE}) but --pubkey requires a signature", fix)
        return "unsigned: the checksums detect corruption, not tampering"
    record = limits.read_json(sig_file, SignatureError, fix)
    # one spelling, as the app's loader reads it: these fields exactly, lowercase hex of the exact length
    wrong = [] if isinstance(record, dict) else ["not an object"]
    for name, want in (("schema", SIGNATURE_SCHEMA), ("algorithm", "ed25519"), ("signed", INDEX)):
        if not wrong and record.get(name) != want:
            wrong.append(f"{name} is not {want!r}")
    for name, digits in (("public_key", 64), ("signature", 128)):
        value = record.get(name) if not wrong else None
        if not wrong and not (isinstance(value, str) and HEX.fullmatch(value) and len(value) == digits):
            wrong.append(f"{name} is not {digits} lowercase hex digits")
    if wrong:
        raise SignatureError(f"{sig_file} is not an {SIGNATURE_SCHEMA} record ({wrong[0]})", fix)
    signer, signature = bytes.fromhex(record["public_key"]), bytes.fromhex(record["signature"])
    key_id = hashlib.sha256(signer).hexdigest()[:16]
    if pubkey is None:
        return f"signed by key {key_id} (not checked: pass --pubkey KEY to check it)"
    key = _read_key(pubkey, private=False)
    if _raw_public(key) != signer:
        raise SignatureError(f"{folder} is signed by key {key_id}, not by {pubkey}", fix)
    try:
        key.verify(signature, (Path(folder) / INDEX).read_bytes())
    except InvalidSignature:
        raise SignatureError(f"the signature in {sig_file} does not match {INDEX}: the set was changed after signing",
                             "package it again from verified bundles, and sign it") from None
    return f"signature verifies: signed by key {key_id} ({pubkey})"


def verify_set(folder: Path, pubkey: Path | None = None) -> list[str]:
    """`edgekit package --verify`: the loader's checks, then the signature; lines to print, or a typed error."""
    folder = Path(folder)
    if not (folder / INDEX).is_file():
        raise BundleError(f"{folder} has no {INDEX}: not an asset set", "write one with `edgekit package`")
    problems = verify_assets(folder)
    if problems:
        raise BundleError(f"asset set {folder} does not verify: {problems[0]}"
                          + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""),
                          "write it again with `edgekit package`")
    count = len(limits.read_json(folder / INDEX, BundleError, "write the asset set again with `edgekit package`")["files"])
    return [f"checksums: all {count} files verify", check_signature(folder, pubkey)]
