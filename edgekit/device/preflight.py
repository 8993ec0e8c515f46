"""Everything the suite checks on the host before it touches a device.

Per bundle: every checksum (`inspection.verified`), a target with an ARM runner, and the
version lock: the `.nb` header's opt version must equal the manifest's and the version
of the Paddle-Lite runtime that will be pushed (asked from the runtime itself, under
qemu). Then the golden vectors and, with `--eval`, the evaluation subset, read with the
bundle's own preprocessing and task. A bundle that fails here is never pushed.

Per ABI: the runtime from EDGEKIT_LITE_ARM and the runner cross-built against it
(cached by content: `edgekit.lite.native.build`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from edgekit.contracts.golden import GoldenTolerances
from edgekit.contracts.manifest import Manifest
from edgekit.core.errors import BundleError, ConfigError, DataError, EdgekitError, InputModelError

if TYPE_CHECKING:
    from edgekit.lite.native import LiteRuntime, NativeBuild
    from edgekit.model.evalset import EvalSet
    from edgekit.tasks import Task


@dataclass(frozen=True)
class Runtime:
    """One ABI's runner build and the Lite library it is pushed with."""

    abi: str
    lite: LiteRuntime
    build: NativeBuild
    version: str            # the library's GetVersion(): what every .nb must have been written by

    @property
    def runner(self) -> Path:
        return self.build.runner

    @property
    def library(self) -> Path:
        return self.lite.library


@dataclass(frozen=True)
class WideGolden:
    """A dynamic-width bundle's golden group at another tensor width (contracts.golden.GoldenGroup): one more launch
    a cell."""

    width: int
    feeds: Mapping[str, Path]                  # input name -> its golden .npy in the bundle
    reference: tuple[np.ndarray, ...]
    expect: tuple[str, ...]                    # the model's inputs with the width axis free


@dataclass(frozen=True)
class Prepared:
    """One bundle as the suite runs it, or why it cannot run (`error`, found in `phase`)."""

    index: int
    info: dict                                 # what the results say about the bundle
    error: EdgekitError | None = None
    phase: str = "integrity"
    nb_file: Path | None = None
    abi: str | None = None
    feeds: Mapping[str, Path] | None = None    # input name -> golden .npy in the bundle
    reference: tuple[np.ndarray, ...] = ()
    output_names: tuple[str, ...] = ()
    tolerances: GoldenTolerances | None = None
    expect: tuple[str, ...] = ()               # --expect NAME:SHAPE:DTYPE for the runner
    evaluation: EvalSet | None = None          # the subset, with --eval
    eval_source: str | None = None
    rows: bool = False                         # an NMS op kept in the graph: rows + a count per sample (--rows)
    task: Task | None = None                   # a detection/segmentation task (task.json): golden detections / masks
    wide: tuple[WideGolden, ...] = ()          # golden groups at other widths (preprocess width_mode = "dynamic")

    @property
    def key(self) -> str:
        return self.info["key"]


def runtime_for(lite_arm: Path | None, abi: str) -> Runtime:
    from edgekit.verify.emulator import native_cache
    from ..lite import native

    if lite_arm is None:
        raise ConfigError("no Paddle-Lite ARM Linux runtime to push to the devices",
                          "set EDGEKIT_LITE_ARM (or --lite-arm) to the folder holding inference_lite_lib.armlinux.armv8 "
                          "(and .armv7hf) of the bundles' opt version")
    native.check_tools(abi)
    lite = native.find_runtime(lite_arm, abi)
    build = native.build(abi, lite, native_cache())
    return Runtime(abi, lite, build, native.runtime_version(build, lite))


def _info(path: Path, manifest: Manifest | None) -> dict:
    if manifest is None:
        return {"path": str(Path(path).absolute()), "key": Path(path).name, "model": None, "target": None,
                "precision": None, "opt_version": None, "nb_sha256": None}
    model = manifest.model
    listed = manifest.files.get(model.file)
    return {"path": str(Path(path).absolute()), "key": f"{model.name}/{model.target.value}-{model.precision.value}",
            "model": model.name, "target": model.target.value, "precision": model.precision.value,
            "opt_version": model.opt_version, "nb_sha256": listed.sha256 if listed is not None else None}


def prepare(index: int, path: Path, runtimes: dict[str, Runtime], lite_arm: Path | None,
            eval_data: Path | None, eval_samples: int) -> Prepared:
    """One bundle through every host-side check; host problems (no runtime, no compiler) raise."""
    from edgekit.build import bundle as bundle_mod
    from edgekit.consumers.inspection import golden_groups, golden_vectors, verified
    from ..lite.nbfile import read_header
    from edgekit.core.tables import TARGETS

    path = Path(path)
    manifest = None
    try:
        manifest = bundle_mod.load(path).manifest if (path / bundle_mod.MANIFEST).is_file() else None
    except BundleError:
        pass
    info = _info(path, manifest)
    try:
        bundle = verified(path)
    except BundleError as exc:
        return Prepared(index, info, exc, "integrity")
    m = bundle.manifest
    abi = TARGETS[m.model.target].emulation
    if abi is None:
        return Prepared(index, info, ConfigError(f"{path} is an x86 bundle: it runs on the host, not on a device",
                                                 "test an arm64 or armv7 bundle"), "integrity")
    info["abi"] = abi
    if abi not in runtimes:
        runtimes[abi] = runtime_for(lite_arm, abi)
    runtime = runtimes[abi]
    try:
        header = read_header(bundle.nb_file)
    except EdgekitError as exc:
        return Prepared(index, info, exc, "version lock")
    if header.opt_version != m.model.opt_version or header.opt_version != runtime.version:
        return Prepared(index, info, InputModelError(
            f"version lock: {path.name}'s model.nb was written by opt {header.opt_version} (manifest: "
            f"{m.model.opt_version}) but the {abi} runtime to push is Paddle-Lite {runtime.version}",
            f"rebuild the bundle with opt {runtime.version}, or point EDGEKIT_LITE_ARM at a {header.opt_version} runtime"),
            "version lock")
    feeds, reference, names = golden_vectors(bundle)
    golden = m.golden
    expect = tuple(i.text for i in m.model.inputs)
    wide = tuple(WideGolden(g.width, {i.name: path / i.file for i in g.inputs}, tuple(golden_vectors(bundle, g)[1]),
                            tuple(d.text for d in g.expect(m.model.inputs))) for g in golden_groups(bundle)[1:])
    evaluation = None
    if eval_data is not None:
        try:
            evaluation = load_eval(path, m, Path(eval_data), eval_samples)
        except (DataError, ConfigError, BundleError) as exc:
            return Prepared(index, info, exc, "eval data")
    return Prepared(index, info, None, "ready", bundle.nb_file, abi,
                    {i.name: path / i.file for i in golden.main.inputs}, tuple(reference), tuple(names),
                    golden.tolerances, expect, evaluation, str(eval_data) if eval_data else None,
                    m.model.nms_kept, _golden_task(path), wide)


def _golden_task(path: Path):
    """The bundle's task.json task when its golden outputs are judged in its own terms (`golden_key`: detection's
    matched boxes, segmentation's class maps), which `checks.golden_matching` post-processes with."""
    from edgekit.contracts.task import TaskFile
    from ..tasks import task_of

    try:
        task_file = TaskFile.read(path)
        task = task_of(task_file) if task_file is not None else None
    except EdgekitError:
        return None
    return task if getattr(task, "golden_key", None) else None


def load_eval(path: Path, manifest: Manifest, data: Path, count: int):
    """`data` read as the bundle reads images (preprocess.json) and scored in its task (task.json), `count` samples
    spread over it. Needs ground truth: class folders / a .npz `labels` array, or a truth file beside the data."""
    from edgekit.contracts.preprocess import PreprocessFile
    from edgekit.contracts.task import TaskFile
    from edgekit.model.data import load_samples
    from edgekit.model.evalset import EvalSet
    from ..tasks import find_truth, task_of

    task_file = TaskFile.read(path)
    if task_file is None:
        raise BundleError(f"{path} has no task.json, so --eval has no metric to compute",
                          "rebuild the bundle with labelled evaluation data")
    spec = PreprocessFile.read(path).spec
    inputs = manifest.model.inputs
    labels = task_file.options.get("labels")
    samples = load_samples(data, [i.name for i in inputs], spec, labels)
    for declared in inputs:
        got = samples.inputs[declared.name]
        want = list(declared.shape)
        if got.ndim != len(want) or any(w != -1 and w != g for w, g in zip(want[1:], got.shape[1:])):
            raise DataError(f"--eval {data}: input {declared.name!r} has samples of shape {list(got.shape[1:])}, "
                            f"the bundle's model wants {want[1:]}", "give data the bundle's preprocessing turns into that")
    samples = samples.with_inputs({i.name: samples.inputs[i.name].astype(i.dtype, copy=False) for i in inputs})
    task = task_of(task_file)
    stored = find_truth(data, len(samples))
    if stored is not None:
        evaluation = EvalSet(samples, task, tuple(stored.values))
    elif samples.labels is not None:
        evaluation = EvalSet(samples, task, tuple(int(v) for v in samples.labels))
    else:
        raise DataError(f"--eval {data} has no ground truth", "use class sub-folders (named as in the bundle's labels), "
                        "a .npz with a 'labels' array, or a truth file beside the data")
    return evaluation.spread(count)
