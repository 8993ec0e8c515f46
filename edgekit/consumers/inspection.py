"""`edgekit inspect` and `edgekit parity BUNDLE`: look at what a build produced."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgekit.build import bundle as bundle_mod
from edgekit.contracts.golden import GoldenGroup, GoldenTensor
from edgekit.contracts.manifest import Emulation
from edgekit.model import parity
from edgekit.core.errors import BundleError, InputModelError, VersionLockError


def describe_nb(path: Path) -> dict:
    from edgekit.lite.nbfile import kernels, read_header

    header = read_header(path)
    found = kernels(path)
    counts: dict[str, int] = {}
    for k in found:
        key = f"{k.op}[{k.target} {k.precision}]"
        counts[key] = counts.get(key, 0) + 1
    targets = sorted({k.target for k in found} - {"Host", "Any", "Unk"})
    int8 = sum(1 for k in found if k.precision == "INT8")
    runtime = _host_runtime_version()
    lock = ("matches" if runtime and header.opt_version == runtime else
            f"MISMATCH: this host's paddlelite runtime is {runtime}; load the .nb with the runtime of the opt that wrote it"
            if runtime else "no paddlelite runtime on this host")
    text = [
        f"{path}: {header.file_bytes / 1024:.1f} KiB (graph {header.program_bytes / 1024:.1f} KiB, "
        f"weights {header.params_bytes / 1024:.1f} KiB)",
        f"  opt version {header.opt_version}, naive_buffer format {header.format_version}, "
        f"targets {', '.join(targets) or 'unknown'}, {len(found)} ops ({int8} with INT8 kernels)",
        "  kernels: " + ", ".join(f"{k}×{v}" for k, v in sorted(counts.items())),
        f"  version lock: .nb written by opt {header.opt_version}; host runtime {runtime or '-'} ({lock})",
    ]
    return {"file": str(path), "bytes": header.file_bytes, "program_bytes": header.program_bytes,
            "params_bytes": header.params_bytes, "opt_version": header.opt_version, "targets": targets,
            "kernels": counts, "int8_ops": int8, "host_runtime": runtime, "text": text}


def _host_runtime_version() -> str | None:
    """The version string the installed Paddle-Lite runtime writes into .nb headers (e.g. v2.13-rc)."""
    try:
        from edgekit.lite import opt_version

        return opt_version()
    except Exception:  # no paddlelite here: inspect still reads the header
        return None


def describe(path: Path) -> dict:
    if path.is_file():
        return describe_nb(path)
    if not path.is_dir():
        raise InputModelError(f"{path} does not exist", "pass a .nb file or a bundle folder")
    bundle = bundle_mod.load(path)
    m = bundle.manifest
    problems = bundle_mod.verify(bundle)
    if not bundle.nb_file.is_file() or bundle.nb_file.is_symlink():
        return {"bundle": str(path), "manifest": m.to_json(), "problems": problems,
                "text": [f"bundle {path}", f"  checksums: {'; '.join(problems)}"]}
    info = describe_nb(bundle.nb_file)
    model, verdict, twin = m.model, m.parity, m.host_twin
    text = [
        f"bundle {path}",
        f"  model {model.name}: {model.target.value} ({model.abi or '?'}) {model.precision.value}, "
        f"built {m.created_utc or '?'}",
        *info["text"],
        "  inputs: " + ", ".join(f"{i.name} {list(i.shape)} {i.dtype}" for i in model.inputs),
        "  outputs: " + ", ".join(model.outputs),
        "  versions: " + ", ".join(f"{k} {m.versions.get(k)}"
                                   for k in ("paddlepaddle", "paddleslim", "paddlelite", "opt", "python")),
        f"  parity: {'passed' if verdict.passed else 'FAILED'} on "
        f"{verdict.samples if verdict.samples is not None else '?'} samples"
        + ("; " + ", ".join(f"{k} {v:.2f} %" for k, v in verdict.accuracy.items()) if verdict.accuracy else ""),
        f"  host twin: {twin.file or '-'} ({(twin.bytes or 0) / 1024:.1f} KiB)",
        "  tier C: " + _emulation_line(m.emulation),
        *_count_lines(m.emulation),
        f"  checksums: {'all ' + str(len(m.files)) + ' files verify' if not problems else '; '.join(problems)}",
    ]
    found = {"bundle": str(path), "nb": info, "manifest": m.to_json(), "problems": problems, "text": text}
    if not problems:
        try:
            check_version_lock(bundle)
        except VersionLockError as error:
            error.report_lines = text        # the CLI prints the description, then the error (exit 3)
            raise
    return found


def verified(path: Path) -> bundle_mod.Bundle:
    """A bundle whose every checksum verifies and whose manifest holds what readers need (else refused before it runs)."""
    bundle = bundle_mod.load(path)
    problems = bundle_mod.verify(bundle)
    if problems:
        raise BundleError(f"bundle {path} does not verify: {problems[0]}", "rebuild it with `edgekit build`")
    return bundle


def check_version_lock(bundle: bundle_mod.Bundle, twin: bool = False) -> None:
    """The `.nb` headers' opt version must be the manifest's: an app links the runtime the manifest names (exit 3)."""
    from edgekit.lite.nbfile import read_header

    want, twin_file = bundle.manifest.model.opt_version, bundle.manifest.host_twin.file
    if twin and twin_file is None:
        raise BundleError(f"{bundle.path}: the manifest names no host twin (host_twin.file), which runs it on this host",
                          "rebuild the bundle with `edgekit build`")
    files = [bundle.manifest.model.file] + ([twin_file] if twin else [])
    for rel in files:
        found = read_header(bundle.path / rel).opt_version
        if found != want:
            raise VersionLockError(f"version lock: {bundle.path / rel} was written by opt {found}, but the manifest "
                                   f"says {want}", "rebuild the bundle with `edgekit build`; an app refuses a model "
                                   "written by an opt other than its runtime's version")


def locked(path: Path, twin: bool = False) -> bundle_mod.Bundle:
    """A verified bundle whose `.nb` headers agree with the manifest's opt version (the twin's too, to run it)."""
    bundle = verified(path)
    check_version_lock(bundle, twin)
    return bundle


def golden_vectors(bundle: bundle_mod.Bundle, group: GoldenGroup | None = None) -> tuple[dict, list, list]:
    """The golden inputs and reference outputs of `group` (default the main one), each checked against what
    golden.json declares before it is read."""
    from edgekit.model.data import read_npy

    group = bundle.manifest.golden.main if group is None else group

    def read(entry: GoldenTensor) -> np.ndarray:
        return read_npy(bundle.path / entry.file, BundleError, shape=entry.shape, dtype=entry.dtype)

    feeds = {i.name: read(i) for i in group.inputs}
    reference = [read(o) for o in group.outputs]
    return feeds, reference, [o.name for o in group.outputs]


def golden_groups(bundle: bundle_mod.Bundle) -> tuple[GoldenGroup, ...]:
    """Every golden group of a checked bundle: the main one, then a dynamic-width bundle's groups at other widths
    (golden.widths)."""
    return bundle.manifest.golden.groups


def _emulation_line(emulation: Emulation | None) -> str:
    if emulation is None:
        return "not recorded (bundle from an edgekit without tier C)"
    if not emulation.ran:
        return f"not run: {emulation.reason}"
    e = emulation
    return (f"ran on {e.samples} samples under qemu ({e.abi}, runtime {e.runtime_version}, "
            f"{e.int8_kernels} INT8 kernels, {e.ms_per_sample_median} ms/sample emulated)")


def _count_lines(emulation: Emulation | None) -> list[str]:
    """Tier C's instruction counts per kernel path (edgekit/verify/counts.py), when it recorded them."""
    counts = emulation.instruction_counts if emulation is not None and emulation.ran else None
    if counts is None:
        return []
    if not counts.ran:
        return [f"  instruction counts: not recorded: {counts.reason}"]
    lines = ["  instruction counts per inference (deterministic; emulated ARM kernels):"]
    for path, c in counts.paths.items():
        one = c.per_inference
        dot = f", {one['dot_product']:,} dot-product" if one.get("dot_product") else ""
        lines.append(f"    {path} ({c.kernel_path} kernels): {c.total:,} "
                     f"({one['simd_fp'] / max(1, c.total):.0%} SIMD/FP{dot}); first run {c.first_inference:,}")
    if counts.latency:
        lines.append("  latency estimate (from the counts, not a measurement; 1 thread; leave-one-model-out error on "
                     "Paddle-Lite's published table, docs/costs.md): " + ", ".join(
                         f"{core} ~{e.ms:g} ms (median ±{e.median_error_pct:g} %"
                         + (f", max ±{e.max_error_pct:g} %)" if e.max_error_pct is not None else ")")
                         for core, e in counts.latency.items()))
        for core, e in counts.latency.items():
            if e.outside_fit:
                lines.append(f"    {core}: extrapolated, the class mix is outside the fitted models': "
                             + "; ".join(e.outside_fit))
    return lines


def _samples(count: int) -> str:
    return f"{count} golden sample{'' if count == 1 else 's'}"


def replay_golden(path: Path) -> tuple[list[str], bool]:
    """Run the golden inputs through the bundle's x86 twin and apply the FP32 gates from the manifest."""
    from edgekit.lite.runtime import TwinProcess

    bundle = locked(path, twin=True)
    m = bundle.manifest
    gates = m.gates
    if gates.twin_max_abs is None or gates.twin_min_cosine is None:
        raise BundleError(f"{path}: the manifest's config.gates lacks twin_max_abs / twin_min_cosine",
                          "rebuild the bundle with `edgekit build`")
    tolerance = parity.Tolerance(gates.twin_max_abs, gates.twin_min_cosine)
    lines, checks = [], []
    for group in golden_groups(bundle):      # a fresh predictor per group: a Lite x86 predictor keeps one width
        feeds, reference, names = golden_vectors(bundle, group)
        runner = TwinProcess(path / m.host_twin.file, list(feeds))     # untrusted: a crash is exit 3
        try:
            twin = runner.run(feeds)
        finally:
            runner.close()
        found = tolerance.checks("A", f"x86 twin .nb vs golden{group.label}", parity.compare(reference, twin, names))
        lines += [f"replaying {_samples(group.count)}{group.label} on {m.host_twin.file}"]
        lines += [c.line() for c in found]
        checks += found
    return lines, all(c.passed for c in checks)


def replay_golden_emulated(path: Path, settings, timeout: float) -> tuple[list[str], bool]:
    """Run the golden inputs through model.nb itself under emulation; gates: the golden tolerances a device must meet."""
    from edgekit.contracts.settings import InputSpec
    from edgekit.verify.emulator import Emulator
    from edgekit.core.tables import TARGETS

    bundle = locked(path)
    m = bundle.manifest
    abi = TARGETS[m.model.target].emulation
    if abi is None:
        raise BundleError(f"{path} is an x86 bundle: its model.nb runs on the host already",
                          "use `edgekit parity BUNDLE` without --emulate")
    emulator = Emulator.prepare(abi, settings, timeout)
    kept_nms = m.model.nms_kept      # rows of all samples + a count per sample
    lines, checks = [], []
    for group in golden_groups(bundle):      # one emulator launch per group (one tensor shape each)
        feeds, reference, names = golden_vectors(bundle, group)
        expect = [InputSpec(i.name, i.shape, i.dtype) for i in group.expect(m.model.inputs)]
        # a width group is a few fit_height line tensors (tiers.GOLDEN_WIDE_SAMPLES): one process each, side by side
        jobs = 1 if group.width is None else group.count
        outputs, records = emulator.run(bundle.nb_file, feeds, expect, jobs=jobs, rows=kept_nms)
        if kept_nms:
            from edgekit.lite import nms

            (reference, outputs), names = nms.comparable(reference, outputs), names[:1]
        found = parity.golden_checks(m.golden.tolerances, "C", f"{m.model.target.value} model.nb (emulated ARM) "
                                     f"vs golden{group.label}", parity.compare(reference, outputs, names))
        cpu = records[0].get("cpu", {})
        lines += [f"replaying {_samples(group.count)}{group.label} on model.nb under qemu ({abi}, runtime "
                  f"{records[0].get('runtime_version')}, {cpu.get('int8_kernel_path', '?')} INT8 kernels)"]
        lines += [c.line() for c in found]
        checks += found
    return lines, all(c.passed for c in checks)
