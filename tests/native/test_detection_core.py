"""The core's detection / segmentation post-processing (native/core/src/detection.cc, through
edgekit-detect-tool) against Python's tasks: the same classes in the same order, boxes within 1e-4 px,
scores within 1e-6, the letterbox undone the same way, identical class maps; the same refusals of
outputs that do not fit the task. Host, and aarch64 under qemu (e2e).

Cases: anchor-free heads with DFL (reg_max 7) and plain distances (reg_max 0), one to three strides,
dense candidates for NMS and the top-k / max-detections caps, equal scores, logits and probabilities;
decoded heads; matrix NMS (linear and gaussian decay, identical boxes); the rows + counts of a graph that ran NMS
(head nms: threshold, cap, ties, counts that do not fit); zero detections; letterboxed wide and tall images; argmax maps with ties, one-channel
thresholds, class-map outputs, nearest resizing and maps put back onto letterboxed images.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.tasks import make_task
from edgekit.tasks.segmentation import resize_nearest, to_image

ABIS = ["host", pytest.param("aarch64", marks=pytest.mark.e2e)]
BOX_TOL, SCORE_TOL = 1e-4, 1e-6          # tensor pixels; probability


def raw_head(rng, size, strides, classes, reg_max, density=0.05, batch=2):
    cls_maps, reg_maps = [], []
    for s in strides:
        h, w = size[0] // s, size[1] // s
        logits = rng.normal(-5, 1.5, (batch, classes, h, w)).astype(np.float32)
        hot = rng.random((batch, classes, h, w)) < density
        logits[hot] = rng.normal(1.5, 1.5, hot.sum()).astype(np.float32)
        cls_maps.append(logits)
        bins = 4 * (reg_max + 1)
        reg_maps.append((rng.normal(0, 2, (batch, bins, h, w)) if reg_max else
                         rng.uniform(0, 4, (batch, 4, h, w))).astype(np.float32))
    return cls_maps + reg_maps


def detection_cases(rng):
    base = {"strides": [8, 16, 32], "reg_max": 7, "labels": ["a", "b", "c"]}
    yield "dfl three strides", base, raw_head(rng, (96, 128), [8, 16, 32], 3, 7), None
    yield "plain distances", {"strides": [8, 16], "reg_max": 0}, raw_head(rng, (64, 64), [8, 16], 2, 0), None
    yield "dense nms caps", {"strides": [4], "reg_max": 3, "nms_iou": 0.3, "max_detections": 20, "nms_top_k": 200,
                             "score_threshold": 0.2}, raw_head(rng, (64, 64), [4], 5, 3, density=0.5), None
    yield "one class offset 0", {"strides": [16], "reg_max": 7, "cell_offset": 0.0, "num_classes": 1}, \
        raw_head(rng, (96, 96), [16], 1, 7, density=0.3), None
    probs = [1 / (1 + np.exp(-o)) if i < 2 else o for i, o in enumerate(raw_head(rng, (64, 96), [8, 16], 4, 7))]
    yield "probabilities", {"strides": [8, 16], "activation": "none"}, [p.astype(np.float32) for p in probs], None
    tie = raw_head(rng, (32, 32), [8], 2, 2, density=0.0, batch=1)
    tie[0][0, :, 1:3, 1:3] = 3.0                                   # equal scores over overlapping boxes
    yield "ties", {"strides": [8], "reg_max": 2}, tie, None
    nothing = raw_head(rng, (32, 32), [8], 2, 2, density=0.0)
    nothing[0][:] = -10.0                                          # every score below the threshold
    yield "nothing found", {"strides": [8], "reg_max": 2}, nothing, None
    boxes = np.sort(rng.uniform(0, 90, (3, 50, 4)).astype(np.float32).reshape(3, 50, 2, 2), axis=2)
    boxes = boxes.transpose(0, 1, 3, 2).reshape(3, 50, 4)
    yield "decoded", {"head": "decoded", "activation": "none", "score_threshold": 0.3},\
        [boxes, rng.random((3, 50, 4)).astype(np.float32)], None
    letterbox = PreprocessSpec(color="rgb", resize=(96, 128), resize_mode="letterbox")
    outputs = raw_head(rng, (96, 128), [8, 16, 32], 3, 7)
    yield "letterbox wide", base, outputs, (letterbox, (300, 800))
    yield "letterbox tall", base, outputs, (letterbox, (500, 201))
    yield "stretch", base, outputs, (PreprocessSpec(resize=(96, 128)), (77, 1001))
    decoded = {"head": "decoded", "activation": "none", "score_threshold": 0.3}
    exact = [boxes * np.float32(1.4), rng.random((3, 50, 4)).astype(np.float32)]     # no exp: the same float32 inputs
    yield "exact letterbox wide", decoded, exact, (letterbox, (300, 800))
    yield "exact letterbox tall", decoded, exact, (letterbox, (500, 201))
    yield "exact stretch", decoded, exact, (PreprocessSpec(resize=(96, 128)), (77, 1001))
    matrix = {"strides": [4], "reg_max": 3, "nms": "matrix", "score_threshold": 0.2, "post_threshold": 0.1,
              "nms_top_k": 200, "max_detections": 40}
    dense = raw_head(rng, (64, 64), [4], 3, 3, density=0.5)
    yield "matrix linear", matrix, dense, None
    yield "matrix gaussian", dict(matrix, use_gaussian=True, gaussian_sigma=2.0, post_threshold=0.05), dense, None
    yield "matrix decoded", dict(decoded, nms="matrix", post_threshold=0.3), exact, (letterbox, (300, 800))
    same = np.repeat(np.array([[[0, 0, 10, 10], [5, 5, 20, 20], [30, 30, 40, 50]]], np.float32), 2, axis=1)
    yield "matrix duplicates", dict(decoded, nms="matrix"), [same, np.full((1, 6, 2), 0.9, np.float32)], None  # / 0
    nms = {"head": "nms", "labels": ["a", "b", "c"], "score_threshold": 0.1}
    rows, counts = nms_rows_case(rng, [7, 0, 12])
    yield "nms rows", nms, [rows, counts], None
    yield "nms rows letterbox", nms, [rows, counts], (letterbox, (300, 800))
    yield "nms rows capped", dict(nms, max_detections=4, score_threshold=0.0), [rows, counts.astype(np.int64)], None
    yield "nms rows none", nms, [np.zeros((0, 6), np.float32), np.zeros(2, np.int32)], None
    tied = rows[:7].copy()
    tied[:, 1] = 0.5                                                # equal scores: the graph's order stays
    yield "nms rows ties", nms, [tied, np.array([7], np.int32)], None
    yield "bad nms counts", nms, [rows, np.array([7, 0, 13], np.int32)], None
    yield "bad nms class", dict(nms, score_threshold=0.0), [rows * np.float32(2), counts], None
    picodet = {"strides": [8, 16, 32, 64], "reg_max": 7, "activation": "none", "input_size": [72, 56],
               "labels": ["a", "b", "c"], "score_threshold": 0.3}
    flat = flat_head(rng, (72, 56), [8, 16, 32, 64], 3, 7, probabilities=True)
    yield "flat probabilities", picodet, flat, None
    yield "flat letterbox", picodet, flat, (PreprocessSpec(color="bgr", resize=(72, 56), resize_mode="letterbox"), (300, 120))
    yield "flat logits", {"strides": [8, 16], "reg_max": 3, "input_size": [40, 24]}, \
        flat_head(rng, (40, 24), [8, 16], 2, 3), None
    yield "bad flat", picodet, flat[:3] + [flat[2]] + flat[4:], None
    yield "bad count", base, outputs[:5], None
    yield "bad bins", {"strides": [8, 16, 32], "reg_max": 5}, outputs, None
    yield "bad classes", {"strides": [8, 16, 32], "num_classes": 4}, outputs, None


def flat_head(rng, size, strides, classes, reg_max, probabilities=False, batch=2):
    """PicoDet-style flattened heads: [N, h*w, C] per stride, then [N, h*w, 4 (reg_max + 1)], h x w = ceil(size / s)."""
    scores, bins = [], []
    for s in strides:
        cells = -(-size[0] // s) * -(-size[1] // s)
        logits = rng.normal(-4, 2.5, (batch, cells, classes)).astype(np.float32)
        scores.append((1 / (1 + np.exp(-logits))).astype(np.float32) if probabilities else logits)
        bins.append(rng.normal(0, 2, (batch, cells, 4 * (reg_max + 1))).astype(np.float32))
    return scores + bins


def nms_rows_case(rng, counts):
    """multiclass_nms3-style outputs: rows (class, score, x0, y0, x1, y1) of every image, then the counts (int32)."""
    total = sum(counts)
    corners = np.sort(rng.uniform(0, 90, (total, 2, 2)), axis=1).transpose(0, 2, 1).reshape(total, 4)
    rows = np.concatenate([rng.integers(0, 3, (total, 1)), rng.random((total, 1)), corners], 1).astype(np.float32)
    return rows, np.asarray(counts, np.int32)


def segmentation_cases(rng):
    scores = rng.normal(0, 1, (3, 5, 24, 32)).astype(np.float32)
    scores[0, :, :4, :4] = 1.0                                      # ties: the first class wins
    yield "argmax", {"labels": ["bg", "a", "b", "c", "d"]}, scores, None
    yield "argmax resized", {}, scores, (50, 47)
    yield "one channel", {"threshold": 0.3}, scores[:, :1], (24, 32)
    yield "one channel no activation", {"threshold": 0.1, "activation": "none"}, scores[:, :1], (13, 70)
    yield "class map", {}, rng.integers(0, 4, (2, 16, 16)).astype(np.int64), (40, 40)
    box = PreprocessSpec(color="rgb", resize=(48, 64), resize_mode="letterbox")
    yield "letterbox wide", {}, scores, (box, (100, 500))
    yield "letterbox tall", {}, scores, (box, (333, 90))
    yield "stretch to image", {}, scores, (PreprocessSpec(resize=(48, 64)), (31, 200))
    yield "bad rank", {}, scores[0, 0], None


def python_detect(options, outputs, geometry):
    try:
        task = make_task("detection", options)
        found = task.detect(outputs)
    except Exception as exc:  # noqa: BLE001 - the refusal itself is compared
        return {"error": str(exc)}
    results = []
    for d in found:
        boxes = d.boxes if geometry is None else geometry[0].to_image(d.boxes, *geometry[1])
        results.append([{"box": boxes[k].tolist(), "class": int(d.classes[k]), "score": float(d.scores[k])}
                        for k in range(len(d))])
    return {"results": results}


def python_segment(options, output, size):
    try:
        maps = make_task("segmentation", options).class_maps([output])
    except Exception as exc:  # noqa: BLE001
        return {"error": str(exc)}
    if size and not isinstance(size[0], int):
        return {"results": [to_image(m, size[0], *size[1]).reshape(-1).tolist() for m in maps]}
    return {"results": [(resize_nearest(m, *size) if size else m).reshape(-1).tolist() for m in maps]}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    folder = tmp_path_factory.mktemp("detect-cases")
    rng = np.random.default_rng(3)
    jobs, expected, names = [], [], []
    for i, (name, options, outputs, geometry) in enumerate(detection_cases(rng)):
        task_file = folder / f"det{i}.json"
        task_file.write_text(json.dumps({"kind": "detection", "options": options}))
        paths = []
        for k, out in enumerate(outputs):
            np.save(folder / f"det{i}_{k}.npy", out)
            paths.append(str(folder / f"det{i}_{k}.npy"))
        job = {"op": "detect", "task": str(task_file), "outputs": paths}
        if geometry is not None:
            pre = folder / f"pre{i}.json"
            pre.write_text(json.dumps({"inputs": ["x"], "preprocess": geometry[0].to_json()}))
            job.update(preprocess=str(pre), image=list(geometry[1]))
        jobs.append(job)
        expected.append(python_detect(options, outputs, geometry))
        names.append(name)
    for i, (name, options, output, size) in enumerate(segmentation_cases(rng)):
        task_file = folder / f"seg{i}.json"
        task_file.write_text(json.dumps({"kind": "segmentation", "options": options}))
        np.save(folder / f"seg{i}.npy", output)
        job = {"op": "segment", "task": str(task_file), "output": str(folder / f"seg{i}.npy")}
        if size and not isinstance(size[0], int):
            pre = folder / f"segpre{i}.json"
            pre.write_text(json.dumps({"inputs": ["x"], "preprocess": size[0].to_json()}))
            job.update(preprocess=str(pre), image=list(size[1]))
        elif size:
            job["size"] = list(size)
        jobs.append(job)
        expected.append(python_segment(options, output, size))
        names.append(name)
    return jobs, expected, names


@pytest.mark.parametrize("abi", ABIS)
def test_core_equals_python(emulation, run_native, prepared, abi, tmp_path):
    runtime, build = emulation(abi)
    jobs, expected, names = prepared
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    done = run_native(abi, runtime, build, [build.root / "edgekit-detect-tool", tmp_path / "jobs.json",
                                            tmp_path / "report.json"])
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert len(report) == len(jobs)
    for name, job, got, want in zip(names, jobs, report, expected):
        if "error" in want:
            assert not got["ok"], f"{name}: Python refused ({want['error']}), the core did not"
            assert got["error"][:40] == want["error"][:40], name      # the same refusal (shapes print differently)
            continue
        assert got["ok"], f"{name}: {got.get('error')}"
        if job["op"] == "segment":
            assert [r["classes"] for r in got["results"]] == want["results"], name
            continue
        assert len(got["results"]) == len(want["results"]), name
        for image_got, image_want in zip(got["results"], want["results"]):
            assert [d["class"] for d in image_got] == [d["class"] for d in image_want], name
            if image_want:
                # 1e-4 px in the tensor (float32 exp may differ by an ulp), scaled to the image; exact when the
                # same float32 boxes go in (the letterbox/resize undo itself is bit-identical)
                scale = 1.0 if "image" not in job else max(job["image"]) / min(96, 128)
                tol = 0.0 if name.startswith("exact") else BOX_TOL * max(1.0, scale)
                np.testing.assert_allclose([d["box"] for d in image_got], [d["box"] for d in image_want],
                                           atol=tol, rtol=0, err_msg=name)
                np.testing.assert_allclose([d["score"] for d in image_got], [d["score"] for d in image_want],
                                           atol=SCORE_TOL, rtol=0, err_msg=name)


def test_cases_exercise_what_they_claim(prepared):
    jobs, expected, names = prepared
    counts = {n: sum(len(r) for r in e.get("results", [])) for n, e, j in zip(names, expected, jobs) if j["op"] == "detect"}
    assert counts["nothing found"] == 0
    assert counts["dense nms caps"] == 2 * 20                       # the max-detections cap binds
    assert counts["dfl three strides"] > 20 and counts["letterbox wide"] == counts["letterbox tall"] == counts["stretch"]
    assert counts["nms rows"] == counts["nms rows letterbox"] and 0 < counts["nms rows"] < 19   # some under 0.1
    assert counts["nms rows capped"] == 4 + 0 + 4 and counts["nms rows none"] == 0 and counts["nms rows ties"] > 0
    assert counts["flat probabilities"] > 10 and counts["flat logits"] > 5
    assert {n for n, e in zip(names, expected) if "error" in e} == {"bad count", "bad bins", "bad classes", "bad rank",
                                                                     "bad nms counts", "bad nms class", "bad flat"}


LETTERBOX_SPECS = [
    PreprocessSpec(color="rgb", resize=(96, 96), resize_mode="letterbox", mean=(0.5,), std=(0.5,)),
    PreprocessSpec(color="bgr", resize=(64, 128), resize_mode="letterbox", pad_value=-3.0, layout="NHWC"),
    PreprocessSpec(color="gray", resize=(40, 40), resize_mode="letterbox", interpolation="nearest", pad_value=0.25),
]
LETTERBOX_IMAGES = [(96, 128), (128, 96), (300, 301), (7, 200), (200, 7), (96, 96), (33, 65)]


@pytest.mark.parametrize("abi", ABIS)
def test_letterbox_tensors_equal_python(core_jobs, abi, tmp_path):
    """The core's letterbox (scale, centring, border) gives Python's tensors bit for bit."""
    rng = np.random.default_rng(5)
    jobs, expected = [], []
    for s, spec in enumerate(LETTERBOX_SPECS):
        spec_file = tmp_path / f"spec{s}.json"
        spec_file.write_text(json.dumps({"inputs": ["x"], "preprocess": spec.to_json()}))
        for k, (h, w) in enumerate(LETTERBOX_IMAGES):
            image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            np.save(tmp_path / f"image{s}_{k}.npy", image)
            jobs.append({"op": "preprocess", "spec": str(spec_file), "image": str(tmp_path / f"image{s}_{k}.npy"),
                         "out": str(tmp_path / f"tensor{s}_{k}.npy"), "order": "bgr"})
            expected.append(spec.apply(image))
    report, _ = core_jobs(abi, jobs, tmp_path)
    for job, result, want in zip(jobs, report["jobs"], expected):
        assert result["ok"], result.get("error")
        got = np.load(job["out"])
        assert got.shape == want.shape and np.array_equal(got, want), job["out"]
