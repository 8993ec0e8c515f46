"""Train the bundled digits example and write its data folders.

    ./run python -m edgekit.examples.digits.train

Writes, next to this file: `digits_cnn.pdparams`, `data/labels.txt`,
`data/calib/<digit>/*.png` (from the training split) and `data/test/<digit>/*.png`
(the held-out split; the training split itself is written to a temporary folder). The images are scikit-learn's 8x8 digit scans (values 0-16)
stored as 8-bit PNG; training reads them back through the same preprocessing spec
that the bundle ships, so host, training and apps see identical inputs.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
SEED = 7


def write_images(root: Path, images: np.ndarray, labels: np.ndarray, prefix: str) -> None:
    import cv2

    for i, (img, label) in enumerate(zip(images, labels)):
        folder = root / str(int(label))
        folder.mkdir(parents=True, exist_ok=True)
        pixels = np.clip(np.rint(img * (255.0 / 16.0)), 0, 255).astype(np.uint8)
        cv2.imwrite(str(folder / f"{prefix}{i:04d}.png"), pixels)


def make_data(data: Path, train_dir: Path, calib_count: int) -> None:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(digits.images, digits.target, test_size=0.2,
                                                        random_state=SEED, stratify=digits.target)
    data.mkdir(parents=True, exist_ok=True)
    (data / "labels.txt").write_text("".join(f"{d}\n" for d in range(10)), encoding="utf-8")
    write_images(train_dir, x_train, y_train, "train")   # regenerated on demand, not committed
    write_images(data / "test", x_test, y_test, "test")
    rng = np.random.default_rng(SEED)
    pick = np.sort(rng.choice(len(x_train), size=calib_count, replace=False))
    write_images(data / "calib", x_train[pick], y_train[pick], "calib")


def train(data: Path, train_dir: Path, epochs: int) -> float:
    import paddle

    from edgekit.contracts.settings import load_toml
    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.model.data import load_images, read_labels
    from edgekit.examples.digits.model import DigitsCNN

    spec = PreprocessSpec.from_mapping(load_toml(HERE / "edgekit.toml")["preprocess"])
    labels = read_labels(data / "labels.txt")
    train_set = load_images(train_dir, spec, "image", labels)
    test_set = load_images(data / "test", spec, "image", labels)
    paddle.seed(SEED)
    np.random.seed(SEED)
    model = DigitsCNN()
    opt = paddle.optimizer.Adam(learning_rate=2e-3, parameters=model.parameters())
    x, y = train_set.inputs["image"], train_set.labels
    rng = np.random.default_rng(SEED)
    for epoch in range(epochs):
        model.train()
        order = rng.permutation(len(x))
        for start in range(0, len(x), 64):
            idx = order[start:start + 64]
            loss = paddle.nn.functional.cross_entropy(model(paddle.to_tensor(x[idx])), paddle.to_tensor(y[idx]))
            loss.backward()
            opt.step()
            opt.clear_grad()
        model.eval()
        with paddle.no_grad():
            pred = model(paddle.to_tensor(test_set.inputs["image"])).numpy().argmax(1)
        acc = float((pred == test_set.labels).mean() * 100)
        logging.info("epoch %d loss %.4f held-out top-1 %.2f %%", epoch + 1, float(loss), acc)
    paddle.save(model.state_dict(), str(HERE / "digits_cnn.pdparams"))
    return acc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--calib", type=int, default=128, help="calibration images drawn from the training split")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    data = HERE / "data"
    with tempfile.TemporaryDirectory(prefix="edgekit-digits-train-") as train_dir:
        make_data(data, Path(train_dir), args.calib)
        acc = train(data, Path(train_dir), args.epochs)
    print(f"held-out top-1: {acc:.2f} % -> {HERE / 'digits_cnn.pdparams'}")


if __name__ == "__main__":
    main()
