"""The suite's outputs: the JSON result, JUnit XML, and a Markdown report with a latency plot (PNG).

Every file is written atomically (`edgekit.core.atomic`): after a crash or a kill there is
the previous file or none, never half of one. JUnit has one testsuite per (bundle,
device) cell and one testcase per check: a failed check is a `<failure>`, a cell that
could not run is an `<error>` on the step where it stopped, and latency that is not
gated (emulated, unstable, no baseline) is `<skipped message="...">`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Sequence

from edgekit.core import atomic
from .results import CellResult, SuiteResult

PLOT = "latency.png"
REPORT = "report.md"


def write_json(result: SuiteResult, path: Path) -> None:
    atomic.write_json(Path(path), result.to_json())


def junit_xml(result: SuiteResult) -> str:
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    root = ET.Element("testsuites", name="edgekit device test", time=f"{result.seconds:.3f}")
    for cell in result.cells:
        counts = {"tests": len(cell.checks),
                  "failures": sum(c.status == "failed" for c in cell.checks),
                  "errors": sum(c.status == "error" for c in cell.checks),
                  "skipped": sum(c.status == "skipped" for c in cell.checks)}
        for key, value in counts.items():
            totals[key] += value
        suite = ET.SubElement(root, "testsuite", name=cell.name, timestamp=result.created_utc,
                              hostname=cell.device["id"], time=f"{cell.seconds:.3f}",
                              **{k: str(v) for k, v in counts.items()})
        properties = ET.SubElement(suite, "properties")
        for name, value in _properties(cell):
            ET.SubElement(properties, "property", name=name, value=str(value))
        classname = f"edgekit.device.{cell.device['id']}.{cell.bundle['key'].replace('/', '.')}"
        for check in cell.checks:
            case = ET.SubElement(suite, "testcase", classname=classname, name=check.name, time="0")
            if check.status == "failed":
                ET.SubElement(case, "failure", message=check.message, type=check.kind).text = check.message
            elif check.status == "error":
                error = cell.error or {}
                element = ET.SubElement(case, "error", message=check.message, type=error.get("type", "DeviceError"))
                element.text = f"{check.message}\nfix: {error.get('hint', '')}"
            elif check.status == "skipped":
                ET.SubElement(case, "skipped", message=check.message)
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _properties(cell: CellResult) -> list[tuple[str, object]]:
    found = [("bundle", cell.bundle["path"]), ("device.spec", cell.device["spec"]), ("status", cell.status)]
    found += [(f"ray.node_{k}", v) for k, v in (cell.device.get("node") or {}).items() if v]   # --ray: where it ran
    for key, value in sorted((cell.device.get("facts") or {}).items()):
        if value not in (None, [], ""):
            found.append((f"device.{key}", ",".join(value) if isinstance(value, list) else value))
    if cell.latency:
        summary = cell.latency["summary"]
        found += [(f"latency.{k}_ms", summary[k]) for k in ("median", "p90", "p99", "trimmed_mean")]
        found.append(("latency.cv", summary["cv"]))
    for path, total in ((cell.instruction_counts or {}).get("verdict") or {}).get("totals", {}).items():
        found.append((f"instructions.{path}", total))
    if cell.peak_rss_kb:
        found.append(("peak_rss_kb", cell.peak_rss_kb))
    if cell.output_sha256:
        found.append(("output_sha256", cell.output_sha256))
    return found


def write_junit(result: SuiteResult, path: Path) -> None:
    atomic.write_text(Path(path), junit_xml(result))


def write_report(result: SuiteResult, folder: Path) -> Path:
    """folder/report.md (+ latency.png, result.json), replacing the folder in one rename."""
    folder = Path(folder).absolute()
    with atomic.staging_dir(folder.parent, f".{folder.name}-") as staging:
        plotted = latency_plot(result.cells, staging / PLOT)
        (staging / REPORT).write_text(markdown(result, plotted), encoding="utf-8")
        atomic.write_json(staging / "result.json", result.to_json())
        atomic.publish_dir(staging, folder)
    return folder / REPORT


def _ms(value) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else "–"


def markdown(result: SuiteResult, plotted: bool) -> str:
    source = (result.versions.get("edgekit") or {}).get("source") or {}
    commit = f" (commit {source['commit'][:10]}{', dirty' if source.get('dirty') else ''})" if source.get("commit") else ""
    counts = result.counts()
    lines = [
        "# edgekit device test", "",
        f"{result.created_utc} · edgekit {(result.versions.get('edgekit') or {}).get('version')}{commit} · "
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['error']} errors"
        f"{', %d lost' % counts['lost'] if counts.get('lost') else ''} · exit code {result.exit_code} · "
        f"{result.seconds:.1f} s", "",
        f"Settings: {result.settings['launches']} launches × ({result.settings['warmup']} warm-up + "
        f"{result.settings['iterations']} timed runs), threads {result.settings['threads']}; runtimes "
        + ", ".join(f"{abi} {v}" for abi, v in result.versions.get("runtimes", {}).items()), "",
        "| bundle | device | status | median ms | p90 | p99 | trimmed mean | CV | vs baseline | load ms | peak RSS MiB |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for cell in result.cells:
        latency = cell.latency or {}
        s = latency.get("summary", {})
        rss = f"{cell.peak_rss_kb / 1024:.1f}" if cell.peak_rss_kb else "–"
        cv = f"{s['cv']:.3f}" if s else "–"
        lines.append(f"| {cell.bundle['key']} | {cell.device['id']} | {cell.status} | {_ms(s.get('median'))} | "
                     f"{_ms(s.get('p90'))} | {_ms(s.get('p99'))} | {_ms(s.get('trimmed_mean'))} | {cv} | "
                     f"{latency.get('verdict', {}).get('kind', '–')} | {_ms(latency.get('load_ms_median'))} | {rss} |")
    if plotted:
        lines += ["", f"![latency per launch against the baseline]({PLOT})", "",
                  "Boxes: the timed runs of each launch (grey: the baseline's launches; blue: this run; orange: the "
                  "automatic re-run). Dashed: the baseline median; dotted: the median a regression must exceed."]
    for cell in result.cells:
        lines += ["", f"## {cell.name}", ""]
        facts = (cell.device.get("facts") or {})
        if facts:
            lines.append(f"Device: {facts.get('model') or '?'}; SoC {facts.get('soc') or '?'}; ABI "
                         f"{facts.get('reported_abi')}; {facts.get('os') or '?'}; governor {facts.get('governor') or '?'}; "
                         f"temperature {facts.get('temperature_c') if facts.get('temperature_c') is not None else '?'} °C"
                         + (f"; **emulated**: {facts['emulated']}" if facts.get("emulated") else ""))
            lines.append("")
        node = cell.device.get("node")
        if node:                                     # --ray: the node holding the device
            where = ", ".join(v for v in (node.get("hostname"), node.get("ip")) if v)
            lines += [f"Ran on Ray node {node['id'][:12]} ({where})", ""]
        if cell.error:
            lines += [f"**{cell.status}** in {cell.error['phase']}: {cell.error['message']}",
                      f"(fix: {cell.error['hint']}); this cell has no complete result.", ""]
        lines += ["| check | status | detail |", "|---|---|---|"]
        lines += [f"| {c.name} | {c.status} | {c.message.replace('|', '/')} |" for c in cell.checks]
        if cell.launches:
            lines += ["", "| launch | load ms | first run ms | median ms | min | max | peak RSS MiB | outputs sha256 |",
                      "|---|---:|---:|---:|---:|---:|---:|---|"]
            for launch in cell.launches:
                r = launch["record"]
                runs = sorted(r.get("iteration_ms") or [0.0])
                lines.append(f"| {launch['label']} | {_ms(r.get('load_ms'))} | {_ms(r.get('first_run_ms'))} | "
                             f"{_ms(runs[len(runs) // 2])} | {_ms(runs[0])} | {_ms(runs[-1])} | "
                             f"{(r.get('peak_rss_kb') or 0) / 1024:.1f} | {launch.get('output_sha256', '')[:12]} |")
            notes = sorted({n for launch in cell.launches for n in launch["record"].get("notes") or []})
            lines += ["", *[f"- runner note: {n}" for n in notes]] if notes else []
    return "\n".join(lines) + "\n"


def latency_plot(cells: Sequence[CellResult], path: Path) -> bool:
    """Per-launch distributions of each cell against its baseline; False (no file) when no cell has latency."""
    measured = [c for c in cells if c.latency]
    if not measured:
        return False
    from matplotlib.figure import Figure   # the object API: no pyplot, no GUI backend

    figure = Figure(figsize=(9, 2.8 * len(measured)), layout="constrained")
    for row, cell in enumerate(measured, start=1):
        axes = figure.add_subplot(len(measured), 1, row)
        latency = cell.latency
        base = latency.get("baseline") or {}
        groups = [(f"b{i + 1}", s, "#bbbbbb") for i, s in enumerate(base.get("samples_ms") or [])]
        groups += [(str(i + 1), s, "#4c72b0") for i, s in enumerate(latency["samples_ms"])]
        rerun = (latency.get("rerun") or {}).get("samples_ms", [])
        groups += [(f"r{i + 1}", s, "#dd8452") for i, s in enumerate(rerun)]
        boxes = axes.boxplot([g[1] for g in groups], patch_artist=True, widths=0.6)
        axes.set_xticks(range(1, len(groups) + 1), [g[0] for g in groups])
        for patch, group in zip(boxes["boxes"], groups):
            patch.set_facecolor(group[2])
        verdict = latency["verdict"]
        if verdict.get("baseline_ms") is not None:
            axes.axhline(verdict["baseline_ms"], color="#555555", linestyle="--", linewidth=1)
            if verdict.get("threshold_ms") is not None:
                axes.axhline(verdict["baseline_ms"] + verdict["threshold_ms"], color="#c44e52", linestyle=":",
                             linewidth=1)
        axes.set_ylabel("ms per run")
        axes.set_xlabel("launch (b: baseline, r: re-run)", fontsize=8)
        axes.set_title(f"{cell.name}: {verdict['kind']}" + (" (emulated)" if (cell.device.get("facts") or {})
                                                              .get("emulated") else ""), fontsize=9)
    figure.savefig(path, dpi=100)
    return True

