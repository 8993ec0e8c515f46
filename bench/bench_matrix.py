"""A build matrix on each executor: wall seconds serial vs pool vs Ray local, a cached rerun, scheduling overhead (JSON).

    ./run python bench/bench_matrix.py [--examples digits det rec cls] [--targets arm64 armv7]
                                      [--precisions fp32 int8] [--executors serial pool ray] [--emulation]
                                      [--rec-search example|fallback]

The full run (the default: digits and the three PP-OCR models, PP-OCRv4 rec included,
× 2 targets × 2 precisions = 16 cells) takes long on 2 cores; `--examples digits cls`
gives an 8-cell matrix in minutes. The rec INT8 cells search as the example's rec.toml
says (avg, then hist, which holds the 2-point exact-match budget: two calibrations, no
layer fallback); `--rec-search fallback` gives them `--search-algos avg` (90 % exact
match, outside the budget), so they run the per-layer sensitivity runs and the fallback
loop, tens of minutes a cell. Each executor builds the same matrix into its own
folder with no calibration cache; the last one is then run again (every cell a cache hit).
The scheduling overhead is the wall time per trivial task on each executor (no build),
with the executor already started; Ray's startup is reported apart. Figures only.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import EXAMPLES_DIR, ocr_data  # noqa: E402


def _noop(x):
    return x


REC_SEARCH = {"example": [], "fallback": ["--search-algos", "avg"]}     # rec's extra build flags per --rec-search


def matrix_file(root: Path, examples: list[str], targets: list[str], precisions: list[str], data: Path | None,
                emulation: bool, rec_search: str = "example") -> Path:
    lines = [f"targets = {json.dumps(targets)}", f"precisions = {json.dumps(precisions)}"]
    extra = [] if emulation else ["--no-emulation"]
    for example in examples:
        args = extra + (REC_SEARCH[rec_search] if example == "rec" else [])
        lines += ["[[model]]", f'name = "{example}"', f"args = {json.dumps(args)}"]
        if example == "digits":
            lines.append(f'config = "{EXAMPLES_DIR / "digits" / "edgekit.toml"}"')
            continue
        from edgekit.examples.ppocr import models

        lines += [f'config = "{EXAMPLES_DIR / "ppocr" / f"{example}.toml"}"', f'model = "{models.model_path(example)}"',
                  f'eval = "{data / f"{example}_eval.npz"}"', f'calib = "{data / f"{example}_calib.npz"}"']
    path = root / "matrix.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def overhead(executor, n: int = 40) -> float:
    executor.map(_noop, range(4))         # warm: workers started
    start = time.monotonic()
    executor.map(_noop, range(n))
    return round(1000 * (time.monotonic() - start) / n, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", nargs="+", default=["digits", "det", "rec", "cls"])
    parser.add_argument("--targets", nargs="+", default=["arm64", "armv7"])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "int8"])
    parser.add_argument("--executors", nargs="+", default=["serial", "pool", "ray"])
    parser.add_argument("--emulation", action="store_true", help="run tier C in every cell (default: --no-emulation)")
    parser.add_argument("--data", type=Path, help="PP-OCR data from make_data (default: rendered here)")
    parser.add_argument("--rec-search", choices=sorted(REC_SEARCH), default="example",
                        help="rec INT8: the example's algorithms (no fallback needed) or avg alone (the layer fallback)")
    args = parser.parse_args()

    from edgekit.core import executors
    from edgekit.matrix import cells as matrix

    report: dict = {"examples": args.examples, "targets": args.targets, "precisions": args.precisions,
                    "emulation": args.emulation, "rec_search": args.rec_search, "cores": executors.usable_cores(), "runs": {}}
    with tempfile.TemporaryDirectory(prefix="bench-matrix-") as tmp:
        root = Path(tmp)
        data = ocr_data(args.data, args.examples, root)
        spec = matrix.load(matrix_file(root, args.examples, args.targets, args.precisions, data, args.emulation,
                                         args.rec_search))
        report["cells"] = len(spec.cells)
        # keyed with edgekit's source as it is now: other work on the checkout must not re-key the reruns
        source = matrix.source_digest()
        first_rows = None
        for n, kind in enumerate(args.executors):
            start = time.monotonic()
            with executors.make(kind, memory_mb=2048) as runner:
                started = time.monotonic() - start
                result = matrix.run(spec, root / kind, runner, source=source)
                rows = {r["cell"]: {k: v for k, v in r.items() if k not in ("seconds", "attempts", "key")}
                        for r in result.rows}
                report["runs"][kind] = {
                    "workers": runner.workers, "startup_seconds": round(started, 2),
                    "seconds": round(result.seconds, 2), "counts": result.counts(),
                    "cell_seconds": {r["cell"]: r.get("seconds") for r in result.rows},
                    "errors": {r["cell"]: r["error"] for r in result.rows if r.get("error")},
                    "scheduling_ms_per_task": overhead(runner),
                    # the table and every bundle file's sha256, against the first executor's run
                    "same_as_first": None if first_rows is None else rows == first_rows}
                first_rows = rows if first_rows is None else first_rows
                if n == len(args.executors) - 1:
                    rerun = matrix.run(spec, root / kind, runner, source=source)
                    report["runs"][kind]["cached_rerun_seconds"] = round(rerun.seconds, 2)
                    report["runs"][kind]["cached_rerun_counts"] = rerun.counts()
        serial = report["runs"].get("serial", {}).get("seconds")
        for kind, run in report["runs"].items():
            if serial and kind != "serial":
                run["speedup_vs_serial"] = round(serial / run["seconds"], 2)
        report["table"] = (root / args.executors[0] / "matrix.md").read_text()
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
