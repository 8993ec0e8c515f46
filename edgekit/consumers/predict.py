"""Run bundles on images on the host, as the apps do: the bundle's own preprocess.json, an engine, its task.json.

This is the Python twin of native/'s app core: `edgekit run` and `edgekit ocr` print
what an app built on the same bundles must show, and the golden image results in a
bundle come from here.

    image (BGR uint8) -> PreprocessSpec (preprocess.json) -> engine -> task.postprocess (task.json)

Two engines (ENGINES): the bundle's FP32 x86 twin on the paddlelite wheel, or its own
model.nb on Paddle-Lite's ARM runtime under qemu through tier C's cached runner
(`edgekit.verify.emulator.Emulator`). Only the second runs an INT8 or weight-only model as a
device does, so it is the default for such bundles when a runtime is configured; every
result says which engine produced it.

The OCR system chains three bundles as PaddleOCR does: the detector finds text quads on the page (in
model pixels, mapped back to the image through the detector's stretch or letterbox geometry), each quad is
warped upright out of the original image (`rotate_crop`, PaddleOCR's get_rotate_crop_image), the direction
classifier turns crops it reads as upside down (label "180" with a score above `cls_thresh`), and the
recogniser reads each crop.

A recogniser whose preprocess.json says `width_mode = "dynamic"` gets each line at its own width (up to
`max_width`): crops of one tensor width share an engine call. On the twin each width has a predictor of
its own: Paddle-Lite 2.13's x86 predictor, once run at one width, returns wrong scores at another (max abs
0.73 against ONNX Runtime at width 480 after 320; a fresh predictor: 3.5e-6).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from edgekit.contracts.manifest import Manifest
from edgekit.contracts.preprocess import Geometry, PreprocessSpec
from edgekit.core.images import decode_image
from edgekit.core.errors import BundleError, ConfigError, DataError
from edgekit.core.tables import TARGETS, Precision, Target
from edgekit.tasks import Task, TaskKind, task_of

if TYPE_CHECKING:
    from edgekit.contracts.settings import EmulationConfig, InputSpec
    from edgekit.model.runners import Runner
    from edgekit.verify.emulator import Emulator

CLS_THRESH = 0.9          # PaddleOCR's default: rotate a crop only when the classifier is this sure
SAME_LINE_PIXELS = 10     # PaddleOCR's sorted_boxes: boxes whose tops differ by less are on one line


def read_image(path: Path) -> np.ndarray:
    """The image as every edgekit path decodes it (uint8 BGR or gray, alpha dropped)."""
    if not Path(path).is_file():
        raise DataError(f"image {path} does not exist", "check the path")
    return decode_image(Path(path))


class EngineKind(str, enum.Enum):
    twin = "twin"
    arm = "arm"


@dataclass(frozen=True)
class EngineInfo:
    what: str                 # for the one line a person reads
    emulated: bool


ENGINES: dict[EngineKind, EngineInfo] = {
    EngineKind.twin: EngineInfo("the FP32 x86 twin on the paddlelite wheel", False),
    EngineKind.arm: EngineInfo("model.nb on Paddle-Lite's ARM runtime under qemu", True),
}
HOW_TO_RUN_ARM = ("pass --engine arm with --lite-arm (or EDGEKIT_LITE_ARM) naming Paddle-Lite's ARM Linux runtime "
                  "to run model.nb itself under emulation")


def choose_engine(precision: Precision, target: Target, requested: EngineKind | None,
                  runtime_configured: bool) -> EngineKind:
    """--engine when given; else the ARM model.nb for a reduced-precision ARM bundle when a runtime is configured
    (the twin is FP32: it cannot show what INT8 or weight-only kernels compute), else the twin."""
    has_arm = TARGETS[target].emulation is not None
    if requested is EngineKind.arm and not has_arm:
        raise BundleError(f"this {target.value} bundle has no ARM model to emulate (its model.nb runs on the host, "
                          "as the twin)", "use --engine twin, or build the model for arm64 or armv7")
    if requested is not None:
        return requested
    if precision is not Precision.fp32 and has_arm and runtime_configured:
        return EngineKind.arm
    return EngineKind.twin


def parse_engine(value: str | None) -> EngineKind | None:
    if value is None:
        return None
    try:
        return EngineKind(value)
    except ValueError:
        raise ConfigError(f"engine {value!r} is unknown", f"use one of {', '.join(k.value for k in EngineKind)}") from None


@dataclass(frozen=True)
class Engine:
    """What produced a result: which file of the bundle, at which precision, on which kernels."""

    kind: EngineKind
    model: str                # the file in the bundle: model.nb or host/model_x86.nb
    precision: str            # of the model that ran
    target: str               # of the model that ran
    bundle_precision: str
    cpu: str | None = None    # the CPU profile of an emulated run
    abi: str | None = None

    @classmethod
    def of(cls, manifest: Manifest, kind: EngineKind, cpu: str | None = None) -> "Engine":
        model = manifest.model
        if kind is EngineKind.arm:
            return cls(kind, model.file, model.precision.value, model.target.value, model.precision.value, cpu,
                       TARGETS[model.target].emulation)
        twin = manifest.host_twin
        return cls(kind, twin.file, twin.precision, twin.target, model.precision.value)

    @property
    def stands_in(self) -> bool:
        """The twin answering for a model of another precision: its result is not that model's."""
        return self.kind is EngineKind.twin and self.bundle_precision != Precision.fp32.value

    def describe(self) -> dict:
        found = {"kind": self.kind.value, "model": self.model, "precision": self.precision, "target": self.target,
                 "emulated": ENGINES[self.kind].emulated, "cpu": self.cpu}
        if self.abi:
            found["abi"] = self.abi
        if self.stands_in:
            found["note"] = (f"the FP32 x86 twin produced this result; the {self.bundle_precision} model.nb itself "
                             f"was not run ({HOW_TO_RUN_ARM})")
        return found

    def line(self, role: str = "") -> str:
        who = f"engine{' ' + role if role else ''}: "
        if self.kind is EngineKind.arm:
            return (f"{who}{self.target} {self.precision} {self.model} on Paddle-Lite's ARM runtime under qemu "
                    f"({self.abi}, CPU profile {self.cpu})")
        head = f"{who}{self.model} (FP32 x86 twin on the paddlelite wheel)"
        if self.stands_in:
            return f"{head}; the {self.bundle_precision} model.nb itself was NOT run: {HOW_TO_RUN_ARM}"
        return head


def free_width(shape: Sequence[int], spec: PreprocessSpec) -> tuple[int, ...]:
    """The model's declared input shape with the width free (-1) when the spec makes tensors of the line's width."""
    shape = tuple(shape)
    if not spec.dynamic_width or len(shape) != 4:
        return shape
    axis = 3 if spec.layout == "NCHW" else 2
    return shape[:axis] + (-1,) + shape[axis + 1:]


@dataclass(frozen=True)
class ArmRunner:
    """model.nb under emulation through tier C's Emulator (its runner build is cached): one launch per run()."""

    emulator: Emulator
    nb_file: Path
    expect: tuple[InputSpec, ...]   # per input, from the manifest (the runner checks what Lite does not)
    rows: bool = False        # the graph kept its NMS op: rows + counts (the runner's --rows, lite/nms.py)

    def run(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if self.rows:
            from edgekit.verify import nms

            return nms.emulate(self.emulator, self.nb_file, inputs, self.expect, 1)[0]
        outputs, _ = self.emulator.run(self.nb_file, inputs, self.expect, jobs=1)
        return outputs


@dataclass
class Engines:
    """The engine choice of one `run` / `ocr` call: the --engine flag, the [emulation] settings and the emulators
    prepared so far (one per ABI, so three bundles of one target check the tools and the runner build once)."""

    requested: EngineKind | None
    settings: EmulationConfig | None   # None: no runtime (the twin only)
    timeout: float = 600.0
    prepared: dict[str, Emulator] = field(default_factory=dict)   # ABI -> its emulator

    def kind_for(self, manifest: Manifest) -> EngineKind:
        return choose_engine(manifest.model.precision, manifest.model.target, self.requested,
                             self.settings is not None and self.settings.runtime is not None)

    def emulator(self, abi: str) -> Emulator:
        from edgekit.verify.emulator import Emulator

        if abi not in self.prepared:
            self.prepared[abi] = Emulator.prepare(abi, self.settings, self.timeout)
        return self.prepared[abi]


@dataclass(frozen=True)
class BundleModel:
    """One verified bundle, ready to run on images: its spec, its task and an engine (the x86 twin by default)."""

    path: Path
    spec: PreprocessSpec
    task: Task
    feed: str
    runner: Runner            # anything with run({feed: batch}) -> outputs
    # (dtype, shape) the model declares for its input, -1 = any; checked before it runs (empty: not checked)
    takes: tuple[str, tuple[int, ...]] | tuple[()] = ()
    engine: Engine | None = None

    @classmethod
    def load(cls, path: Path, runner=None, engines: Engines | None = None) -> "BundleModel":
        """The verified bundle on `runner`, else on the engine `engines` picks for it (else its x86 twin); the ARM
        engine is prepared only once the bundle has verified."""
        from edgekit.contracts.preprocess import PreprocessFile
        from edgekit.contracts.task import TaskFile
        from edgekit.consumers.inspection import locked

        bundle = locked(path, twin=True)
        task_file = TaskFile.read(path)
        if task_file is None:
            raise BundleError(f"{path} has no task.json: it was built without labels or ground truth",
                              "rebuild with labelled evaluation data (or a truth file) so the bundle knows its task")
        spec = PreprocessFile.read(path).spec
        if spec is None:
            raise BundleError(f"{path} has no preprocessing spec (it was built from tensor data without [preprocess])",
                              "rebuild with a [preprocess] table so the bundle says how images become its input")
        inputs = bundle.manifest.model.inputs
        if len(inputs) != 1:
            raise BundleError(f"{path}: images feed single-input models; this one has {len(inputs)} inputs",
                              "run it on tensors instead (edgekit parity replays its golden vectors)")
        feed = inputs[0].name
        task = task_of(task_file)
        if runner is not None:
            engine = Engine.of(bundle.manifest, EngineKind.twin)
        else:
            runner, engine = _start(path, bundle.manifest, feed, engines or Engines(EngineKind.twin, None), spec)
        return cls(path, spec, task, feed, runner, (inputs[0].dtype, free_width(inputs[0].shape, spec)), engine)

    def tensor(self, image: np.ndarray) -> np.ndarray:
        return self.spec.apply(image)

    def outputs(self, image: np.ndarray) -> list[np.ndarray]:
        return self.run_batch(self.tensor(image)[None])

    def run_batch(self, batch: np.ndarray) -> list[np.ndarray]:
        """The engine's outputs for a batch of preprocessed tensors (one runner call: one emulator launch)."""
        if self.takes:
            dtype, shape = self.takes
            if batch.dtype.name != dtype or len(shape) != batch.ndim or any(
                    d not in (-1, n) for d, n in zip(shape[1:], batch.shape[1:])):
                # Paddle-Lite does not check what it is fed: a wrong shape is a crash there, an error here
                raise BundleError(f"{self.path}: preprocess.json makes {batch.dtype.name} {list(batch.shape[1:])} "
                                  f"tensors, the model takes {dtype} {list(shape[1:])} (-1 = any)",
                                  "rebuild the bundle with `edgekit build`; its preprocess.json was edited")
        return self.runner.run({self.feed: batch})

    def predict(self, image: np.ndarray) -> object:
        """The task's readable result for one image (detections in the image's own pixels)."""
        return self.predict_many([image])[0]

    def predict_many(self, images: Sequence[np.ndarray]) -> list:
        """predict() for each image, with one engine call per tensor shape (crops of one size share a launch)."""
        tensors = [self.tensor(image) for image in images]
        groups: dict[tuple, list[int]] = {}
        for i, tensor in enumerate(tensors):
            groups.setdefault((tensor.shape, tensor.dtype.str), []).append(i)
        results: list = [None] * len(images)
        for members in groups.values():
            found = self.task.postprocess(self.run_batch(np.stack([tensors[i] for i in members])))
            for i, result in zip(members, found):
                results[i] = self._in_image(result, images[i])
        return results

    def _in_image(self, result: object, image: np.ndarray) -> object:
        if self.task.kind is TaskKind.ocr_det:
            g = _det_geometry(self, image)
            result = [dict(r, box=_box_to_image(r["box"], g), **({"quad": _quad_to_image(r["quad"], g)} if "quad" in r
                                                                 else {})) for r in result]
        if self.task.kind is TaskKind.detection:
            result = self.task.in_image(result, self.spec.geometry(*image.shape[:2]))
        if self.task.kind is TaskKind.segmentation:
            result = self.task.in_image(result, self.spec, *image.shape[:2])
        return result


def _start(path: Path, manifest: Manifest, feed: str, engines: Engines,
           spec: PreprocessSpec | None = None) -> tuple[Runner, Engine]:
    kind = engines.kind_for(manifest)
    dynamic = spec is not None and spec.dynamic_width
    if kind is EngineKind.twin:
        from edgekit.lite.runtime import TwinProcess

        # an untrusted bundle's twin runs in a child: a crash of Lite's native code is exit 3, one line
        twin = path / manifest.host_twin.file
        return TwinProcess(twin, [feed], per_shape=dynamic), Engine.of(manifest, kind)
    from edgekit.contracts.settings import InputSpec

    engine = Engine.of(manifest, kind, engines.settings.cpu)
    # one emulator launch per tensor shape (predict_many groups by shape): each width gets a fresh predictor
    expect = tuple(InputSpec(i.name, free_width(i.shape, spec) if dynamic else i.shape, i.dtype)
                   for i in manifest.model.inputs)
    return ArmRunner(engines.emulator(engine.abi), path / manifest.model.file, expect, manifest.model.nms_kept), engine


DET_MODES = ("stretch", "letterbox")    # a detector's resize whose geometry maps its boxes back to the page


def _det_geometry(det: BundleModel, image: np.ndarray) -> Geometry:
    """Where the page lies in the detector's tensor: a stretch or a letterbox (aspect kept, centred, padded), with a
    centre crop or not. A detector without a resize, or with fit_height, is refused: its tensor's size would follow
    the page, which a fixed model input cannot."""
    if det.spec.resize is None or det.spec.resize_mode not in DET_MODES:
        raise BundleError(f"{det.path}: the detector's preprocessing is "
                          f"{det.spec.resize_mode if det.spec.resize else 'without a resize'}, so its boxes cannot be "
                          "mapped back to the page",
                          'build the detector with [preprocess] resize = [H, W] and resize_mode = "letterbox" (or "stretch")')
    return det.spec.geometry(*image.shape[:2])


def _box_to_image(box: Sequence[float], g: Geometry) -> list[float]:
    """A detector box in tensor pixels -> page pixels, to 0.01 px (numpy's round: the box holds numpy floats)."""
    (x0, y0), (x1, y1) = g.point_to_image(box[0], box[1]), g.point_to_image(box[2], box[3])
    return [round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2)]


def _quad_to_image(quad: Sequence[Sequence[float]], g: Geometry) -> list[list[float]]:
    return [[round(x, 2), round(y, 2)] for x, y in (g.point_to_image(px, py) for px, py in quad)]


def sort_boxes(boxes: Sequence[Sequence[float]]) -> list[int]:
    """Reading order, as PaddleOCR's sorted_boxes: by top then left; neighbours less than 10 px apart in height
    are one line, ordered left to right. Returns indices into `boxes`."""
    order = sorted(range(len(boxes)), key=lambda i: (boxes[i][1], boxes[i][0]))
    for i in range(len(order) - 1):
        for j in range(i, -1, -1):
            a, b = boxes[order[j]], boxes[order[j + 1]]
            if abs(b[1] - a[1]) < SAME_LINE_PIXELS and b[0] < a[0]:
                order[j], order[j + 1] = order[j + 1], order[j]
            else:
                break
    return order


def _article(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def crop(image: np.ndarray, box: Sequence[float]) -> np.ndarray:
    """The pixels a box covers: edges rounded outwards (floor/ceil), clamped to the image."""
    height, width = image.shape[:2]
    x0, y0 = max(0, math.floor(box[0])), max(0, math.floor(box[1]))
    x1, y1 = min(width, math.ceil(box[2])), min(height, math.ceil(box[3]))
    return image[y0:y1, x0:x1]


def _square_to_quad(quad: np.ndarray) -> tuple[float, ...]:
    """The projective map (a, b, c, d, e, f, g, h) taking the unit square's corners (0,0), (1,0), (1,1), (0,1) to
    the quad's (Heckbert's closed form): x = (a s + b t + c) / (g s + h t + 1), y = (d s + e t + f) / (...)."""
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = (tuple(float(v) for v in p) for p in quad)
    sx, sy = x0 - x1 + x2 - x3, y0 - y1 + y2 - y3
    if sx == 0.0 and sy == 0.0:
        return x1 - x0, x2 - x1, x0, y1 - y0, y2 - y1, y0, 0.0, 0.0
    dx1, dx2, dy1, dy2 = x1 - x2, x3 - x2, y1 - y2, y3 - y2
    den = dx1 * dy2 - dx2 * dy1
    if den == 0.0:
        return x1 - x0, x3 - x0, x0, y1 - y0, y3 - y0, y0, 0.0, 0.0
    g, h = (sx * dy2 - dx2 * sy) / den, (dx1 * sy - sx * dy1) / den
    return x1 - x0 + g * x1, x3 - x0 + h * x3, x0, y1 - y0 + g * y1, y3 - y0 + h * y3, y0, g, h


def rotate_crop(image: np.ndarray, quad: Sequence[Sequence[float]]) -> np.ndarray:
    """PaddleOCR's get_rotate_crop_image: the quad (top-left, top-right, bottom-right, bottom-left) warped to an
    upright crop as wide as its longer top/bottom edge and as high as its longer side edge (int()), sampled
    bilinearly with replicated borders, rounded; turned 90 degrees counter-clockwise when height / width >= 1.5.
    native/app/src/ocr.cc repeats it in the same float64 steps."""
    pts = np.asarray(quad, np.float64).reshape(4, 2)
    norm = lambda a, b: math.sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]))  # noqa: E731
    width = int(max(norm(pts[0], pts[1]), norm(pts[2], pts[3])))
    height = int(max(norm(pts[0], pts[3]), norm(pts[1], pts[2])))
    if width < 1 or height < 1:
        return image[:0, :0]
    a, b, c, d, e, f, g, h = _square_to_quad(pts)
    s = (np.arange(width, dtype=np.float64) / width)[None, :]
    t = (np.arange(height, dtype=np.float64) / height)[:, None]
    w = g * s + h * t + 1.0
    x = (a * s + b * t + c) / w
    y = (d * s + e * t + f) / w
    rows, cols = image.shape[:2]
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    xa, xb = np.clip(x0, 0, cols - 1).astype(np.intp), np.clip(x0 + 1, 0, cols - 1).astype(np.intp)
    ya, yb = np.clip(y0, 0, rows - 1).astype(np.intp), np.clip(y0 + 1, 0, rows - 1).astype(np.intp)
    src = image.reshape(rows, cols, -1).astype(np.float64)
    top = src[ya, xa] * (1.0 - fx) + src[ya, xb] * fx
    bottom = src[yb, xa] * (1.0 - fx) + src[yb, xb] * fx
    out = np.clip(np.floor(top * (1.0 - fy) + bottom * fy + 0.5), 0, 255).astype(np.uint8).reshape(
        (height, width) + image.shape[2:])
    if height / width >= 1.5:
        out = np.rot90(out)
    return np.ascontiguousarray(out)


def ocr_system(image: np.ndarray, det: BundleModel, rec: BundleModel, cls: BundleModel | None = None,
               cls_thresh: float = CLS_THRESH) -> list[dict]:
    """Text lines of a page: box (image pixels), text and confidence, direction when a classifier is given."""
    for model, kind in ((det, TaskKind.ocr_det), (rec, TaskKind.ocr_rec), (cls, TaskKind.ocr_cls)):
        if model is not None and model.task.kind is not kind:
            raise BundleError(f"{model.path} is {_article(model.task.kind.value)} bundle, not {kind.value}",
                              "pass the detection, recognition and direction bundles in their places")
    found = det.predict(image)
    boxes = [r["box"] for r in found]
    lines, pieces = [], []
    for index in sort_boxes(boxes):
        quad = found[index].get("quad")
        piece = rotate_crop(image, quad) if quad is not None else crop(image, boxes[index])
        if piece.shape[0] < 1 or piece.shape[1] < 1:
            continue
        lines.append({"box": boxes[index], **({"quad": quad} if quad is not None else {}),
                      "det_score": found[index]["score"]})
        pieces.append(piece)
    if not pieces:
        return lines
    # all crops of one model in one engine call: under emulation that is one qemu launch, not one per line
    if cls is not None:
        for k, (line, direction) in enumerate(zip(lines, cls.predict_many(pieces))):
            line["angle"], line["angle_score"] = direction["label"], direction["score"]
            if direction["label"] == "180" and direction["score"] > cls_thresh:
                pieces[k] = np.ascontiguousarray(pieces[k][::-1, ::-1])
    for line, read in zip(lines, rec.predict_many(pieces)):
        line["text"], line["confidence"] = read["text"], read["confidence"]
    return lines
