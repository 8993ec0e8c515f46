"""Which text lines a recogniser bundle's golden vectors should hold: the same `.nb` replayed on two choices of lines
from one folder, against the bundle's own golden cosine floor.

    EDGEKIT_LITE_ARM=... ./run python bench/bench_golden_lines.py --bundle REC_INT8_BUNDLE --data FOLDER [--count 8]

FOLDER: the line images the bundle was built with (`--eval`, read as `load_images` reads a folder). The two choices:
`one_width` (what `edgekit build` writes now: the lines of the largest width group, at its width) and
`spread_padded` (what it wrote before: lines spread over the folder, padded to its widest). Each runs on the bundle's
`model.nb` under qemu (one emulator launch) and on its FP32 x86 twin; printed as JSON: the tensor shape, the mean
per-sample cosine of the two (as `edgekit parity --emulate` computes it against golden outputs), whether it meets the
floor in golden/golden.json, and seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    from edgekit.consumers.predict import BundleModel, Engines, parse_engine
    from edgekit.contracts.settings import EmulationConfig
    from edgekit.model.data import load_images, one_width
    from edgekit.model.parity import cosine

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", required=True, type=Path, help="a recogniser bundle with a dynamic width")
    parser.add_argument("--data", required=True, type=Path, help="its evaluation folder of line images")
    parser.add_argument("--count", type=int, default=8, help="lines per choice (the build's golden_count)")
    args = parser.parse_args()
    runtime = os.environ.get("EDGEKIT_LITE_ARM")
    if not runtime:
        sys.exit("set EDGEKIT_LITE_ARM to Paddle-Lite's ARM Linux runtime: the bench runs model.nb under qemu")
    settings = EmulationConfig(runtime=Path(runtime))
    arm = BundleModel.load(args.bundle, engines=Engines(parse_engine("arm"), settings))
    twin = BundleModel.load(args.bundle, engines=Engines(parse_engine("twin"), settings))
    floor = json.loads((args.bundle / "golden" / "golden.json").read_text(encoding="utf-8"))["tolerances"]["min_cosine"]
    samples = load_images(args.data, arm.spec, arm.feed)
    result = {"bundle": str(args.bundle), "data": str(args.data), "floor": floor}
    for name, chosen in (("one_width", one_width(samples, args.count)), ("spread_padded", samples.spread(args.count))):
        batch = chosen.inputs[arm.feed]
        start = time.monotonic()
        found = cosine(twin.run_batch(batch)[0], arm.run_batch(batch)[0])
        result[name] = {"shape": list(batch.shape), "cosine": round(found, 6), "meets_floor": bool(found >= floor),
                        "seconds": round(time.monotonic() - start, 1)}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
