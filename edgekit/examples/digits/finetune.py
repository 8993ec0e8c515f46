"""Fine-tuning hook for the digits example, as `edgekit prune/build --finetune` calls it:

    --finetune edgekit.examples.digits.finetune:finetune

`finetune(model, epochs)` trains the (pruned) model in place on the training split,
which is regenerated from scikit-learn into a temporary folder exactly as `train.py`
splits it and read back through the example's preprocessing spec; the held-out
images in `data/test` are never used here.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

from edgekit.examples.digits.train import HERE, SEED, write_images

log = logging.getLogger(__name__)


def training_set():
    """The training split of train.py (same seed, same stratified split), through the bundle's preprocessing."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from edgekit.contracts.settings import load_toml
    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.model.data import load_images, read_labels

    digits = load_digits()
    x_train, _, y_train, _ = train_test_split(digits.images, digits.target, test_size=0.2, random_state=SEED,
                                              stratify=digits.target)
    spec = PreprocessSpec.from_mapping(load_toml(HERE / "edgekit.toml")["preprocess"])
    labels = read_labels(HERE / "data" / "labels.txt")
    with tempfile.TemporaryDirectory(prefix="edgekit-digits-finetune-") as folder:
        write_images(Path(folder), x_train, y_train, "train")
        return load_images(Path(folder), spec, "image", labels)


def finetune(model, epochs: int, learning_rate: float = 1e-3, batch_size: int = 64) -> None:
    import paddle

    data = training_set()
    x, y = data.inputs["image"], data.labels
    paddle.seed(SEED)
    rng = np.random.default_rng(SEED)
    opt = paddle.optimizer.Adam(learning_rate=learning_rate, parameters=model.parameters())
    model.train()
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        for start in range(0, len(x), batch_size):
            idx = order[start:start + batch_size]
            loss = paddle.nn.functional.cross_entropy(model(paddle.to_tensor(x[idx])), paddle.to_tensor(y[idx]))
            loss.backward()
            opt.step()
            opt.clear_grad()
        log.info("fine-tune epoch %d: last batch loss %.4f", epoch + 1, float(loss))
    model.eval()
