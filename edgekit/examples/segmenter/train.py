"""Train the segmenter example and write its data folders.

    ./run python -m edgekit.examples.segmenter.train [--steps 600]

Writes, next to this file: `segmenter.pdparams`, `data/labels.txt`, `data/calib/*.png`
(32 scenes), `data/eval/*.png` (32 held-out scenes), their masks `data/eval_masks/*.png`
(pixel value = class: 0 background, 1 circle, 2 square, 3 triangle) and
`data/eval/truth.json` read from those masks. The scenes are the detector example's
(edgekit.examples.detector.scenes) at 64x64 with objects of 6 to 32 px.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from edgekit.examples.detector import scenes

HERE = Path(__file__).parent
SEED = 5
CALIB, EVAL, TRAIN_SCENES = 32, 32, 3072
EVAL_SEED, CALIB_SEED, TRAIN_SEED = 3_000_000, 4_000_000, 500_000
LABELS = ("background",) + scenes.CLASSES


def spec():
    from edgekit.contracts.settings import load_toml
    from edgekit.contracts.preprocess import PreprocessSpec

    return PreprocessSpec.from_mapping(load_toml(HERE / "edgekit.toml")["preprocess"])


def scene_of(seed: int) -> scenes.Scene:
    return scenes.make_scene(seed, 64, 64, max_objects=5, min_size=6)


def segmentation_task():
    from edgekit.tasks import make_task

    return make_task("segmentation", {"labels": list(LABELS)})


def write_data(data: Path) -> None:
    import cv2

    from edgekit.tasks import write_truth
    from edgekit.tasks.segmentation import masks_truth

    data.mkdir(parents=True, exist_ok=True)
    (data / "labels.txt").write_text("".join(f"{c}\n" for c in LABELS), encoding="utf-8")
    for name, count, base in (("calib", CALIB, CALIB_SEED), ("eval", EVAL, EVAL_SEED)):
        (data / name).mkdir(exist_ok=True)
        for i in range(count):
            scene = scene_of(base + i)
            cv2.imwrite(str(data / name / f"{name}{i:03d}.png"), scene.image)
            if name == "eval":
                (data / "eval_masks").mkdir(exist_ok=True)
                cv2.imwrite(str(data / "eval_masks" / f"{name}{i:03d}.png"), scene.mask)
    masks = sorted((data / "eval_masks").glob("*.png"))
    write_truth(data / "eval" / "truth.json", segmentation_task(), masks_truth(masks),
                {"generator": "edgekit.examples.segmenter.train", "seed": EVAL_SEED, "masks": "data/eval_masks"})


def train(steps: int, batch: int = 32) -> dict:
    import paddle
    import paddle.nn.functional as F

    from edgekit.core.images import decode_image, image_files
    from edgekit.tasks import read_truth

    from .model import Segmenter

    paddle.seed(SEED)
    sp = spec()
    started = time.time()
    pool_x, pool_y = [], []
    for s in range(TRAIN_SEED, TRAIN_SEED + TRAIN_SCENES):
        scene = scene_of(s)
        pool_x.append(sp.apply(scene.image))
        pool_y.append(scene.mask.astype(np.int64))
    pool_x, pool_y = np.stack(pool_x), np.stack(pool_y)
    files = image_files(HERE / "data" / "eval")
    x_eval = np.stack([sp.apply(decode_image(f)) for f in files])
    truth = read_truth(HERE / "data" / "eval" / "truth.json", len(files)).values
    task = segmentation_task()
    model = Segmenter()
    schedule = paddle.optimizer.lr.CosineAnnealingDecay(5e-3, steps)
    opt = paddle.optimizer.AdamW(learning_rate=schedule, parameters=model.parameters(), weight_decay=1e-4)
    weights = paddle.to_tensor(np.array([0.5, 1.0, 1.0, 1.0], np.float32))
    rng = np.random.default_rng(SEED)
    metrics = {}
    for step in range(1, steps + 1):
        model.train()
        pick = rng.choice(len(pool_x), batch, replace=False)
        x, y = pool_x[pick], pool_y[pick]
        if step % 2:
            x, y = x[:, :, :, ::-1].copy(), y[:, :, ::-1].copy()
        logits = model(paddle.to_tensor(x))
        loss = F.cross_entropy(logits.transpose([0, 2, 3, 1]), paddle.to_tensor(y[..., None]), weight=weights)
        loss.backward()
        opt.step()
        opt.clear_grad()
        schedule.step()
        if step % 200 == 0 or step == steps:
            model.eval()
            with paddle.no_grad():
                metrics = task.evaluate([model(paddle.to_tensor(x_eval)).numpy()], truth)
            print(f"step {step} loss {float(loss):.3f} miou {metrics['miou']:.1f} ({time.time() - started:.0f} s)",
                  flush=True)
    paddle.save(model.state_dict(), str(HERE / "segmenter.pdparams"))
    return metrics


def main() -> None:
    scenes.train_main(__doc__.split("\n")[0], 600, write_data, train, HERE / "data")


if __name__ == "__main__":
    main()
