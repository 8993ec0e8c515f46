"""The pruning report: per layer filters before/after (or why not), and the model's figures by stage."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from edgekit.model import parity

from .errors import PruneError
from .plan import Analysis


@dataclass(frozen=True)
class LayerRow:
    layer: str
    param: str
    filters_before: int
    filters_after: int
    ratio: float            # the ratio asked of its group (0 when not pruned)
    note: str = ""          # "tied with ...", "follows ... (depthwise)", "skipped: ..."


@dataclass
class PruneReport:
    criterion: str
    how: str                                          # how the ratios were chosen
    rows: list[LayerRow] = field(default_factory=list)
    flops: dict[str, float] = field(default_factory=dict)      # "before"/"after": multiply-adds of conv + fc
    params: dict[str, int] = field(default_factory=dict)       # "before"/"after": parameter values
    metric_name: str = ""
    metric: dict[str, float] = field(default_factory=dict)     # "unpruned", "pruned", "fine-tuned", "int8", ...
    nb_bytes: dict[str, int] = field(default_factory=dict)     # "unpruned", "pruned": the .nb size
    nb_parts: dict[str, dict[str, int]] = field(default_factory=dict)   # same keys: {"graph": bytes, "weights": bytes}
    sensitivity: dict | None = None
    checks: list[parity.Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def with_nb(self, key: str, header) -> "PruneReport":
        """The report with one more `.nb` in the size comparison, from its header (`edgekit.lite.read_header`)."""
        return replace(self, nb_bytes={**self.nb_bytes, key: header.file_bytes},
                       nb_parts={**self.nb_parts, key: {"graph": header.program_bytes, "weights": header.params_bytes}})

    def with_metric(self, key: str, value: float) -> "PruneReport":
        return replace(self, metric={**self.metric, key: value})

    @property
    def flops_reduction(self) -> float:
        return 1.0 - self.flops["after"] / self.flops["before"] if self.flops.get("before") else 0.0

    @property
    def params_reduction(self) -> float:
        return 1.0 - self.params["after"] / self.params["before"] if self.params.get("before") else 0.0

    def chosen_ratios(self) -> dict[str, float]:
        return {r.layer: r.ratio for r in self.rows if r.ratio > 0 and not r.note.startswith(("tied", "depthwise"))}

    def lines(self) -> list[str]:
        out = [f"pruning ({self.criterion}): {self.how}"]
        width = max([len(r.layer) for r in self.rows] + [5])
        out.append(f"    {'layer'.ljust(width)}  filters  ratio  note")
        for r in self.rows:
            ratio = f"{r.ratio:.3f}" if r.ratio > 0 else "  -  "
            out.append(f"    {r.layer.ljust(width)}  {r.filters_before:>3} -> {r.filters_after:<3} {ratio}  {r.note}".rstrip())
        if self.flops:
            out.append(f"    FLOPs (conv+fc multiply-adds): {self.flops['before']:,.0f} -> {self.flops['after']:,.0f} "
                       f"(-{self.flops_reduction * 100:.1f} %)")
        if self.params:
            out.append(f"    parameters: {self.params['before']:,} -> {self.params['after']:,} "
                       f"(-{self.params_reduction * 100:.1f} %)")
        if self.nb_bytes:
            out.append("    .nb size: " + ", ".join(
                f"{k} {v / 1024:.1f} KiB" + (f" (graph {self.nb_parts[k]['graph'] / 1024:.1f} + weights "
                                             f"{self.nb_parts[k]['weights'] / 1024:.1f})" if k in self.nb_parts else "")
                for k, v in self.nb_bytes.items()))
        for stage, value in self.metric.items():
            out.append(f"    {self.metric_name} {stage}: {value:.2f}")
        if self.sensitivity:
            s = self.sensitivity
            out.append(f"    sensitivity: {s['samples']} evaluation samples, metric {s['metric']}, "
                       f"{'reused from' if s['cached'] else 'stored in'} {s['cache_file'] or 'no cache'}")
        out.extend(c.line() for c in self.checks)
        out.extend(f"  note: {n}" for n in self.notes)
        return out

    def check_budget(self, budget: float | None) -> None:
        """The final metric (fine-tuned, else pruned) may lose at most `budget` against the unpruned model."""
        final = self.metric.get("fine-tuned", self.metric.get("pruned"))
        if budget is None or final is None or "unpruned" not in self.metric:
            return
        check = parity.Check("prune", f"{self.metric_name} loss vs unpruned", "points", self.metric["unpruned"] - final,
                             budget, False)
        self.checks.append(check)
        if not check.passed:
            error = PruneError(f"the pruned model loses {check.value:.2f} {self.metric_name} points, over the budget of "
                               f"{budget:g}", "lower the target or the ratios, fine-tune longer (--finetune, epochs), "
                               "or raise [prune] budget")
            error.report_lines = self.lines()
            raise error

    def to_json(self) -> dict:
        return {"criterion": self.criterion, "how": self.how, "layers": [asdict(r) for r in self.rows],
                "chosen_ratios": self.chosen_ratios(), "flops": self.flops, "flops_reduction": self.flops_reduction,
                "params": self.params, "params_reduction": self.params_reduction, "metric_name": self.metric_name,
                "metric": self.metric, "nb_bytes": self.nb_bytes, "nb_parts": self.nb_parts, "sensitivity": self.sensitivity,
                "checks": [dict(asdict(c), passed=c.passed) for c in self.checks], "notes": self.notes}


def layer_rows(analysis: Analysis, ratios: dict[str, float], before: dict[str, int], after: dict[str, int]) -> list[LayerRow]:
    """One row per conv in model order; `before`/`after` are measured filter counts by param name."""
    skipped = {s.param: s.reason for s in analysis.skipped}
    rows = []
    for param, conv in analysis.convs.items():
        master = analysis.followers.get(param)
        if param in skipped:
            note, ratio = f"skipped: {skipped[param]}", 0.0
        elif master is not None:
            leader = analysis.convs[master].layer
            note = f"depthwise: follows {leader}" if conv.depthwise else f"tied to {leader} by a residual add: same channels kept"
            ratio = ratios.get(master, 0.0)
        else:
            group = analysis.group_of(param)
            tied = [analysis.convs[t].layer for t in group.tied]
            note = f"master of a tied group with {', '.join(tied)}" if tied else ""
            ratio = ratios.get(param, 0.0)
        rows.append(LayerRow(conv.layer, param, before[param], after.get(param, before[param]), ratio, note))
    return rows
