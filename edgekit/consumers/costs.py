"""`edgekit bench`: bundles side by side by the instructions one inference of their model.nb executes, as tier C
counted them (edgekit/verify/counts.py) and recorded them in each manifest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from edgekit.contracts.manifest import Manifest
from edgekit.verify.counts import CLASSES
from edgekit.verify.latency import estimate
from edgekit.core.errors import ConfigError, InputModelError
from edgekit.core.tables import CPU_PROFILES


@dataclass(frozen=True)
class CostRow:
    bundle: str
    model: str
    target: str
    precision: str
    variant: str                  # "pruned", "no-fold", ... (what the build changed)
    paths: dict[str, dict[str, int]]   # kernel path -> per_inference counts by class

    def total(self, path: str) -> int | None:
        counts = self.paths.get(path)
        return counts["total"] if counts else None


def row(bundle: Path, manifest: Manifest) -> CostRow:
    """A bundle's counts as recorded by tier C; InputModelError when the manifest has none."""
    emulation = manifest.emulation
    counts = emulation.instruction_counts if emulation is not None else None
    if counts is None or not counts.paths:
        why = ((emulation.reason if emulation is not None else None) or (counts.reason if counts is not None else None)
               or "the bundle predates instruction counts")
        raise InputModelError(f"{bundle} records no instruction counts ({why})",
                              "rebuild it with tier C (EDGEKIT_LITE_ARM set, without --no-emulation)")
    model = manifest.model
    variant = [v for v, on in (("pruned", manifest.pruned), ("no-fold", manifest.fold is False)) if on]
    return CostRow(str(bundle), model.name, model.target.value, model.precision.value, "+".join(variant) or "-",
                   {p: dict(c.per_inference) for p, c in counts.paths.items()})


def compare(rows: Sequence[CostRow]) -> dict:
    """Every bundle's counts per kernel path and its ratio to the first bundle's (the baseline) on the same path."""
    if not rows:
        raise ConfigError("bench needs at least one bundle", "pass bundle folders written by edgekit build")
    seen = {p for r in rows for p in r.paths}
    paths = [p for p in CPU_PROFILES if p in seen] + sorted(seen - set(CPU_PROFILES))
    base = rows[0]
    out = []
    for r in rows:
        entry = {"bundle": r.bundle, "model": r.model, "target": r.target, "precision": r.precision,
                 "variant": r.variant, "paths": {}}
        for p in paths:
            counts = r.paths.get(p)
            if counts is None:
                continue
            ref = base.total(p)
            entry["paths"][p] = dict(counts, vs_first=round(counts["total"] / ref, 4) if ref else None)
        entry["latency_estimate"] = (estimate({p: {"per_inference": c} for p, c in r.paths.items()}, r.precision)
                                     if r.target == "arm64" else None)
        out.append(entry)
    return {"schema": "edgekit.bench/1", "unit": "guest instructions per inference", "baseline": base.bundle,
            "paths": paths, "bundles": out}


def table(result: Mapping) -> list[str]:
    """The comparison as text: one line per bundle and kernel path."""
    header = f"{'bundle':<34} {'path':<8} {'total':>13} {'vs 1st':>7} {'simd/fp':>7} {'ld/st':>6} {'branch':>6} {'dot':>6}"
    lines = [f"instruction counts per inference (baseline: {result['baseline']})", header, "-" * len(header)]
    for entry in result["bundles"]:
        name = f"{entry['model']} {entry['target']}-{entry['precision']}" + (
            f" {entry['variant']}" if entry["variant"] != "-" else "")
        for path, c in entry["paths"].items():
            share = {k: c[k] / c["total"] if c["total"] else 0.0 for k in CLASSES}
            ratio = f"{c['vs_first']:.3f}" if c.get("vs_first") is not None else "-"
            lines.append(f"{name[:34]:<34} {path:<8} {c['total']:>13,} {ratio:>7} {share['simd_fp']:>7.1%} "
                         f"{share['load_store']:>6.1%} {share['branch']:>6.1%} {share['dot_product']:>6.1%}")
    return lines


def bench_bundles(paths: Sequence[Path]) -> dict:
    """`edgekit bench`: the recorded counts of each bundle folder, compared with the first one's."""
    from edgekit.build import bundle as bundle_mod

    rows = []
    for path in paths:
        path = Path(path)
        if not path.is_dir():
            raise InputModelError(f"{path} is not a bundle folder", "pass folders written by edgekit build")
        rows.append(row(path, bundle_mod.load(path).manifest))   # typed at load: instruction_counts too
    return compare(rows)


# ----------------------------------------------------------------- profiles (edgekit/verify/profile.py)

def profile_bundle(path: Path, settings, *, cpu: str | None = None, timeout: float = 3600,
                   cache: bool = False) -> dict:
    """`edgekit inspect BUNDLE --profile`: golden input 0 of an arm64 bundle, profiled on `cpu` (default: the
    settings' CPU profile) with the unstripped runtime found by `symbols_runtime`. Measured afresh unless `cache`
    (a profile is three inferences under the plugin: seconds for small models, a minute for PP-OCR det)."""
    import dataclasses

    from edgekit.build.bundle import load
    from edgekit.consumers.inspection import golden_vectors
    from edgekit.core.errors import BundleError
    from edgekit.core.tables import TARGETS
    from edgekit.verify.emulator import Emulator, native_cache
    from edgekit.verify.profile import measure, symbols_runtime

    bundle = load(Path(path))
    model = bundle.manifest.model
    if TARGETS[model.target].emulation != "aarch64":
        raise BundleError(f"{path} is a {model.target.value} bundle; profiles exist for arm64 bundles only",
                          "profile the arm64 build of the model (the symbol build of Lite is armv8 only)")
    lite = symbols_runtime(settings.runtime)
    cpu = cpu or settings.cpu
    emulator = Emulator.prepare("aarch64", dataclasses.replace(settings, runtime=lite, cpu=cpu), timeout)
    feeds, _, _ = golden_vectors(bundle)           # checked against golden.json before they are read
    sample = {name: values[:1] for name, values in feeds.items()}
    found = measure(emulator, bundle.nb_file, sample, cpu=cpu,
                    cache_folder=native_cache() / "profiles" if cache else None)
    emulation = bundle.manifest.emulation
    counts = emulation.instruction_counts if emulation is not None else None
    recorded = counts.paths.get(cpu) if counts is not None else None
    found["recorded_total"] = recorded.total if recorded is not None else None
    found.update(bundle=str(path), model=model.name, precision=model.precision.value)
    return found


def bench_profiles(paths: Sequence[Path], settings, cpus: Sequence[str] | None = None, *,
                   timeout: float = 3600) -> dict:
    """`edgekit bench --profile`: every bundle profiled on each CPU profile in `cpus` (default: one per INT8 kernel
    family of arm64, costs.kernel_paths)."""
    from edgekit.verify.counts import kernel_paths

    cpus = list(cpus or kernel_paths("aarch64"))
    profiles = []
    for path in paths:
        for cpu in cpus:
            profiles.append(profile_bundle(Path(path), settings, cpu=cpu, timeout=timeout))
    return {"schema": "edgekit.bench-profile/1", "unit": "guest instructions per inference", "cpus": cpus,
            "profiles": profiles}
