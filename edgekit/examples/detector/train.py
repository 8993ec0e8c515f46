"""Train the detector example and write its data folders.

    ./run python -m edgekit.examples.detector.train [--steps 900]

Writes, next to this file: `detector.pdparams`, `data/labels.txt`, `data/calib/*.png`
(32 scenes) and `data/eval/*.png` + `data/eval/truth.json` (48 held-out scenes; their
boxes in the 96x96 tensor's pixels, as the task evaluates them). A quarter of the scenes
are 128 wide and 96 high, so the letterbox of the preprocessing is exercised. Training
scenes (4096, from other seeds, flipped every other step) go through the same preprocessing spec
that the bundle ships (edgekit.toml's [preprocess]).

Assignment: each truth box goes to stride 8 when its longer side is at most 32 px, else
stride 16; the cells whose centres lie inside the box and within 1.5 strides of its centre
are positives (at least the cell holding the centre; the smaller box wins a shared cell).
Losses: sigmoid focal loss on the class maps, distribution-focal loss plus GIoU on the sides.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from . import scenes

HERE = Path(__file__).parent
SEED = 11
CALIB, EVAL = 32, 48
TRAIN_SCENES = 4096
EVAL_SEED, CALIB_SEED, TRAIN_SEED = 1_000_000, 2_000_000, 0


def spec():
    from edgekit.contracts.settings import load_toml
    from edgekit.contracts.preprocess import PreprocessSpec

    return PreprocessSpec.from_mapping(load_toml(HERE / "edgekit.toml")["preprocess"])


def scene_of(seed: int) -> scenes.Scene:
    wide = seed % 4 == 3
    return scenes.make_scene(seed, 96, 128 if wide else 96, min_size=11 if wide else 8)


def tensor_truth(spec_, scene: scenes.Scene) -> tuple[np.ndarray, np.ndarray]:
    """The scene's tensor and its boxes in tensor pixels."""
    g = spec_.geometry(*scene.image.shape[:2])
    return spec_.apply(scene.image), g.to_tensor(scene.boxes)


def targets(boxes_per_image, classes_per_image, size: int, strides, reg_max: int, classes: int):
    """Per stride: class targets [N, C, h, w], side targets [N, 4, h, w] (stride units), positive mask [N, h, w]."""
    out = []
    for level, stride in enumerate(strides):
        h = w = size // stride
        cls_t = np.zeros((len(boxes_per_image), classes, h, w), np.float32)
        side_t = np.zeros((len(boxes_per_image), 4, h, w), np.float32)
        box_t = np.zeros((len(boxes_per_image), 4, h, w), np.float32)
        pos = np.zeros((len(boxes_per_image), h, w), bool)
        centres = (np.arange(h) + 0.5) * stride
        for n, (boxes, labels) in enumerate(zip(boxes_per_image, classes_per_image)):
            best = np.full((h, w), np.inf)
            for box, label in zip(boxes, labels):
                longest = max(box[2] - box[0], box[3] - box[1])
                if (level == 0) != (longest <= 32):
                    continue
                cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
                xs, ys = centres[None, :], centres[:, None]
                inside = (xs > box[0]) & (xs < box[2]) & (ys > box[1]) & (ys < box[3])
                near = (np.abs(xs - cx) <= 1.5 * stride) & (np.abs(ys - cy) <= 1.5 * stride)
                cells = inside & near
                cells[min(h - 1, int(cy // stride)), min(w - 1, int(cx // stride))] = True
                area = (box[2] - box[0]) * (box[3] - box[1])
                cells &= area < best
                best[cells] = area
                r, c = np.nonzero(cells)
                cls_t[n, :, r, c] = 0.0
                cls_t[n, label, r, c] = 1.0
                px, py = centres[c], centres[r]
                sides = np.stack([px - box[0], py - box[1], box[2] - px, box[3] - py], 1) / stride
                side_t[n, :, r, c] = np.clip(sides, 0, reg_max - 0.01)
                box_t[n, :, r, c] = np.tile(box, (len(r), 1))
                pos[n, r, c] = True
        out.append((cls_t, side_t, box_t, pos))
    return out


def losses(model_out, level_targets, strides, reg_max: int):
    import paddle
    import paddle.nn.functional as F

    levels = len(strides)
    total_pos = max(1.0, float(sum(t[3].sum() for t in level_targets)))
    cls_loss = box_loss = dfl_loss = 0.0
    for i, stride in enumerate(strides):
        cls_map, reg_map = model_out[i], model_out[levels + i]
        cls_t, side_t, box_t, pos = (paddle.to_tensor(a) for a in level_targets[i])
        cls_loss = cls_loss + F.sigmoid_focal_loss(cls_map, cls_t, reduction="sum")
        if not level_targets[i][3].any():
            continue
        n, _, h, w = reg_map.shape
        reg = reg_map.reshape([n, 4, reg_max + 1, h, w]).transpose([0, 3, 4, 1, 2])        # N h w 4 bins
        mask = pos.astype("bool")
        reg_pos = paddle.masked_select(reg, mask.unsqueeze(-1).unsqueeze(-1).expand(reg.shape)).reshape([-1, 4, reg_max + 1])
        side_pos = paddle.masked_select(side_t.transpose([0, 2, 3, 1]), mask.unsqueeze(-1).expand([n, h, w, 4])).reshape([-1, 4])
        box_pos = paddle.masked_select(box_t.transpose([0, 2, 3, 1]), mask.unsqueeze(-1).expand([n, h, w, 4])).reshape([-1, 4])
        left = paddle.floor(side_pos)
        weight_right = side_pos - left
        logp = F.log_softmax(reg_pos, axis=-1)
        li = left.astype("int64")
        take = lambda idx: paddle.take_along_axis(logp, idx.unsqueeze(-1), axis=-1).squeeze(-1)   # noqa: E731
        dfl_loss = dfl_loss - ((1 - weight_right) * take(li) + weight_right * take(paddle.clip(li + 1, max=reg_max))).sum()
        expected = (F.softmax(reg_pos, axis=-1) * paddle.arange(reg_max + 1, dtype="float32")).sum(-1) * stride
        rows, cols = np.nonzero(level_targets[i][3])[1:]
        px = paddle.to_tensor(((cols + 0.5) * stride).astype(np.float32))
        py = paddle.to_tensor(((rows + 0.5) * stride).astype(np.float32))
        pred = paddle.stack([px - expected[:, 0], py - expected[:, 1], px + expected[:, 2], py + expected[:, 3]], 1)
        box_loss = box_loss + giou_loss(pred, box_pos).sum()
    return (cls_loss + 2.0 * box_loss + 0.5 * dfl_loss) / total_pos


def giou_loss(a, b):
    import paddle

    ix = paddle.clip(paddle.minimum(a[:, 2], b[:, 2]) - paddle.maximum(a[:, 0], b[:, 0]), min=0)
    iy = paddle.clip(paddle.minimum(a[:, 3], b[:, 3]) - paddle.maximum(a[:, 1], b[:, 1]), min=0)
    inter = ix * iy
    area_a = paddle.clip(a[:, 2] - a[:, 0], min=0) * paddle.clip(a[:, 3] - a[:, 1], min=0)
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a + area_b - inter + 1e-6
    hull = (paddle.maximum(a[:, 2], b[:, 2]) - paddle.minimum(a[:, 0], b[:, 0])) * \
           (paddle.maximum(a[:, 3], b[:, 3]) - paddle.minimum(a[:, 1], b[:, 1])) + 1e-6
    return 1 - inter / union + (hull - union) / hull


def write_data(data: Path) -> None:
    import cv2

    from edgekit.tasks import write_truth

    from .truth import detection_task

    sp = spec()
    data.mkdir(parents=True, exist_ok=True)
    (data / "labels.txt").write_text("".join(f"{c}\n" for c in scenes.CLASSES), encoding="utf-8")
    for name, count, base in (("calib", CALIB, CALIB_SEED), ("eval", EVAL, EVAL_SEED)):
        folder = data / name
        folder.mkdir(exist_ok=True)
        entries = []
        for i in range(count):
            scene = scene_of(base + i)
            cv2.imwrite(str(folder / f"{name}{i:03d}.png"), scene.image)
            _, boxes = tensor_truth(sp, scene)
            entries.append({"boxes": np.round(boxes, 4).tolist(), "classes": scene.classes.tolist(),
                            "size": list(sp.resize)})
        if name == "eval":
            write_truth(folder / "truth.json", detection_task(), entries,
                        {"generator": "edgekit.examples.detector.train", "seed": base})


def train(steps: int, batch: int = 32) -> None:
    import paddle

    from .model import REG_MAX, STRIDES, Detector
    from .truth import detection_task, evaluation_set

    paddle.seed(SEED)
    sp = spec()
    model = Detector()
    schedule = paddle.optimizer.lr.CosineAnnealingDecay(3e-3, steps)
    opt = paddle.optimizer.AdamW(learning_rate=schedule, parameters=model.parameters(), weight_decay=1e-4)
    x_eval, truth = evaluation_set(HERE / "data" / "eval", sp)
    task = detection_task()
    started = time.time()
    pool = []
    for s in range(TRAIN_SEED, TRAIN_SEED + TRAIN_SCENES):
        scene = scene_of(s)
        pool.append(tensor_truth(sp, scene) + (scene.classes,))
    print(f"{len(pool)} training scenes drawn ({time.time() - started:.0f} s)", flush=True)
    rng = np.random.default_rng(SEED)
    for step in range(1, steps + 1):
        model.train()
        items = [pool[i] for i in rng.choice(len(pool), batch, replace=False)]
        x = np.stack([t for t, _, _ in items])
        if step % 2:                                      # horizontal flips: twice the scenes
            x = x[:, :, :, ::-1].copy()
            items = [(t, np.stack([96 - b[:, 2], b[:, 1], 96 - b[:, 0], b[:, 3]], 1), c) for t, b, c in items]
        level_targets = targets([b for _, b, _ in items], [c for _, _, c in items], 96, STRIDES, REG_MAX,
                                len(scenes.CLASSES))
        loss = losses(model(paddle.to_tensor(x)), level_targets, STRIDES, REG_MAX)
        loss.backward()
        opt.step()
        opt.clear_grad()
        schedule.step()
        if step % 250 == 0 or step == steps:
            model.eval()
            with paddle.no_grad():
                outputs = [o.numpy() for o in model(paddle.to_tensor(x_eval))]
            metrics = task.evaluate(outputs, truth)
            print(f"step {step} loss {float(loss):.3f} map50 {metrics['map50']:.1f} map {metrics['map']:.1f} "
                  f"small {metrics['map_small']:.1f} ({time.time() - started:.0f} s)", flush=True)
    paddle.save(model.state_dict(), str(HERE / "detector.pdparams"))


def main() -> None:
    scenes.train_main(__doc__.split("\n")[0], 900, write_data, train, HERE / "data")


if __name__ == "__main__":
    main()
