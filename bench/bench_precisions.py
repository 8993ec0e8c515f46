"""Size, accuracy and build time of the bundled example for every precision, as JSON.

    ./run python bench/bench_precisions.py

Builds the digits example for arm64 as fp32, int8 (best of several calibration
algorithms, no fallback), int8 with the KL algorithm, whose ~2-point loss the layer fallback must repair,
int8-weight and int16-weight, each into a temporary folder with an empty
calibration cache, and prints `.nb` bytes (graph / weights), top-1 of the
reference and of the host simulation, and build seconds. Figures only.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from pathlib import Path

CASES = {
    "fp32": {"precision": "fp32"},
    "int8 (best algorithm, no fallback)": {"precision": "int8", "search_algos": ("avg", "abs_max", "hist", "mse"),
                                           "fallback": False},
    # KL alone loses ~2 points on this model: the fallback has to keep a layer in float
    "int8 KL (fallback, budget 0.5 points)": {"precision": "int8", "search_algos": ("KL",), "max_drop": 0.5},
    "int8-weight": {"precision": "int8-weight"},
    "int16-weight": {"precision": "int16-weight"},
}


def main() -> int:
    logging.disable(logging.INFO)
    from edgekit.config import resolve
    from edgekit.errors import EdgekitError
    from edgekit.pipeline import build

    rows = {}
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-") as root:
        for name, flags in CASES.items():
            out = Path(root) / name.split()[0]
            cfg = resolve(None, {"target": "arm64", "out_dir": out, "cache_dir": str(Path(root) / "cache" / name), **flags})
            start = time.monotonic()
            try:
                result = build(cfg)
            except EdgekitError as exc:       # a missed budget is a figure too
                rows[name] = {"failed": exc.message, "seconds": round(time.monotonic() - start, 2)}
                continue
            m = result.bundle.manifest
            search = m.get("quantization", {}).get("search", {})
            rows[name] = {
                "seconds": round(time.monotonic() - start, 2),
                "nb_bytes": m["model"]["bytes"], "graph_bytes": m["model"]["program_bytes"],
                "weight_bytes": m["model"]["params_bytes"], "top1": m["parity"]["accuracy"],
                "chosen_algo": search.get("algo"), "float_layers": search.get("float_layers"),
                "calibrations": search.get("calibrations"),
                "candidates": [{k: c.get(k) for k in ("algo", "float_layers", "holds", "top1")} for c in search.get("candidates", [])],
            }
    print(json.dumps({"model": "digits (bundled example)", "target": "arm64", "python": sys.version.split()[0],
                      "precisions": rows}, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
