"""`edgekit inspect` and `edgekit parity BUNDLE`: look at what a build produced."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import bundle as bundle_mod
from . import parity
from .errors import BundleError, InputModelError


def describe_nb(path: Path) -> dict:
    from .lite.nbfile import kernels, read_header

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
        from .lite import opt_version

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
    if not bundle.nb_file.is_file():
        return {"bundle": str(path), "manifest": m, "problems": problems,
                "text": [f"bundle {path}", f"  checksums: {'; '.join(problems)}"]}
    info = describe_nb(bundle.nb_file)
    ptext = m["parity"]
    text = [
        f"bundle {path}",
        f"  model {m['model']['name']}: {m['model']['target']} ({m['model']['abi']}) {m['model']['precision']}, "
        f"built {m['created_utc']}",
        *info["text"],
        "  inputs: " + ", ".join(f"{i['name']} {i['shape']} {i['dtype']}" for i in m["model"]["inputs"]),
        "  outputs: " + ", ".join(m["model"]["outputs"]),
        "  versions: " + ", ".join(f"{k} {m['versions'].get(k)}" for k in ("paddlepaddle", "paddleslim", "paddlelite", "opt", "python")),
        f"  parity: {'passed' if ptext['passed'] else 'FAILED'} on {ptext['samples']} samples"
        + ("; " + ", ".join(f"{k} {v:.2f} %" for k, v in ptext["accuracy"].items()) if ptext["accuracy"] else ""),
        f"  host twin: {m['host_twin']['file']} ({m['host_twin']['bytes'] / 1024:.1f} KiB)",
        f"  checksums: {'all ' + str(len(m['files'])) + ' files verify' if not problems else '; '.join(problems)}",
    ]
    return {"bundle": str(path), "nb": info, "manifest": m, "problems": problems, "text": text}


def replay_golden(path: Path) -> tuple[list[str], bool]:
    """Run the golden inputs through the bundle's x86 twin and apply the FP32 gates from the manifest."""
    from .lite.runtime import LiteRunner

    bundle = bundle_mod.load(path)
    problems = bundle_mod.verify(bundle)
    if problems:
        raise BundleError(f"bundle {path} does not verify: {problems[0]}", "rebuild it with `edgekit build`")
    m = bundle.manifest
    golden = m["golden"]
    feeds = {i["name"]: np.load(path / i["file"]) for i in golden["inputs"]}
    reference = [np.load(path / o["file"]) for o in golden["outputs"]]
    names = [o["name"] for o in golden["outputs"]]
    twin = LiteRunner(path / m["host_twin"]["file"], list(feeds)).run(feeds)
    gates = m["config"]["gates"]
    tolerance = parity.Tolerance(gates["twin_max_abs"], gates["twin_min_cosine"])
    checks = tolerance.checks("A", "x86 twin .nb vs golden", parity.compare(reference, twin, names))
    lines = [f"replaying {golden['count']} golden samples on {m['host_twin']['file']}"] + [c.line() for c in checks]
    return lines, all(c.passed for c in checks)
