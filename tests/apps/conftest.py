"""Fixtures for the apps' host tests: a real packaged asset set, its tampered copies, the JDK and JUnit.

Policy as elsewhere: without javac/java, JUnit 4 (Debian: junit4), cmake or a C++ compiler the
tests skip and say why; with EDGEKIT_REQUIRE_EMULATION=1 (CI) they fail instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from apps_support import ROOT, unavailable

OTHER_OPT = "v2.12"


@dataclass(frozen=True)
class Jvm:
    javac: Path
    java: Path
    java_home: Path
    classpath: tuple[Path, ...]  # JUnit 4 and Hamcrest


@pytest.fixture(scope="session")
def jvm() -> Jvm:
    javac, java = shutil.which("javac"), shutil.which("java")
    if not javac or not java:
        unavailable("javac/java are not on PATH")
    jars = [Path("/usr/share/java/junit4.jar"), Path("/usr/share/java/hamcrest-core.jar")]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        unavailable(f"JUnit 4 is not installed ({', '.join(missing)} missing)")
    for tool in ("cmake", "c++"):
        if not shutil.which(tool):
            unavailable(f"{tool} is not on PATH")
    java_home = Path(javac).resolve().parent.parent
    if not (java_home / "include" / "jni.h").is_file():
        unavailable(f"{java_home} has no include/jni.h (a JRE, not a JDK)")
    return Jvm(Path(javac), Path(java), java_home, tuple(jars))


def _edgekit(*argv: str, env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-c", "from edgekit.cli import main; main()", *argv],
                          capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, f"edgekit {' '.join(argv)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _set_nb_version(nb: Path, version: str) -> None:
    """Rewrite the .nb header's opt version (uint16 format, then 16 NUL-padded bytes)."""
    data = bytearray(nb.read_bytes())
    data[2:18] = version.encode().ljust(16, b"\0")
    nb.write_bytes(bytes(data))


def _resign(folder: Path, rel: str, opt_version: str | None = None) -> None:
    """Update assets.json after a deliberate change, so only the change under test remains."""
    index_file = folder / "assets.json"
    index = json.loads(index_file.read_text(encoding="utf-8"))
    index["files"][rel] = {"sha256": _sha256(folder / rel), "bytes": (folder / rel).stat().st_size}
    if opt_version:
        index["runtime_required"]["opt_version"] = opt_version
        for model in index["models"]:
            model["opt_version"] = opt_version
    index_file.write_text(json.dumps(index, indent=1), encoding="utf-8")


@dataclass(frozen=True)
class AssetSets:
    assets: Path          # `edgekit package --platform android` of the digits example
    index: dict
    checksum: Path        # one byte of model.nb changed
    missing: Path         # a listed file deleted
    missing_file: str
    header: Path          # model.nb's header names another opt than the index (re-signed)
    other_opt: Path       # a consistent set written by another opt (header, index, checksums)
    unicode: Path         # the intact set under a non-ASCII folder name
    golden: dict          # golden/golden.json

    def properties(self) -> dict[str, str]:
        files = self.index["files"]
        return {"assets": str(self.assets), "tampered.checksum": str(self.checksum),
                "tampered.missing": str(self.missing), "tampered.missing.file": self.missing_file,
                "tampered.header": str(self.header), "other_opt": str(self.other_opt), "unicode": str(self.unicode),
                "expect.files": str(len(files)), "expect.bytes": str(sum(f["bytes"] for f in files.values())),
                "expect.images": str(len(self.golden["images"]["files"])), "expect.vectors": str(self.golden["count"])}


@pytest.fixture(scope="session")
def asset_sets(tmp_path_factory) -> AssetSets:
    """The bundled digits example built for arm64 (FP32, tier C skipped) and packaged for Android, plus copies
    with one defect each."""
    from edgekit.lite import read_header

    root = tmp_path_factory.mktemp("apps-assets")
    env = dict(os.environ, EDGEKIT_CACHE_DIR=str(root / "cache"))
    _edgekit("build", "--target", "arm64", "--no-emulation", "--out", str(root / "build"), env=env)
    bundle = next((root / "build").rglob("model.nb")).parent
    assets = root / "assets"
    _edgekit("package", "--platform", "android", "--out", str(assets), str(bundle), env=env)
    index = json.loads((assets / "assets.json").read_text(encoding="utf-8"))
    golden = json.loads((assets / "digits" / "golden" / "golden.json").read_text(encoding="utf-8"))

    def copy(name: str) -> Path:
        return Path(shutil.copytree(assets, root / name))

    checksum = copy("checksum")
    nb = checksum / "digits" / "model.nb"
    data = bytearray(nb.read_bytes())
    data[len(data) // 2] ^= 0x01
    nb.write_bytes(bytes(data))

    missing = copy("missing")
    missing_file = "digits/golden/images/0003.png"
    (missing / missing_file).unlink()

    header = copy("header")
    _set_nb_version(header / "digits" / "model.nb", OTHER_OPT)
    _resign(header, "digits/model.nb")

    other_opt = copy("other-opt")
    _set_nb_version(other_opt / "digits" / "model.nb", OTHER_OPT)
    _resign(other_opt, "digits/model.nb", opt_version=OTHER_OPT)
    assert read_header(other_opt / "digits" / "model.nb").opt_version == OTHER_OPT

    unicode = copy("资产-ässets-😀")
    return AssetSets(assets, index, checksum, missing, missing_file, header, other_opt, unicode, golden)


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "edgekit"


@pytest.fixture(scope="session")
def host_jni(jvm) -> Path:
    """tests/apps/host built with CMake (incrementally, in edgekit's cache): the Lite-free bridge in the root,
    the replay one in replay/."""
    key = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    build = _cache_root() / f"apps-host-{key}"
    env = dict(os.environ, JAVA_HOME=str(jvm.java_home))
    generator = ["-G", "Ninja"] if shutil.which("ninja") and not (build / "CMakeCache.txt").is_file() else []
    configure = subprocess.run(["cmake", "-S", str(ROOT / "tests" / "apps" / "host"), "-B", str(build), *generator],
                               capture_output=True, text=True, timeout=600, env=env)
    assert configure.returncode == 0, configure.stdout[-3000:] + configure.stderr[-3000:]
    done = subprocess.run(["cmake", "--build", str(build), "--parallel"], capture_output=True, text=True,
                          timeout=1800, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for lib in (build / "libedgekit_jni.so", build / "libedgekit_c.so", build / "replay" / "libedgekit_jni.so"):
        assert lib.is_file(), f"{lib} was not built"
    return build


@pytest.fixture(scope="session")
def java_classes(jvm, tmp_path_factory) -> Path:
    """The app's Java API (android_demo/.../core) and the JUnit tests, compiled by javac with warnings as errors."""
    out = tmp_path_factory.mktemp("classes")
    sources = sorted((ROOT / "android_demo/app/src/main/java/com/edgekit/demo/core").glob("*.java"))
    sources += sorted((ROOT / "tests/apps/java").rglob("*.java"))
    cp = os.pathsep.join(str(j) for j in jvm.classpath)
    done = subprocess.run([str(jvm.javac), "-Xlint:all", "-Werror", "-encoding", "UTF-8", "-d", str(out), "-cp", cp,
                           *map(str, sources)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def pytest_collection_modifyitems(config, items):
    """Everything here builds an asset set and native/ code: the `native` mark keeps it out of the fast tier."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.native)
