"""Peak memory of one tier-C emulator process per model and input size, as JSON.

    EDGEKIT_LITE_ARM=/path/to/lite-arm ./run python bench/bench_emulator_memory.py \
        [--sizes 320x320 640x640 960x960] [--precision fp32] [--data DIR]

Builds the digits example and the PP-OCRv4 detector for arm64 (no tier C, no search), then runs each
`model.nb` once under qemu on one sample per input size (the detector is fully convolutional, so one
`.nb` takes every size) and reports the runner's peak RSS: what `edgekit build` measures with its first
emulator process before it decides how many more fit in the available memory (edgekit/verify/tier_c.py,
`parallel_processes`). Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common import example_flags, ocr_data


def example_name(example: str) -> str:
    return "digits" if example == "digits" else f"ppocrv4-{example}"


def _bundle(example: str, precision: str, data: Path | None, root: Path) -> Path:
    from edgekit.build.config import resolve

    done = root / example / example_name(example) / f"arm64-{precision}"
    if (done / "model.nb").is_file():
        return done
    from edgekit.build.pipeline import build

    config, flags = example_flags(example, precision, data)
    flags.update(emulation_enabled=False, fallback=False)
    cfg = resolve(config, {"target": "arm64", "out_dir": root / example, "cache_dir": str(root / "cache"), **flags})
    return build(cfg).bundle.path


def _peak(emulator, bundle: Path, shape: tuple[int, ...], samples: int = 1) -> dict:
    from edgekit.contracts.settings import InputSpec
    from edgekit.contracts.manifest import Manifest

    name, nb_file = Manifest.read(bundle).model.inputs[0].name, bundle / "model.nb"
    sample = np.random.default_rng(0).uniform(-1, 1, (samples, *shape)).astype(np.float32)
    started = time.monotonic()
    _, records = emulator.run(nb_file, {name: sample}, [InputSpec(name, (-1, *shape))], jobs=1)
    return {"input": "x".join(map(str, shape)), "samples": samples, "peak_rss_mb": round(records[0]["peak_rss_kb"] / 1024, 1),
            "seconds": round(time.monotonic() - started, 1)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["320x320", "640x640", "960x960"])
    parser.add_argument("--precision", default="fp32", choices=["fp32", "int8"])
    parser.add_argument("--samples", nargs="+", type=int, default=[1, 4, 16],
                        help="samples in one process, at the second size (the runner holds them all)")
    parser.add_argument("--keep", type=Path, help="build the bundles here and reuse them on the next run")
    parser.add_argument("--data", type=Path, help="PP-OCR data (python -m edgekit.examples.ppocr.make_data DIR)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from edgekit.contracts.settings import EmulationConfig
    from edgekit.contracts.env import lite_arm_root
    from edgekit.verify.emulator import Emulator

    emulator = Emulator.prepare("aarch64", EmulationConfig(runtime=lite_arm_root()), 600)
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-mem-") as tmp:
        root = args.keep or Path(tmp)
        data = ocr_data(args.data, ["det"], root)
        digits = _bundle("digits", args.precision, None, root)
        row = _peak(emulator, digits, (1, 32, 32))
        rows.append({"model": "digits", "nb_bytes": (digits / "model.nb").stat().st_size, **row})
        det = _bundle("det", args.precision, data, root)
        for size in args.sizes:
            h, w = (int(v) for v in size.split("x"))
            row = _peak(emulator, det, (3, h, w))
            rows.append({"model": "ppocrv4-det", "nb_bytes": (det / "model.nb").stat().st_size, **row})
        h, w = (int(v) for v in args.sizes[min(1, len(args.sizes) - 1)].split("x"))
        for count in args.samples:
            if count > 1:
                rows.append({"model": "ppocrv4-det", **_peak(emulator, det, (3, h, w), count)})
    print(json.dumps({"precision": args.precision, "runtime": str(emulator.runtime.cxx_dir), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
