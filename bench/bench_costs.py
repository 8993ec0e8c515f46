"""Instruction counts of five paddle.vision models on Lite's real ARM kernels, and how well they explain published
device latency.

Builds MobileNetV1, V2, V3-Large, V3-Small and ResNet50 (random weights, 1x3x224x224) as FP32 and INT8 (PaddleSlim
PTQ, 8 random calibration images) arm64 .nb files through edgekit's own export / quantize / opt functions, counts one
inference of each on the plain NEON path (`default`: Cortex-A53/A72 kernels) and the dot-product path (`a55`), and
fits per core every cost model of edgekit/verify/latency.py (one cost per instruction up to one per class) against
Paddle-Lite v2.11's published table (docs/performance/benchmark.md, 1 thread, ms): Snapdragon 865 (Cortex-A77,
dot product: INT8 counted on the a55 path) and RK3399 (Cortex-A72: the plain NEON path). Reports per core and cost
model the costs, leave-one-model-out errors, predicted vs published INT8/FP32 speed-ups, which model the LOO error
chooses (and the choice validated out of sample) and the rank order; and, on MobileNetV2, how much the weights
(random vs trained-like: BN statistics recalibrated, half the weights zeroed) move the count.

    EDGEKIT_LITE_ARM=/work/shared/lite-arm ./run python bench/bench_costs.py [--models mobilenet_v2,...] [--out DIR]
    ./run python bench/bench_costs.py --fit tests/data/costs/bench_costs_counts.json [--markdown]

Prints JSON (and writes it to OUT/bench_costs.json). ResNet50 under qemu takes minutes per inference. `--fit FILE`
refits counts measured before (a bench_costs.json, or the copy kept in tests/data/costs/) without counting;
`--markdown` prints docs/costs.md's leave-one-model-out table of the chosen fits instead of JSON.
`--bundles B... [--processes N]` counts existing bundles instead (golden input 0, every kernel path, N processes
each (3), with the plugin's slowdown).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

MODELS = ("mobilenet_v1", "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small", "resnet50")


def build_models(name: str, folder: Path, rng, trained_like: bool = False) -> dict:
    """FP32 and INT8 arm64 .nb files of one paddle.vision model; {"fp32": path, "int8": path, "sample": array}."""
    import paddle

    from edgekit.contracts.settings import InputSpec, QuantConfig
    from edgekit.model.data import Samples
    from edgekit.export.dygraph import export_layer
    from edgekit.lite import convert
    from edgekit.lite.rewrite import lite_safe
    from edgekit.quantize.ptq import quantize_int8

    paddle.disable_static()
    paddle.seed(0)
    layer = getattr(paddle.vision.models, name)(pretrained=False)
    images = rng.standard_normal((10, 3, 224, 224)).astype(np.float32)
    if trained_like:
        _trained_like(paddle, layer, images)
    spec = InputSpec("x", (1, 3, 224, 224), "float32")
    static = export_layer(layer, [spec], folder / "export", {"x": images[:1]}, name)
    # opt's arm target segfaults on MobileNetV2's flatten_contiguous_range (measured): flatten -> reshape2 (the x86
    # twin's checked rewrite) for every model, so all five convert the same way
    safe, _ = lite_safe(static, folder / "safe-fp32", {"x": images[:1]}, x86=True)
    fp32 = convert(safe, "arm", folder / "fp32.nb", timeout=1200, target="arm64", precision="fp32")
    quantized = quantize_int8(static, Samples({"x": images[1:9]}), QuantConfig(batch_size=1, batch_nums=8),
                              folder / "int8")
    safe, _ = lite_safe(quantized.model, folder / "safe-int8", {"x": images[:1]}, x86=True)
    int8 = convert(safe, "arm", folder / "int8.nb", timeout=1200, target="arm64", precision="int8")
    return {"fp32": fp32.nb_file, "int8": int8.nb_file, "sample": images[9:10]}


def _trained_like(paddle, layer, images) -> None:
    """Weights with a trained network's traits: half of each weight tensor zeroed by magnitude, BN statistics of the
    data (a few train-mode passes), instead of random init with unit statistics."""
    with paddle.no_grad():
        for param in layer.parameters():
            if len(param.shape) >= 2:
                w = param.numpy()
                w[np.abs(w) < np.median(np.abs(w))] = 0.0
                param.set_value(w)
        layer.train()
        for _ in range(5):
            layer(paddle.to_tensor(images))
        layer.eval()


def count(emulator, nb: Path, sample, cache: Path) -> dict:
    from edgekit.verify import counts

    found = counts.measure(emulator, nb, {"x": sample}, cache_folder=cache, profiles=["default", "a55"], repeat=1)
    return {path: c["per_inference"] for path, c in found["paths"].items()} | {"seconds": found["seconds"]}


def validate(counts: dict, models: list[str]) -> dict:
    """Per core: every cost model's costs and leave-one-model-out table, the one LOO error chooses, that choice
    validated out of sample, and the rank order of the chosen model's LOO predictions."""
    from scipy.stats import spearmanr

    from edgekit.verify import latency

    out = {}
    for key, core in latency.CORES.items():
        evaluated = latency.evaluate(counts, core, models)
        chosen = latency.choose(evaluated)
        rows = evaluated[chosen]["loo"]
        ranks = {}
        for i, precision in enumerate(latency.PRECISIONS):
            pub = [core.published[m][i] for m in models]
            pred = [rows[m]["predicted_ms"][i] for m in models]
            ranks[precision] = {"published_order": [m for _, m in sorted(zip(pub, models))],
                                "predicted_order": [m for _, m in sorted(zip(pred, models))],
                                "spearman": round(float(spearmanr(pub, pred).correlation), 3)}
        nested = latency.chosen_out_of_sample(counts, core, models) if len(models) >= 4 else {}
        out[key] = {"core": core.label, "kernel_paths": dict(core.paths), "chosen": chosen,
                    "shipped_as": {"model": chosen, "ns_per_instruction": evaluated[chosen]["ns_per_instruction"],
                                   "loo_error_pct": evaluated[chosen]["loo_error_pct"],
                                   "fitted_shares_pct": latency.share_ranges(counts, core, models,
                                                                             latency.CANDIDATES[chosen])},
                    "choice_out_of_sample": ({"rows": nested, "loo_error_pct": latency.summary(nested)}
                                             if nested else None),
                    "rank_order": ranks, "candidates": evaluated}
    return out


def markdown(validation: dict) -> str:
    from edgekit.verify import latency

    return "\n".join(line for key, v in validation.items()
                     for line in latency.markdown_rows(latency.CORES[key], v["candidates"][v["chosen"]]["loo"]))


def bundle_counts(paths: list[Path], runtime: Path, processes: int = 3) -> dict:
    """Each bundle's golden input 0 counted on every kernel path in `processes` separate runner processes (the
    spread between them, and within one: 3 timed runs), and the plugin's slowdown of the same runs."""
    from edgekit.verify import counts
    from edgekit.contracts.settings import EmulationConfig
    from edgekit.verify.emulator import Emulator, native_cache
    from edgekit.lite import icount, native
    from edgekit.core.tables import TARGETS, Target

    plugin = icount.build_plugin(native_cache())
    out = {}
    for path in paths:
        manifest = json.loads((path / "manifest.json").read_text())
        abi = TARGETS[Target(manifest["model"]["target"])].emulation
        emulator = Emulator.prepare(abi, EmulationConfig(runtime=runtime), timeout=7200)
        sample = {i["name"]: np.load(path / i["file"])[:1] for i in manifest["golden"]["inputs"]}
        entry = {"model": manifest["model"]["name"], "target": manifest["model"]["target"],
                 "precision": manifest["model"]["precision"], "abi": abi, "paths": {}}
        for profile in counts.profiles_for(abi):
            if profile == "a53":
                continue                      # the default path's kernels (measured within 0.2 % of it)
            figures, seconds = [], {}
            for counting in (True, False):
                start = time.monotonic()
                runs = []
                for _ in range(processes if counting else 1):
                    with icount.canonical_paths(emulator.build, emulator.runtime, path / "model.nb") as seen:
                        build, lite, nb, work = seen
                        runs.append(native.run_runner(build, lite, nb, sample, warmup=1, repeat=3, cpu_profile=profile,
                                                      timeout=7200, workdir=work,
                                                      icount_plugin=plugin if counting else None))
                seconds[counting] = (time.monotonic() - start) / len(runs)
                if counting:
                    figures = [r.counts for r in runs]
            per = [f.timed[0]["total"] for f in figures]
            inside = [r["total"] for r in figures[0].timed]
            entry["paths"][profile] = {
                "per_inference": figures[0].timed[0], "first_inference": figures[0].passes[0]["total"],
                "across_processes_identical": len(set(per)) == 1 and all(f == figures[0] for f in figures),
                "within_process_timed_totals": inside,
                "within_process_spread_pct": round(100 * (max(inside) - min(inside)) / min(inside), 3),
                "plugin_slowdown": round(seconds[True] / seconds[False], 2),
                "seconds_per_process": {"counting": round(seconds[True], 2), "plain": round(seconds[False], 2)}}
        out[str(path)] = entry
        print(f"bench_costs: {path} counted", file=sys.stderr, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--out", type=Path, default=Path("/tmp/edgekit-bench-costs"))
    parser.add_argument("--no-weights-check", action="store_true", help="skip the random vs trained-like weights run")
    parser.add_argument("--bundles", type=Path, nargs="+", help="instead: count these bundles (golden input 0; "
                        "spread over --processes processes, plugin slowdown)")
    parser.add_argument("--processes", type=int, default=3, help="--bundles: counting processes per kernel path")
    parser.add_argument("--fit", type=Path, help="instead: refit the counts of this JSON (bench_costs.json or "
                        "tests/data/costs/bench_costs_counts.json), no counting")
    parser.add_argument("--markdown", action="store_true", help="--fit: print docs/costs.md's LOO table rows")
    args = parser.parse_args()
    if args.fit:
        stored = json.loads(args.fit.read_text(encoding="utf-8"))
        models = stored.get("models") or [m for m in MODELS if m in stored["counts"]]
        validation = validate(stored["counts"], models)
        print(markdown(validation) if args.markdown else
              json.dumps({"bench": "costs-fit", "counts_from": str(args.fit), "models": models,
                          "validation": validation}, indent=2))
        return
    from edgekit.contracts.settings import EmulationConfig
    from edgekit.verify.emulator import Emulator

    runtime = os.environ.get("EDGEKIT_LITE_ARM")
    if not runtime:
        sys.exit("bench_costs: set EDGEKIT_LITE_ARM to the Paddle-Lite ARM runtime folder")
    if args.bundles:
        counted = bundle_counts(args.bundles, Path(runtime), args.processes)
        print(json.dumps({"bench": "costs-bundles", "processes": args.processes, "bundles": counted}, indent=2))
        return
    emulator = Emulator.prepare("aarch64", EmulationConfig(runtime=Path(runtime)), timeout=7200)
    args.out.mkdir(parents=True, exist_ok=True)
    cache = args.out / "cache"
    models = [m for m in args.models.split(",") if m]
    rng = np.random.default_rng(0)
    counts, timing = {}, {}
    partial = args.out / "bench_costs.partial.json"
    for name in models:
        start = time.monotonic()
        built = build_models(name, args.out / name, rng)
        counts[name] = {p: count(emulator, built[p], built["sample"], cache) for p in ("fp32", "int8")}
        timing[name] = round(time.monotonic() - start, 1)
        partial.write_text(json.dumps({"counts": counts, "seconds": timing}, indent=2))
        print(f"bench_costs: {name} done in {timing[name]} s", file=sys.stderr, flush=True)
    result = {"bench": "costs", "input": "1x3x224x224, random N(0,1) image", "models": models, "counts": counts,
              "seconds": timing}
    if len(models) >= 3:
        result["validation"] = validate(counts, models)
    if not args.no_weights_check and "mobilenet_v2" in models:
        trained = build_models("mobilenet_v2", args.out / "mobilenet_v2-trained-like", np.random.default_rng(0), True)
        other = {p: count(emulator, trained[p], trained["sample"], cache) for p in ("fp32", "int8")}
        result["weights_effect_mobilenet_v2"] = {
            p: {path: {"random": counts["mobilenet_v2"][p][path]["total"], "trained_like": other[p][path]["total"],
                       "change_pct": round(100 * (other[p][path]["total"] / counts["mobilenet_v2"][p][path]["total"] - 1),
                                           3)}
                for path in ("default", "a55")} for p in ("fp32", "int8")}
    text = json.dumps(result, indent=2)
    (args.out / "bench_costs.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
