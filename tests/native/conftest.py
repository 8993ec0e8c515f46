"""Fixtures for native/: builds per ABI (cached by content), the emulation policy, real .nb files.

Policy (one place, `emulation`): without EDGEKIT_LITE_ARM, a cross compiler, qemu or cmake
the tests that need them skip and say why; with EDGEKIT_REQUIRE_EMULATION=1 (CI) they fail.
A build that starts and breaks always fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgekit.core.errors import ConfigError
from edgekit.lite import cmake, native


def _required() -> bool:
    return os.environ.get("EDGEKIT_REQUIRE_EMULATION", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def native_cache() -> Path:
    """The real cache: builds are keyed by every input, so a stale entry is never reused."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "edgekit"


@pytest.fixture(scope="session")
def emulation(native_cache):
    """need(abi) -> (runtime or None, NativeBuild); skips (or, when required, fails) if unavailable."""
    made: dict = {}

    def need(abi: str):
        if abi not in made:
            try:
                native.check_tools(abi)
                runtime = None
                if abi != "host":
                    root = os.environ.get("EDGEKIT_LITE_ARM")
                    if not root:
                        raise native.EmulationUnavailable(
                            "EDGEKIT_LITE_ARM is not set", "point it to the folder holding inference_lite_lib.armlinux.*")
                    runtime = native.find_runtime(root, abi)
                made[abi] = (runtime, native.build(abi, runtime, native_cache))
            except (native.EmulationUnavailable, ConfigError) as exc:
                made[abi] = exc
        got = made[abi]
        if isinstance(got, Exception):
            reason = f"{abi}: {got.message} ({got.hint})"
            if _required():
                pytest.fail(f"EDGEKIT_REQUIRE_EMULATION=1 but {reason}")
            pytest.skip(reason)
        return got

    return need


@pytest.fixture(scope="session")
def run_native():
    """run_native(abi, runtime, build, argv, profile="default"): a native binary of `abi`, under qemu for ARM."""

    def run(abi: str, runtime, build, argv: list, profile="default"):
        prefix = native.emulator_argv(abi, runtime, profile, shim=build.shim)
        return subprocess.run(prefix + [str(a) for a in argv], capture_output=True, text=True, timeout=300)

    return run


@pytest.fixture(scope="session")
def core_jobs(emulation, run_native):
    """core_jobs(abi, jobs, folder) -> (report, process): edgekit-core-tool runs a list of pre/post-processing
    jobs in one process, so qemu starts once for hundreds of cases."""

    def run(abi: str, jobs: list, folder):
        runtime, build = emulation(abi)
        folder.mkdir(parents=True, exist_ok=True)
        jobs_file, report_file = folder / "jobs.json", folder / "report.json"
        jobs_file.write_text(json.dumps(jobs, ensure_ascii=False), encoding="utf-8")
        done = run_native(abi, runtime, build, [build.root / "edgekit-core-tool", "jobs", jobs_file, report_file])
        assert report_file.is_file(), f"{abi}: exit {done.returncode}: {done.stderr[-2000:]}"
        report = json.loads(report_file.read_text(encoding="utf-8"))
        assert len(report["jobs"]) == len(jobs)
        return report, done

    return run


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny FP32 model exported with paddle.jit.save and converted for arm by opt, plus its reference."""
    from edgekit.contracts.settings import InputSpec
    from edgekit.export import StaticRunner
    from edgekit.export.dygraph import export_layer
    from edgekit.lite import convert, read_header
    from native_models import tiny_conv

    folder = tmp_path_factory.mktemp("tiny")
    spec = InputSpec("x", (-1, 3, 8, 8), "float32")
    samples = {"x": np.random.default_rng(0).standard_normal((7, 3, 8, 8)).astype(np.float32)}
    static = export_layer(tiny_conv(), [spec], folder / "export", samples, "tiny conv")
    lite = convert(static, "arm", folder / "model.nb", timeout=300, target="arm64", precision="fp32")
    reference = StaticRunner(static).run(samples)
    return {"nb": lite.nb_file, "spec": spec, "feeds": samples, "reference": reference,
            "pdmodel": static.model_file, "opt_version": read_header(lite.nb_file).opt_version}


@pytest.fixture(scope="session")
def digits_int8(tmp_path_factory):
    """The bundled digits example built for arm64 INT8 by the real CLI: model.nb plus golden vectors."""
    out = tmp_path_factory.mktemp("digits-int8")
    env = dict(os.environ, EDGEKIT_CACHE_DIR=str(out / "cache"))
    argv = [sys.executable, "-c", "from edgekit.cli import main; main()", "build", "--target", "arm64",
            "--quant", "int8", "--out", str(out), "--no-emulation"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    bundle = next(out.rglob("model.nb")).parent
    return bundle


# ------------------------------------------------------------- the app core and camera_demo

REPO = Path(__file__).resolve().parents[2]
CAMERA_DEMO = REPO / "camera_demo"


def _edgekit_cli(argv: list, *, timeout: float = 900, env: dict | None = None) -> str:
    """The real edgekit CLI in a child process; its stdout (fails the test with the tail of its output)."""
    done = subprocess.run([sys.executable, "-c", "from edgekit.cli import main; main()", *map(str, argv)],
                          capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, f"edgekit {argv[0]}: " + done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="session")
def edgekit_cli():
    """edgekit_cli(argv, timeout=..., env=...) -> stdout of the real CLI in a child process."""
    return _edgekit_cli


@pytest.fixture(scope="session")
def digits_fp32(tmp_path_factory):
    """The bundled digits example built for arm64 FP32 (named digits-fp32 so it packages beside the INT8 one)."""
    out = tmp_path_factory.mktemp("digits-fp32")
    env = dict(os.environ, EDGEKIT_CACHE_DIR=str(out / "cache"))
    _edgekit_cli(["build", "--target", "arm64", "--quant", "fp32", "--name", "digits-fp32", "--out", out,
                 "--no-emulation", "--quiet"], env=env)
    return next(out.rglob("model.nb")).parent


@pytest.fixture(scope="session")
def digits_assets(tmp_path_factory, digits_fp32, digits_int8):
    """`edgekit package --platform linux` of the digits FP32 and INT8 bundles: the asset set a board app loads."""
    out = tmp_path_factory.mktemp("digits-assets") / "assets"
    _edgekit_cli(["package", digits_fp32, digits_int8, "--platform", "linux", "--out", out])
    return out


def render_ocr_page(folder: Path) -> Path:
    """One 400x800 page (not the detector's 320x640, so boxes are scaled back) with three lines, the last
    one turned upside down (the direction classifier must turn it back)."""
    import cv2

    from edgekit.examples.ppocr.make_data import render_page

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    page, boxes = render_page(rng, (400, 800), (3, 3))
    x0, y0, x1, y1 = (int(v) for v in boxes[-1])
    page[y0:y1, x0:x1] = page[y0:y1, x0:x1][::-1, ::-1]
    cv2.imwrite(str(folder / "page0.png"), page)
    return folder


@pytest.fixture(scope="session")
def ocr_assets(tmp_path_factory):
    """FP32 arm64 PP-OCR det, cls and rec bundles built by the real CLI on small rendered sets (the det bundle's
    golden image is the test page), and their linux asset set."""
    from edgekit.examples.ppocr import models

    root = tmp_path_factory.mktemp("ppocr")
    data = root / "data"
    done = subprocess.run([sys.executable, "-m", "edgekit.examples.ppocr.make_data", str(data), "--det-calib", "1",
                           "--det-eval", "1", "--rec-calib", "1", "--rec-eval", "8", "--cls-calib", "1", "--cls-eval", "4"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    pages = render_ocr_page(root / "pages")
    images = {"det": pages, "rec": data / "rec_images", "cls": data / "cls_images"}
    bundles = {}
    for role in ("det", "cls", "rec"):
        out = root / "bundles" / role
        _edgekit_cli(["build", "-c", REPO / "edgekit" / "examples" / "ppocr" / f"{role}.toml", "-m", models.model_path(role),
                     "--eval", data / f"{role}_eval.npz", "--quant", "fp32", "--out", out, "--no-emulation",
                     "--images", images[role], "--quiet"],
                    env=dict(os.environ, EDGEKIT_CACHE_DIR=str(root / "cache")))
        bundles[role] = next(out.rglob("model.nb")).parent
    assets = root / "assets"
    _edgekit_cli(["package", bundles["det"], bundles["cls"], bundles["rec"], "--platform", "linux", "--out", assets])
    return {"assets": assets, "bundles": bundles, "pages": pages, "data": data}


def _camera_demo_key(abi: str, runtime) -> str:
    digest = hashlib.sha256(native.build_key(native.Abi(abi), runtime)[0].encode())
    for path in sorted(p for p in CAMERA_DEMO.rglob("*") if p.is_file() and "assets" not in p.parts):
        digest.update(str(path.relative_to(CAMERA_DEMO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def camera_demo(emulation, native_cache):
    """camera_demo(abi) -> (runtime, folder with camera_demo and libedgekit_c.so): camera_demo/ configured with
    native/ as a subdirectory, cross-compiled for ARM with the toolchain files; cached by content."""
    made: dict = {}

    def need(abi: str):
        if abi not in made:
            runtime, _ = emulation(abi)           # the policy: skip or fail without tools / runtime
            spec = native.ABIS[native.Abi(abi)]
            final = native_cache / "camera_demo" / f"{abi}-{_camera_demo_key(abi, runtime)}"
            if not (final / "camera_demo").is_file():
                scratch = final.with_name(final.name + ".partial")
                shutil.rmtree(scratch, ignore_errors=True)
                configure = ["cmake", "-S", str(CAMERA_DEMO), "-B", str(scratch), "-G", cmake.cmake_generator()]
                if spec.toolchain:
                    configure.append(f"-DCMAKE_TOOLCHAIN_FILE={cmake.NATIVE_DIR / 'cmake' / spec.toolchain}")
                if runtime is not None:
                    configure.append(f"-DEDGEKIT_LITE_DIR={runtime.cxx_dir}")
                for argv in (configure, ["cmake", "--build", str(scratch), "--parallel", str(os.cpu_count() or 2)]):
                    done = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
                    assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
                for old in final.parent.glob(f"{abi}-*"):      # other keys are never reused
                    if old != scratch:
                        shutil.rmtree(old, ignore_errors=True)
                scratch.rename(final)
            made[abi] = (runtime, final)
        return made[abi]

    return need


def pytest_collection_modifyitems(config, items):
    """Everything here builds native/ with cmake: the `native` mark keeps it out of the fast tier."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.native)
