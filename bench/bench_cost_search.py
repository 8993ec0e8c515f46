"""The INT8 search's cost step on the bundled and PP-OCR examples: instructions before (the accuracy choice) and after
(the cheapest within the budget), INT8/FP32 per kernel path, the op-type profile, accuracy, as JSON.

    ./run python -m edgekit.examples.ppocr.make_data DATA --det-calib 8 --det-eval 16 --rec-calib 1 --rec-eval 1
    EDGEKIT_LITE_ARM=/work/shared/lite-arm ./run python bench/bench_cost_search.py --data DATA \
        [--models digits,cls,det] [--cpus a55,default] [--cache-dir DIR] [--out DIR]

Each (model, CPU profile) is one `edgekit build --target arm64 --quant int8 --cpu CPU` (digits: the bundled example
with `--search-algos avg,hist`; cls: cls.toml with `--search-algos avg,hist`; det: det.toml, `avg`), reading the
figures from the bundle's manifest (`quantization.search.cost`, `parity.accuracy`,
`emulation.instruction_counts.cached`). With one `--cache-dir` the second CPU profile reuses the calibrations and
counts (only its profiles run). docs/costs.md ("The INT8 search weighs the count") has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PPOCR = ROOT / "edgekit" / "examples" / "ppocr"


def build_args(model: str, data: Path, cpu: str, cache: Path, out: Path) -> list[str]:
    common = ["--target", "arm64", "--quant", "int8", "--cpu", cpu, "--cache-dir", str(cache), "--out", str(out),
              "--quiet"]
    if model == "digits":
        return ["build", *common, "--search-algos", "avg,hist"]
    from edgekit.examples.ppocr.models import model_path

    extra = ["--search-algos", "avg,hist"] if model == "cls" else []
    return ["build", "-c", str(PPOCR / f"{model}.toml"), "-m", str(model_path(model)),
            "--eval", str(data / f"{model}_eval.npz"), "--calib", str(data / f"{model}_calib.npz"), *common, *extra]


def bundle_of(out: Path) -> Path:
    (manifest,) = out.glob("*/arm64-int8/manifest.json")
    return manifest.parent


def row(model: str, cpu: str, bundle: Path, seconds: float) -> dict:
    m = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    search = m["quantization"]["search"]
    cost = search["cost"]
    found = {"model": model, "cpu": cpu, "build_seconds": round(seconds, 1), "accuracy": m["parity"]["accuracy"],
             "chosen": {"algo": search["algo"], "float_layers": search["float_layers"],
                        "float_op_types": search["float_op_types"]},
             "candidates": [{k: c.get(k) for k in ("purpose", "algo", "float_layers", "float_op_types", "holds",
                                                   "task", "instructions")} for c in search["candidates"]],
             "cost": cost, "tier_c_counts_cached": m["emulation"]["instruction_counts"].get("cached")}
    if cost.get("counted"):
        fp32 = cost["fp32"][cpu]
        found["before"] = {"instructions": cost["accuracy_choice"]["instructions"],
                           "int8_vs_fp32": round(cost["accuracy_choice"]["instructions"] / fp32, 4)}
        found["after"] = {"instructions": cost["chosen"][cpu], "int8_vs_fp32": cost["int8_vs_fp32"][cpu]}
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="make_data's folder (for cls and det)")
    parser.add_argument("--models", default="digits,cls,det")
    parser.add_argument("--cpus", default="a55,default")
    parser.add_argument("--cache-dir", type=Path, help="calibration and count cache, shared by the builds")
    parser.add_argument("--out", type=Path, default=Path("/tmp/edgekit-bench-cost-search"))
    args = parser.parse_args(argv)
    if not os.environ.get("EDGEKIT_LITE_ARM"):
        print("EDGEKIT_LITE_ARM is not set: the cost step counts under qemu with the ARM runtime "
              "(e.g. EDGEKIT_LITE_ARM=/work/shared/lite-arm)", file=sys.stderr)
        return 2
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if any(m != "digits" for m in models) and args.data is None:
        print("--data is needed for cls and det: python -m edgekit.examples.ppocr.make_data DATA", file=sys.stderr)
        return 2
    cache = (args.cache_dir or args.out / "cache").absolute()
    rows = []
    for model in models:
        for cpu in [c.strip() for c in args.cpus.split(",") if c.strip()]:
            out = (args.out / f"{model}-{cpu}").absolute()
            start = time.monotonic()
            done = subprocess.run([sys.executable, "-c", "from edgekit.cli import main; main()",
                                   *build_args(model, args.data, cpu, cache, out)], capture_output=True, text=True)
            if done.returncode != 0:
                rows.append({"model": model, "cpu": cpu, "exit": done.returncode, "stderr": done.stderr[-2000:]})
                continue
            rows.append(row(model, cpu, bundle_of(out), time.monotonic() - start))
    report = {"rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_cost_search.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
