"""The pruning plan, as pure logic: which convs may lose filters, by how much, and why not.

PaddleSlim groups coupled convolutions into "collections": a conv whose output
channels are pruned, the batch norms and convs that read those channels, and —
through residual adds — other convs whose outputs are summed with it and so must
keep exactly the same channels. Both the dygraph and the static path describe
those collections as `Group`s and every conv as a `Conv`; everything below works on
those records only, so the unit tests drive it without Paddle.

Ratios are always keyed by the group's master *parameter name* (`conv2d_0.w_0`):
PaddleSlim silently prunes nothing for any other key (docs/toolchain.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from edgekit.core.errors import ConfigError

from edgekit.contracts.prune import Criterion, Goal, PruneConfig
from .errors import PruneError


@dataclass(frozen=True)
class Conv:
    param: str            # the weight's parameter name: what PaddleSlim keys by
    layer: str            # the structured layer name ("features.0"); the parameter name for programs
    filters: int
    groups: int = 1
    in_channels: int = 0  # channels of the conv's input (groups x weight.shape[1])

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.in_channels

    @property
    def grouped(self) -> bool:
        return self.groups > 1 and not self.depthwise


@dataclass(frozen=True)
class Group:
    """One PaddleSlim collection seen from the convs it touches."""

    master: str                              # conv param whose filters are ranked
    tied: tuple[str, ...] = ()               # other convs losing the same output channels (residual adds)
    depthwise: tuple[str, ...] = ()          # depthwise convs whose channels follow
    consumers: tuple[str, ...] = ()          # convs (and fc) losing input channels
    grouped_consumers: tuple[tuple[str, int], ...] = ()   # consumers with groups > 1 that are not depthwise

    @property
    def members(self) -> tuple[str, ...]:
        return (self.master,) + self.tied


@dataclass(frozen=True)
class Skip:
    param: str
    layer: str
    reason: str


@dataclass(frozen=True)
class Analysis:
    convs: Mapping[str, Conv]                # by param name, in model order
    groups: tuple[Group, ...]                # prunable: the masters a ratio may be given for
    skipped: tuple[Skip, ...]
    followers: Mapping[str, str] = field(default_factory=dict)   # param -> master it is pruned with (tied, depthwise)

    def group_of(self, master: str) -> Group:
        return next(g for g in self.groups if g.master == master)

    def aliases(self) -> dict[str, str]:
        """Every name a user may write for a conv -> its parameter name."""
        names: dict[str, str] = {}
        for conv in self.convs.values():
            for alias in (conv.param, conv.layer, f"{conv.layer}.weight"):
                names.setdefault(alias, conv.param)
        return names


def classify(convs: Mapping[str, Conv], collections: Sequence[Group], min_filters: int,
             unreachable: Mapping[str, str] | None = None) -> Analysis:
    """Split PaddleSlim's collections into prunable groups and skipped convs, each with a reason.

    `unreachable` gives, for convs that have no collection at all, the reason PaddleSlim
    reported (an op it cannot follow, a model output, the model input)."""
    unreachable = dict(unreachable or {})
    groups, skipped, followers = [], [], {}
    covered: set[str] = set()

    def skip(param: str, reason: str) -> None:
        if param not in covered:
            covered.add(param)
            skipped.append(Skip(param, convs[param].layer, reason))

    for group in collections:
        if group.master in covered or group.master not in convs:
            continue
        master = convs[group.master]
        reason = None
        if master.depthwise:
            reason = "depthwise convolution: its channels follow the layer that feeds it"
        elif master.grouped:
            reason = f"grouped convolution (groups={master.groups}): removing filters would break its groups"
        elif group.grouped_consumers:
            name, g = group.grouped_consumers[0]
            reason = (f"its output feeds grouped convolution {convs[name].layer if name in convs else name} "
                      f"(groups={g}), whose groups would break")
        elif master.filters < min_filters:
            reason = f"only {master.filters} filters (fewer than {min_filters})"
        if reason is None and any(convs[t].grouped or convs[t].filters != master.filters for t in group.tied if t in convs):
            reason = "tied by a residual add to a grouped conv or a conv of another width"
        if reason is not None:
            skip(group.master, reason)
            for t in group.tied:
                if t in convs:
                    skip(t, f"tied to {master.layer} by a residual add (pruned together or not at all): {reason}")
            for d in group.depthwise:
                if d in convs:
                    skip(d, f"depthwise convolution following {master.layer}, which is not pruned")
            continue
        groups.append(group)
        covered.add(group.master)
        for t in group.tied:
            if t in convs and t not in covered:
                covered.add(t)
                followers[t] = group.master
        for d in group.depthwise:
            if d in convs and d not in covered:
                covered.add(d)
                followers[d] = group.master
    for param, conv in convs.items():
        if param in covered:
            continue
        if conv.depthwise:
            skip(param, "depthwise convolution: its channels follow the layer that feeds it")
        else:
            skip(param, unreachable.get(param, "PaddleSlim found no safe way to prune it (its channels reach a model "
                                                "output or an op it cannot follow)"))
    order = list(convs)
    groups.sort(key=lambda g: order.index(g.master))
    skipped.sort(key=lambda s: order.index(s.param))
    return Analysis(dict(convs), tuple(groups), tuple(skipped), followers)


def kept_filters(filters: int, ratio: float) -> int:
    """PaddleSlim's rule: round(n * ratio) filters go (Python rounding), at least one stays."""
    return filters - min(filters - 1, int(round(filters * ratio)))


def explicit_ratios(cfg: PruneConfig, analysis: Analysis) -> dict[str, float]:
    """Goal.ratio / Goal.layers -> {master param: ratio}, with one-line errors for names that cannot be pruned."""
    if cfg.goal is Goal.ratio:
        return {g.master: cfg.ratio for g in analysis.groups}
    if cfg.goal is not Goal.layers:
        raise ValueError(cfg.goal)   # targets are resolved by search, not here
    aliases = analysis.aliases()
    masters = {g.master for g in analysis.groups}
    reasons = {s.param: s.reason for s in analysis.skipped}
    ratios: dict[str, float] = {}
    for name, ratio in cfg.layers:
        param = aliases.get(name)
        if param is None:
            known = ", ".join(analysis.convs[g.master].layer for g in analysis.groups)
            raise ConfigError(f"--prune names {name!r}, which is not a conv of this model",
                              f"prunable layers: {known or 'none'}")
        if param in reasons:
            raise ConfigError(f"layer {name!r} cannot be pruned: {reasons[param]}", "leave it out of --prune")
        master = param if param in masters else analysis.followers.get(param)
        if master is None or master not in masters:
            raise ConfigError(f"layer {name!r} is not pruned on its own", "name the layer it follows")
        if param not in masters and analysis.convs[param].depthwise:
            raise ConfigError(f"layer {name!r} is depthwise: it follows {analysis.convs[master].layer}",
                              f"give the ratio to {analysis.convs[master].layer}")
        if master in ratios and not math.isclose(ratios[master], ratio):
            raise ConfigError(f"layers {analysis.convs[master].layer} and {name} are tied by a residual add but were given "
                              f"ratios {ratios[master]:g} and {ratio:g}", "give tied layers the same ratio (or name one)")
        ratios[master] = ratio
    return ratios


def verify(analysis: Analysis, ratios: dict[str, float], before: dict[str, int], after: dict[str, int]) -> None:
    """Every conv the plan touches has exactly the filters the plan says; something was removed."""
    wrong = []
    for master, ratio in ratios.items():
        want = kept_filters(before[master], ratio)
        group = analysis.group_of(master)
        for param in group.members + group.depthwise:
            if after.get(param) != want:
                wrong.append(f"{analysis.convs[param].layer}: {before[param]} -> {after.get(param)} filters, expected {want}")
    untouched = [p for p in before if p not in ratios and p not in analysis.followers and after.get(p) != before[p]]
    wrong += [f"{analysis.convs[p].layer} changed although no ratio was given for it" for p in untouched]
    if wrong:
        raise PruneError("PaddleSlim's pruning did not give the planned shapes: " + "; ".join(wrong[:4]),
                         "report the model; prune fewer layers (per-layer ratios) as a workaround")
    if all(after[p] == before[p] for p in before):
        raise PruneError("the plan removes no filter (every ratio rounds to zero filters)",
                         "raise the ratio: a layer with n filters needs a ratio of at least 0.5/n")


def bisect(measure: Callable[[float], float], target: float, high: float, tol: float = 1e-3) -> tuple[float, float]:
    """The smallest x in (0, high] with measure(x) >= target, for a non-decreasing (step) measure."""
    top = measure(high)
    if top < target:
        raise PruneError(f"the reduction cannot reach {target * 100:.1f} %: at most {top * 100:.1f} % with the "
                         "layers that may be pruned", "lower the target, raise [prune] max_ratio, or lower min_filters")
    low, best, best_value = 0.0, high, top
    while high - low > tol:
        mid = (low + high) / 2
        value = measure(mid)
        if value >= target:
            high, best, best_value = mid, mid, value
        else:
            low = mid
    return best, best_value


def ratios_at(curves: Mapping[str, Mapping[float, float]], threshold: float, max_ratio: float) -> dict[str, float]:
    """For each layer the largest ratio whose measured loss stays <= threshold (PaddleSlim's rule:
    linear interpolation between the measured ratios), capped at max_ratio; 0 when even the smallest hurts."""
    ratios = {}
    for name, curve in curves.items():
        points = sorted((float(r), float(l)) for r, l in curve.items())
        chosen = 0.0
        for i in range(len(points) - 1, -1, -1):
            r0, l0 = points[i]
            if l0 <= threshold:
                if i == len(points) - 1:
                    chosen = r0
                else:
                    r1, l1 = points[i + 1]
                    chosen = r0 + (threshold - l0) * (r1 - r0) / (l1 - l0) if l1 != l0 else r0
                break
        else:
            r0, l0 = points[0]      # below the first point: interpolate from (0, 0)
            if l0 > 0 and threshold > 0:
                chosen = r0 * min(1.0, threshold / l0)
        chosen = min(chosen, max_ratio)
        if chosen > 0:
            ratios[name] = chosen
    return ratios


def filter_scores(criterion: Criterion, weights: Sequence[np.ndarray]) -> np.ndarray:
    """Importance of each output filter; for tied convs the sum of each conv's scores normalised by its
    largest, so one branch of a residual add does not decide alone which shared channels go."""
    total = None
    for w in weights:
        flat = np.asarray(w, np.float64).reshape(w.shape[0], -1)
        if criterion is Criterion.l1_norm:
            score = np.abs(flat).mean(axis=1)
        else:   # FPGM: sum of distances to every other filter; small = near the geometric median
            score = np.sqrt(((flat[:, None, :] - flat[None, :, :]) ** 2).sum(-1)).sum(1)
        peak = score.max()
        score = score / peak if peak > 0 else score
        total = score if total is None else total + score
    return total


def pruned_mask(scores: np.ndarray, ratio: float) -> np.ndarray:
    """1 = keep, 0 = prune: the lowest-scoring filters go, with PaddleSlim's count rule (stable order)."""
    n = len(scores)
    drop = n - kept_filters(n, ratio)
    mask = np.ones(n, dtype="int32")
    mask[np.argsort(scores, kind="stable")[:drop]] = 0
    return mask


def predicted_cost(costs: Mapping[str, float], touches: Mapping[str, Mapping[int, str]], filters: Mapping[str, int],
                   ratios: Mapping[str, float], fixed: float = 0.0) -> float:
    """FLOPs or parameter count after pruning, predicted from the unpruned per-parameter costs: a parameter's
    cost scales with the kept fraction of every axis a pruned group cuts (a conv's FLOPs with its output and
    its input channels, an fc's with its inputs). `touches[param][axis]` names the group master cutting it."""
    total = fixed
    for param, cost in costs.items():
        factor = 1.0
        for axis, master in touches.get(param, {}).items():
            if master in ratios:
                factor *= kept_filters(filters[master], ratios[master]) / filters[master]
        total += cost * factor
    return total
