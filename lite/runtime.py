"""Run an x86 `.nb` on the host through the paddlelite wheel (the twin of the ARM model)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.core.errors import InputModelError
from edgekit.model.runners import run_batched


class LiteRunner:
    def __init__(self, nb_file: Path, feed_names: Sequence[str]) -> None:
        from paddlelite.lite import MobileConfig, create_paddle_predictor

        config = MobileConfig()
        config.set_model_from_file(str(nb_file))
        try:
            self.predictor = create_paddle_predictor(config)
        except Exception as exc:
            raise InputModelError(f"Paddle-Lite cannot load {nb_file} on this host ({exc})",
                                  "only x86 .nb files run on the host; ARM ones run on devices") from exc
        self.feed_names = list(feed_names)

    def run_one(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        for name in self.feed_names:
            self.predictor.get_input_by_name(name).from_numpy(np.ascontiguousarray(feeds[name]))
        self.predictor.run()
        # numpy() is a view into the predictor's buffer: the next run() overwrites it
        return [np.array(self.predictor.get_output_by_name(n).numpy(), copy=True)
                for n in self.predictor.get_output_names()]

    def run(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return run_batched(self.run_one, inputs, 1)
