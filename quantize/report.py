"""The quantisation report: a Markdown file and a PNG of per-layer sensitivity.

`quant_report.md` holds the budget and the verdict, the per-layer table (name,
op type, measured error, int8 or float), what each float layer costs, every
candidate tried with its accuracy (and, when the search counted cost, its instructions
per inference on the build's CPU profile and its ratio to FP32), and the sizes; for detection also mAP@0.5,
mAP@0.5:0.95 and mAP per object size (small/medium/large) of the FP32 reference and
each INT8 candidate, with the layers' and fallback steps' effect in those mAP points; `sensitivity.png` plots the per-layer ranking with the float
layers marked. Both are deterministic for the same search result.
"""

from __future__ import annotations

from pathlib import Path

from edgekit.core.memory import describe_bytes

from .search import QuantSearchResult
from .sensitivity import SENSITIVITY_METHODS

REPORT_NAME = "quant_report.md"
PLOT_NAME = "sensitivity.png"
# detection: the metrics the report breaks INT8's effect into (COCO areas in the truth's pixels: < 32², < 96², beyond)
DETECTION_METRICS = (("map50", "mAP@0.5"), ("map", "mAP@0.5:0.95"), ("map_small", "small"),
                     ("map_medium", "medium"), ("map_large", "large"))


def _num(value: float | None, spec: str = ".4g") -> str:
    return "—" if value is None else format(value, spec)


def _kib(count: int) -> str:
    return f"{count / 1024:.1f} KiB"


def _short_source(source: str) -> str:
    """`/abs/path/model.py, line 24, in forward: x = self.conv(x)` -> `model.py:24 x = self.conv(x)`."""
    if not source:
        return ""
    where, _, code = source.partition(": ")
    parts = [p.strip() for p in where.split(",")]
    name = Path(parts[0]).name if parts else ""
    line = next((p.replace("line ", "") for p in parts if p.startswith("line ")), "")
    text = f"{name}:{line} {code}".strip()
    return text.replace("|", "\\|")[:80]


def breakdown(result: QuantSearchResult) -> tuple[tuple[str, str], ...]:
    """The metrics shown per candidate, layer and fallback step: detection's mAP by IoU and object size, when
    the FP32 reference was scored in them (else none: the primary metric alone says it)."""
    reference = result.reference_metrics or {}
    return DETECTION_METRICS if all(key in reference for key, _ in DETECTION_METRICS) else ()


def _with_drop(score, key: str) -> str:
    """`70.61 (−0.31)`: the candidate's value and its change from the FP32 reference on the same samples."""
    value = (score.metrics or {}).get(key)
    if value is None:
        return "—"
    drop = (score.metric_drops or {}).get(key)
    return f"{value:.2f}" if drop is None else f"{value:.2f} ({0.0 - drop:+.2f})".replace("-", "−")


def _drop(score, key: str) -> str:
    drop = (score.metric_drops or {}).get(key) if score is not None else None
    return "—" if drop is None else f"{drop:.2f}"


def layer_rows(result: QuantSearchResult) -> list[dict]:
    """One row per quantisable layer, in program order, with its measured sensitivity when there is one."""
    measured = {s.layer.index: s for s in result.sensitivity}
    floated = {layer.key for layer in result.float_layers}
    rows = []
    for layer in result.layers:
        s = measured.get(layer.index)
        rows.append({
            "name": layer.name, "op_type": layer.op_type, "weights": layer.weight_elements,
            "source": _short_source(layer.source), "rank": s.rank if s else None, "value": s.value if s else None,
            "cosine": s.score.cosine if s else None, "task_drop": s.score.task_drop if s else None,
            "changed": s.score.changed if s else None,     # % of samples read unlike FP32
            "precision": ("float" if layer.key in floated or layer.op_type in result.chosen.float_ops
                          else ("int8" if layer.key else "int8 (no skip key)")),
            "metric_drops": dict(s.score.metric_drops or {}) if s else {},
        })
    return rows


def render_markdown(result: QuantSearchResult, nb_bytes: int | None = None, plot_name: str | None = PLOT_NAME) -> str:
    budget = result.budget
    drop = budget.drop(result.chosen.score)
    verdict = "meets the budget" if result.holds else "**misses the budget**"
    method = result.plan.method if result.plan else "alone"
    out = ["# INT8 quantisation report", ""]
    out.append(f"- budget: {budget.describe()} ({budget.metric}), on {result.evaluation_samples} evaluation samples")
    metric = result.metric_name
    if result.reference_task is not None:
        out.append(f"- FP32 reference {metric}: {result.reference_task:.2f} %")
    chosen_task = f", {metric} {result.chosen.score.task:.2f} %" if result.chosen.score.task is not None else ""
    by_type = f" (and every `{'`, `'.join(result.chosen.float_ops)}`)" if result.chosen.float_ops else ""
    out.append(f"- chosen: calibration `{result.chosen.algo}`, {len(result.chosen.skip)} layer(s) kept in float{by_type}; "
               f"drop {drop:.4g}{budget.changed_text(result.chosen.score)}{chosen_task}, cosine "
               f"{result.chosen.score.cosine:.6f}: {verdict}")
    replayed = f"; {result.replays} float list(s) built from a calibration's thresholds" if result.replays else ""
    out.append(f"- calibrations run: {result.calibrations} (the rest came from the cache){replayed}")
    batches = getattr(result.quantized, "calibration_batches", None)
    if batches is not None and batches.lowered:
        out.append(f"- calibration batches: {batches.batch_nums} of {batches.batch_size}, lowered from {batches.asked} "
                   f"for memory (~{describe_bytes(batches.sample_bytes)} a sample, "
                   f"sized against the host's {describe_bytes(batches.memory_bytes or 0)})")
    sizes = result.weight_bytes()
    out.append(f"- quantisable-layer weights as deployed: {_kib(sizes['int8'])} int8 + {_kib(sizes['float'])} float "
               f"(all fp32: {_kib(sizes['all_fp32'])})")
    if nb_bytes is not None:
        out.append(f"- final model.nb: {_kib(nb_bytes)}")
    out.extend(f"- note: {n}" for n in result.notes)
    out.extend(f"- {line}" for line in result.cost_lines())

    shown = breakdown(result)
    if shown:
        out += _detection_table(result, shown)

    out += ["", "## Layers", ""]
    if result.sensitivity:
        by_points = (result.plan is None or result.plan.rank_by == "task") and any(
            s.points is not None for s in result.sensitivity)
        order = (f"ranked by the {metric} points the layer costs, then by that error" if by_points
                 else "ranked by that error")
        if by_points and budget.max_changed is not None:
            order = ("ranked by the results the layer changes from FP32's by that method (`max_changed`: % of samples "
                     "read otherwise, or points for boxes and masks), then by that error")
        out.append(f"Sensitivity by method `{method}`: {SENSITIVITY_METHODS[method][0]}; {order}; rank 1 = most sensitive.")
        if shown:
            out.append("The drops are in mAP points below the FP32 reference on the ranking samples, for the candidate "
                       "the method measured (`alone`: only this layer in int8; `all-but`: only this layer in float; "
                       "`local` scores no candidate, and its cosine is that of the layer's own output).")
    else:
        out.append("Sensitivity was not measured (the whole-model INT8 met the budget); every layer is int8.")
    extra = [label for key, label in shown if key != result.metric_name]
    head = "".join(f" {label} drop |" for label in extra)
    primary = dict(shown).get(metric, metric)
    changed = budget.max_changed is not None     # the measured candidate's results unlike FP32's (`alone`: the points
    #                                              the ranking used; `all-but`: what is left with the layer float)
    head += " changed % |" if changed else ""
    out += ["", f"| # | layer | op | weights | source | rank | sensitivity | cosine | {primary} drop |{head} precision |",
            "|---|---|---|---|---|---|---|---|---|" + "---|" * (len(extra) + changed) + "---|"]
    for i, row in enumerate(layer_rows(result)):
        drops = row["metric_drops"]
        cells = "".join(f" {_num(drops.get(key), '.2f')} |" for key, _ in shown if key != result.metric_name)
        cells += f" {_num(row['changed'], '.2f')} |" if changed else ""
        out.append(f"| {i} | `{row['name']}` | {row['op_type']} | {row['weights']} | {row['source']} | "
                   f"{_num(row['rank'], 'd')} | {_num(row['value'])} | {_num(row['cosine'], '.6f')} | "
                   f"{_num(row['task_drop'], '.2f')} |{cells} {row['precision']} |")

    costs = result.float_costs()
    if costs:
        out += ["", "## What each float layer costs", "",
                "Extra weight bytes over int8, and the drop measured with only that layer put back into int8 "
                "(the fallback's prune pass; — where no such candidate ran: the layer the budget needed last).", "",
                f"| layer | op | weights | extra bytes | drop if int8 | {metric} % if int8 |"
                + (" changed if int8 |" if changed else ""), "|---|---|---|---|---|---|" + ("---|" if changed else "")]
        for cost in costs:
            out.append(f"| `{cost['name']}` | {cost['op_type']} | {cost['weights']} | {cost['extra_bytes']} | "
                       f"{_num(cost['drop_if_int8'])} | {_num(cost['task_if_int8'], '.2f')} |"
                       + (f" {_num(cost['changed_if_int8'])} |" if changed else ""))

    cost = result.cost if result.cost is not None and result.cost.counted else None
    counted = f" instructions ({cost.cpu}) | INT8/FP32 |" if cost else ""
    out += ["", "## Candidates tried", "",
            f"| # | stage | algorithm | float layers | drop | {metric} % | cosine | SNR dB | samples | meets | cached |"
            + counted, "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if cost else "")]
    for i, c in enumerate(result.candidates):
        floats = ", ".join(f"`{k}`" for k in c.skip) if len(c.skip) <= 3 else f"{len(c.skip)} layers"
        floats = ", ".join(x for x in (floats, ", ".join(f"all `{t}`" for t in c.float_ops)) if x)
        tail = ""
        if cost:
            n, fp32 = c.counts.get(cost.cpu), cost.fp32.get(cost.cpu)
            tail = f" {_num(n, ',')} | {_num(n / fp32 if n and fp32 else None, '.3f')} |"
        if c.failed:
            out.append(f"| {i} | {c.purpose} | {c.algo} | {floats or '—'} | failed: {c.error} | — | — | — | — | no | no |"
                       + tail)
            continue
        meets = ("yes" if c.holds else "no") if c.samples == result.evaluation_samples else "—"
        out.append(f"| {i} | {c.purpose} | {c.algo} | {floats or '—'} | {budget.drop(c.score):.4g}"
                   f"{budget.changed_text(c.score)} | "
                   f"{_num(c.score.task, '.2f')} | {c.score.cosine:.6f} | {c.score.snr_db:.1f} | {c.samples} | "
                   f"{meets} | {'yes' if c.reused else 'no'} |" + tail)
    if result.fallback is not None:
        out += ["", "## Fallback steps", ""]
        for step in result.fallback.steps:
            floats = ", ".join(step.skip) or "none"
            buckets = "".join(f", {label} {_with_drop(step.score, key)}" for key, label in shown)
            out.append(f"- {step.phase}: float = {floats}: drop {budget.drop(step.score):.4g}"
                       f"{budget.changed_text(step.score)} "
                       f"({'holds' if step.holds else 'misses'}){buckets}")
    if plot_name and result.sensitivity:
        out += ["", f"![per-layer sensitivity]({plot_name})"]
    return "\n".join(out) + "\n"


def _detection_table(result: QuantSearchResult, shown: tuple[tuple[str, str], ...]) -> list[str]:
    """mAP by IoU range and object size: the FP32 reference, then every candidate scored on all evaluation samples
    (the chosen one marked), each value with its change from FP32 in points."""
    reference = result.reference_metrics or {}
    out = ["", "## mAP by object size", "",
           f"COCO areas in the truth's pixels: small < 32², medium < 96², large beyond (a size without truth scores 0). "
           f"In % on {result.evaluation_samples} evaluation samples; in brackets the change from FP32 in points.", "",
           "| model | " + " | ".join(label for _, label in shown) + " |", "|---|" + "---|" * len(shown)]
    out.append("| FP32 reference | " + " | ".join(_num(reference.get(key), ".2f") for key, _ in shown) + " |")
    for i, c in enumerate(result.candidates):
        if c.samples != result.evaluation_samples or c.purpose == "sensitivity" or c.failed:
            continue
        floats = ", ".join(f"`{k}`" for k in c.skip) if len(c.skip) <= 3 else f"{len(c.skip)} layers"
        name = f"INT8 #{i} {c.purpose} `{c.algo}`" + (f", float {floats}" if floats else "")
        if c is result.chosen:
            name = f"**{name} (chosen)**"
        out.append(f"| {name} | " + " | ".join(_with_drop(c.score, key) for key, _ in shown) + " |")
    return out


def plot_sensitivity(result: QuantSearchResult, path: Path) -> Path | None:
    """A horizontal bar per measured layer (most sensitive on top); float layers in orange. None if unmeasured."""
    if not result.sensitivity:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg   # no pyplot: no global figure state
    from matplotlib.figure import Figure

    method = result.plan.method if result.plan else "alone"
    floated = {layer.key for layer in result.float_layers}
    ordered = list(reversed(result.sensitivity))          # barh draws bottom-up
    values = [s.value for s in ordered]
    positive = [v for v in values if v > 0]
    floor = min(positive) / 10 if positive else 1e-12
    shown = [max(v, floor) for v in values]
    height = 1.2 + 0.32 * len(ordered)
    figure = Figure(figsize=(7.5, height), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    colours = ["#e6550d" if s.layer.key in floated else "#3182bd" for s in ordered]
    axes.barh(range(len(ordered)), shown, color=colours)
    axes.set_yticks(range(len(ordered)))
    axes.set_yticklabels([f"{s.layer.name} ({s.layer.op_type})" for s in ordered], fontsize=8)
    if positive and max(positive) / floor > 100:
        axes.set_xscale("log")
    axes.set_xlabel(SENSITIVITY_METHODS[method][0] + ("" if method == "local" else " (1 - cosine)"))
    axes.set_title(f"INT8 sensitivity per layer ({method}); orange = kept in float", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, format="png", metadata={"Software": None})
    return path


def write_report(result: QuantSearchResult, folder: Path, nb_bytes: int | None = None) -> dict[str, Path]:
    """Write `quant_report.md` (and `sensitivity.png` when layers were measured) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    plot = plot_sensitivity(result, folder / PLOT_NAME)
    if plot is not None:
        written["plot"] = plot
    report = folder / REPORT_NAME
    report.write_text(render_markdown(result, nb_bytes, PLOT_NAME if plot else None), encoding="utf-8")
    written["report"] = report
    return written


__all__ = ["render_markdown", "plot_sensitivity", "write_report", "layer_rows", "breakdown", "DETECTION_METRICS",
           "REPORT_NAME", "PLOT_NAME"]
