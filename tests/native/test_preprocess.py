"""The app core's preprocessing (native/core, through edgekit-core-tool) against the Python definition,
`PreprocessSpec.apply` on opencv-python 4.6.0: float32 tensors equal bit for bit (0 LSB), on the host and
on aarch64 and armhf under qemu.

Cases: random images of many sizes (scaled up and down, exact 2x / 3x / 4x, odd and mixed factors, the same
size, one-pixel images; text lines wide and narrow) x specs (gray / rgb / bgr, linear / nearest / area, crop,
per-channel mean and std, NCHW / NHWC, fit_height with padding, fit_height at the line's own width (width_mode
dynamic: max_width, width_step), the PP-OCR and digits specs of the examples),
fed as the apps have them: gray, BGR, RGB, BGRA and RGBA arrays (Python gets the BGR or gray equivalent, as
cv2 decodes it), plus real digit PNGs and 600 specs drawn at random, each with an image of a random size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from edgekit.contracts.settings import load_toml
from edgekit.contracts.preprocess import PreprocessFile
from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.core.images import decode_image
from edgekit.tasks.ocr import line_spec, page_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "edgekit" / "examples"
ABIS = ["host", pytest.param("aarch64", marks=pytest.mark.e2e), pytest.param("armhf", marks=pytest.mark.e2e)]
MODES = ("gray", "bgr", "rgb", "bgra", "rgba")     # how the app hands the pixels over


def example_spec(path: Path) -> PreprocessSpec:
    return PreprocessSpec.from_mapping(load_toml(path)["preprocess"])


def specs() -> dict[str, PreprocessSpec]:
    return {
        "digits": example_spec(EXAMPLES / "digits" / "edgekit.toml"),
        "ppocr-det": example_spec(EXAMPLES / "ppocr" / "det.toml"),
        "ppocr-rec": example_spec(EXAMPLES / "ppocr" / "rec.toml"),
        "ppocr-cls": example_spec(EXAMPLES / "ppocr" / "cls.toml"),
        "ppocr-rec-dynamic": example_spec(EXAMPLES / "ppocr" / "rec_dynamic.toml"),
        # PP-OCRv5 rec as its inference.yml reads (export/paddlex.py): a long line gets int(48 * w / h) columns
        "ppocrv5-rec-dynamic": PreprocessSpec(color="bgr", resize=(48, 320), resize_mode="fit_height", scale=1 / 255,
                                              mean=(0.5,), std=(0.5,), width_mode="dynamic", max_width=3200),
        "line-dynamic-small": PreprocessSpec(color="rgb", resize=(24, 120), resize_mode="fit_height", scale=1 / 255,
                                             mean=(0.5,), std=(0.5,), width_mode="dynamic", max_width=400, width_step=16),
        "gray-fit-dynamic-area-nhwc": PreprocessSpec(color="gray", resize=(16, 40), resize_mode="fit_height",
                                                     interpolation="area", layout="NHWC", pad_value=-0.5,
                                                     width_mode="dynamic", max_width=203, width_step=7),
        "page-small": page_spec(40, 56),
        "line-small": line_spec(24, 120),
        "gray-linear": PreprocessSpec(color="gray", resize=(24, 32), mean=(0.45,), std=(0.226,)),
        "rgb-linear-imagenet": PreprocessSpec(color="rgb", resize=(40, 56), mean=(0.485, 0.456, 0.406),
                                              std=(0.229, 0.224, 0.225)),
        "bgr-nearest-nhwc": PreprocessSpec(color="bgr", resize=(17, 29), interpolation="nearest", layout="NHWC",
                                           scale=1.0, mean=(127.5,), std=(127.5,)),
        "rgb-area-crop": PreprocessSpec(color="rgb", resize=(36, 36), crop=(32, 30), interpolation="area",
                                        mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.4)),
        "gray-area": PreprocessSpec(color="gray", resize=(31, 13), interpolation="area", scale=0.5),
        "rgb-nearest-crop": PreprocessSpec(color="rgb", resize=(30, 40), crop=(24, 24), interpolation="nearest"),
        "bgr-crop-only": PreprocessSpec(color="bgr", crop=(20, 20), scale=1.0 / 127.0, mean=(1.0,)),
        "gray-fit-area": PreprocessSpec(color="gray", resize=(32, 100), resize_mode="fit_height",
                                        interpolation="area", pad_value=-1.0),
        "rgb-fit-nearest-nhwc": PreprocessSpec(color="rgb", resize=(16, 64), resize_mode="fit_height",
                                               interpolation="nearest", layout="NHWC", pad_value=0.5),
    }


def random_specs(count: int) -> dict[str, PreprocessSpec]:
    """Specs drawn at random: any colour, interpolation, size, crop, fit_height, mean/std, scale, layout."""
    rng = np.random.default_rng(99)
    out = {}
    for i in range(count):
        color, interpolation = str(rng.choice(["gray", "rgb", "bgr"])), str(rng.choice(["linear", "nearest", "area"]))
        h, w = int(rng.integers(1, 100)), int(rng.integers(1, 100))
        fit = bool(rng.random() < 0.2)
        crop = (int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))) if not fit and rng.random() < 0.3 else None
        c = 1 if color == "gray" else 3
        out[f"random-{i:03d}"] = PreprocessSpec(
            color=color, resize=(h, w), crop=crop, interpolation=interpolation,
            scale=float(rng.choice([1 / 255, 1.0, 0.5, 1 / 127.5])),
            mean=tuple(rng.uniform(-1, 1, rng.choice([1, c])).tolist()),
            std=tuple(rng.uniform(0.1, 2, rng.choice([1, c])).tolist()),
            layout=str(rng.choice(["NCHW", "NHWC"])), resize_mode="fit_height" if fit else "stretch",
            pad_value=float(rng.normal()))
    return out


RANDOM_CASES = 600


def all_specs() -> dict[str, PreprocessSpec]:
    return {**specs(), **random_specs(RANDOM_CASES)}


def sizes(spec: PreprocessSpec, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Input sizes that take every path of cv2.resize for this spec's target."""
    if spec.resize is None:
        ch, cw = spec.crop or (8, 8)
        return [(ch, cw), (ch + 5, cw + 13), (3 * ch, cw + 1)]
    h, w = spec.resize
    if spec.resize_mode == "fit_height":        # text lines: wide (capped), narrow (padded), up and down
        return [(h, 10 * w), (h, w), (h, max(1, w // 3)), (2 * h, 2 * w), (2 * h, w // 2), (3 * h, w // 5),
                (max(1, h // 2), w), (max(1, h // 3), 7), (h + 1, 3 * w + 1), (5 * h, 3), (1, 1), (1, 2 * w),
                (int(rng.integers(1, 3 * h)), int(rng.integers(1, 4 * w)))]
    if h * w > 50_000:                          # the full-size page: a few, it is large
        return [(h, w), (2 * h, 2 * w), (h * 3 // 2 + 1, w * 4 // 3 + 1), (h // 2 + 3, w // 2 + 5)]
    out = [(h, w), (2 * h, 2 * w), (3 * h, 3 * w), (4 * h, 2 * w), (2 * h, w), (h, 3 * w),
           (max(1, h // 2), max(1, w // 2)), (h * 5 // 3, w * 7 // 4), (h + 1, w + 3), (max(1, h - 1), max(1, w - 1)),
           (h * 2 + 1, w * 2 - 1), (1, 1), (1, w * 2), (h * 3, 1), (7 * h // 2, 5 * w // 2)]
    out += [(int(rng.integers(1, 3 * h)), int(rng.integers(1, 3 * w))) for _ in range(3)]
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Case:
    name: str
    spec: str
    image: np.ndarray          # what the core gets
    order: str                 # its pixel order
    python_image: np.ndarray   # what PreprocessSpec.apply gets: gray or BGR, as cv2 decodes


def as_python_input(image: np.ndarray, order: str) -> np.ndarray:
    if order == "gray":
        return image
    if order in ("rgb", "rgba"):
        image = image[:, :, 2::-1] if order == "rgba" else image[:, :, ::-1]
    return np.ascontiguousarray(image[:, :, :3])


def cases() -> list[Case]:
    rng = np.random.default_rng(20240607)
    out = []
    for spec_name, spec in specs().items():
        for i, (h, w) in enumerate(sizes(spec, rng)):
            for mode in (MODES[i % len(MODES)], MODES[(i + 2) % len(MODES)]):
                channels = {"gray": 1, "bgr": 3, "rgb": 3, "bgra": 4, "rgba": 4}[mode]
                shape = (h, w) if channels == 1 and i % 2 else (h, w, channels)
                image = rng.integers(0, 256, shape, dtype=np.uint8)
                out.append(Case(f"{spec_name}/{h}x{w}/{mode}", spec_name, image, mode, as_python_input(image, mode)))
    digits = sorted((EXAMPLES / "digits" / "data" / "test").rglob("*.png"))[::45]
    for path in digits:                        # real images, decoded as edgekit decodes them
        image = decode_image(path)
        order = "gray" if image.ndim == 2 else {1: "gray", 3: "bgr"}[image.shape[2]]
        out.append(Case(f"digits-png/{path.parent.name}/{path.name}", "digits", image, order,
                        as_python_input(image, order)))
    for name, spec in random_specs(RANDOM_CASES).items():   # one random image per random spec
        h, w = spec.resize
        pick = rng.integers(0, 3)
        if pick == 0:                          # integer shrink factors
            size = (h * int(rng.integers(1, 6)), w * int(rng.integers(1, 6)))
        elif pick == 1:                        # integer growth factors (rounded down)
            size = (max(1, h // int(rng.integers(1, 5))), max(1, w // int(rng.integers(1, 5))))
        else:
            size = (int(rng.integers(1, 240)), int(rng.integers(1, 240)))
        mode = MODES[int(rng.integers(0, len(MODES)))]
        image = rng.integers(0, 256, (*size, {"gray": 1, "bgr": 3, "rgb": 3, "bgra": 4, "rgba": 4}[mode]), np.uint8)
        out.append(Case(f"{name}/{size[0]}x{size[1]}/{mode}", name, image, mode, as_python_input(image, mode)))
    return out


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Spec files written as bundles write them, the images, and the Python tensors."""
    folder = tmp_path_factory.mktemp("preprocess")
    known = all_specs()
    spec_files = {}
    for name, spec in known.items():
        spec_files[name] = folder / f"{name}.json"
        PreprocessFile(("x",), spec).write_file(spec_files[name])
    items = []
    for i, case in enumerate(cases()):
        image_file = folder / f"image_{i:04d}.npy"
        np.save(image_file, case.image)
        items.append((case, image_file, known[case.spec].apply(case.python_image), spec_files[case.spec]))
    return items


def lsb_distance(a: np.ndarray, b: np.ndarray) -> int:
    """Largest difference in units in the last place between two float32 arrays of one shape."""
    ia, ib = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return int(np.abs(ia - ib).max()) if a.size else 0


@pytest.mark.parametrize("abi", ABIS)
def test_tensors_equal_python_bit_for_bit(core_jobs, prepared, abi, tmp_path):
    jobs = [{"op": "preprocess", "spec": str(spec_file), "image": str(image_file),
             "out": str(tmp_path / f"tensor_{i:04d}.npy"), "order": case.order}
            for i, (case, image_file, _, spec_file) in enumerate(prepared)]
    report, _ = core_jobs(abi, jobs, tmp_path)
    failures, per_spec = [], {}
    for i, ((case, _, expected, _), result) in enumerate(zip(prepared, report["jobs"])):
        assert result["ok"], f"{case.name}: {result.get('error')}"
        got = np.load(tmp_path / f"tensor_{i:04d}.npy")
        assert got.dtype == np.float32 and got.shape == expected.shape, (case.name, got.shape, expected.shape)
        per_spec[case.spec] = per_spec.get(case.spec, 0) + 1
        if not np.array_equal(got, expected):
            failures.append(f"{case.name}: {int((got != expected).sum())} values differ, "
                            f"max {lsb_distance(got, expected)} LSB, max abs {float(np.abs(got - expected).max()):.3g}")
    assert not failures, f"{abi}: {len(failures)} of {len(prepared)} tensors differ:\n" + "\n".join(failures[:20])
    assert len(prepared) >= 1000 and len(per_spec) == len(all_specs())


def test_the_cases_reach_every_resize_path(prepared):
    """The case list takes each of cv2's uint8 paths at least once (the selection above is by construction)."""
    reached, known = set(), all_specs()
    for case, _, _, _ in prepared:
        spec = known[case.spec]
        if spec.resize is None:
            continue
        sh, sw = case.python_image.shape[:2]
        h, w = spec.resize
        if spec.resize_mode == "fit_height":
            w = spec.line_width(sh, sw)
        if (h, w) == (sh, sw):
            reached.add("copy")
            continue
        fx, fy = sw / w, sh / h
        integer = fx.is_integer() and fy.is_integer()
        if spec.interpolation == "nearest":
            reached.add("nearest")
        elif spec.interpolation == "linear" and integer and (fx, fy) == (2, 2):
            reached.add("linear->area 2x2")
        elif spec.interpolation == "linear":
            reached.add("linear")
        elif fx >= 1 and fy >= 1:
            reached.add("area blocks 2x2" if (fx, fy) == (2, 2) else "area blocks" if integer else "area cells")
        else:
            reached.add("area upscale")
    assert reached >= {"copy", "nearest", "linear->area 2x2", "linear", "area blocks 2x2", "area blocks",
                       "area cells", "area upscale"}, reached


def test_tool_errors_name_the_problem(core_jobs, prepared, tmp_path):
    case, image_file, _, spec_file = prepared[0]
    bad_spec = tmp_path / "bad.json"
    bad_spec.write_text(json.dumps({"inputs": ["x"], "preprocess": {"color": "rgb", "blur": 3}}))
    null_spec = tmp_path / "null.json"
    null_spec.write_text(json.dumps({"inputs": ["x"], "preprocess": None}))
    floats = tmp_path / "float.npy"
    np.save(floats, np.zeros((4, 4, 3), np.float32))
    jobs = [
        {"op": "preprocess", "spec": str(bad_spec), "image": str(image_file), "out": str(tmp_path / "a.npy")},
        {"op": "preprocess", "spec": str(null_spec), "image": str(image_file), "out": str(tmp_path / "b.npy")},
        {"op": "preprocess", "spec": str(spec_file), "image": str(floats), "out": str(tmp_path / "c.npy")},
        {"op": "preprocess", "spec": str(spec_file), "image": str(image_file), "out": str(tmp_path / "d.npy"),
         "order": "bgr" if case.image.ndim == 2 or case.image.shape[2] == 1 else "gray"},
        {"op": "resize"},
    ]
    report, done = core_jobs("host", jobs, tmp_path)
    results = report["jobs"]
    assert [r["ok"] for r in results] == [False] * 5 and report["failed"] == 5
    assert results[0]["exit_code"] == 5 and "unknown preprocess key: blur" in results[0]["error"]
    assert "no preprocessing" in results[1]["error"]
    assert "not a uint8 image" in results[2]["error"]
    assert results[3]["exit_code"] == 2 and "does not fit" in results[3]["error"]
    assert "unknown operation 'resize'" in results[4]["error"]
    assert done.returncode == 5


@pytest.mark.parametrize("extra", [
    {"width_mode": "wide"},
    {"width_mode": "dynamic"},
    {"width_mode": "dynamic", "max_width": 100},
    {"max_width": 640},
    {"width_mode": "dynamic", "max_width": 640, "width_step": 0},
    {"width_mode": "dynamic", "max_width": 10 ** 6},
])
def test_width_mode_refusals_say_what_python_says(core_jobs, prepared, tmp_path, extra):
    """A bad width_mode / max_width / width_step: the core refuses with the rule Python's DataError names."""
    from edgekit.core.errors import DataError

    raw = {"color": "rgb", "resize": [48, 320], "resize_mode": "fit_height", **extra}
    with pytest.raises(DataError) as python:
        PreprocessSpec.from_mapping(raw)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({"inputs": ["x"], "preprocess": raw}))
    _, image_file, _, _ = prepared[0]
    report, _ = core_jobs("host", [{"op": "preprocess", "spec": str(spec_file), "image": str(image_file),
                                    "out": str(tmp_path / "t.npy")}], tmp_path)
    (result,) = report["jobs"]
    assert not result["ok"] and result["exit_code"] == 5
    fragment = python.value.message.split(" is ")[0] if "MAX_RESIZE_SIDE" not in python.value.message else "max_width"
    assert fragment in result["error"], (python.value.message, result["error"])
