"""What to prune and how: `--prune`, `--finetune`, `[prune]` in edgekit.toml -> one frozen `PruneConfig`.

`--prune` takes one of three forms:

    0.3                      remove 30 % of the filters of every prunable conv
    flops:50%  (or :0.5)     remove 50 % of the FLOPs; per-layer ratios are chosen (params:40% likewise)
    features.0=0.5,head=0.2  per-layer ratios, keyed by layer or parameter name
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from edgekit.core.errors import ConfigError

FACTORY_RE = r"[A-Za-z_][\w.]*:[A-Za-z_]\w*"


class Criterion(str, enum.Enum):
    l1_norm = "l1_norm"
    fpgm = "fpgm"


@dataclass(frozen=True)
class CriterionInfo:
    dygraph_pruner: str     # class in paddleslim.dygraph
    static_name: str        # name in paddleslim.prune.criterion.CRITERION
    note: str


CRITERIA: dict[Criterion, CriterionInfo] = {
    Criterion.l1_norm: CriterionInfo("L1NormFilterPruner", "l1_norm", "drop the filters with the smallest mean |w|"),
    Criterion.fpgm: CriterionInfo("FPGMFilterPruner", "geometry_median",
                                  "drop the filters closest to the geometric median (most replaceable)"),
}


class Goal(str, enum.Enum):
    ratio = "ratio"          # one ratio for every prunable layer
    layers = "layers"        # a ratio per named layer
    flops = "flops"          # a FLOPs reduction; ratios chosen
    params = "params"        # a parameter-count reduction; ratios chosen


class Choice(str, enum.Enum):
    uniform = "uniform"          # one ratio for every layer, found by bisection on the measured target
    sensitivity = "sensitivity"  # per-layer ratios from a sensitivity analysis on evaluation samples


@dataclass(frozen=True)
class PruneConfig:
    goal: Goal
    ratio: float = 0.0                            # Goal.ratio: fraction of filters removed per layer
    layers: tuple[tuple[str, float], ...] = ()    # Goal.layers: (layer or parameter name, ratio)
    reduction: float = 0.0                        # Goal.flops / Goal.params: fraction removed
    choose: Choice | None = None                  # None: uniform when fine-tuned, else sensitivity (see choice())
    criterion: Criterion = Criterion.l1_norm
    min_filters: int = 8                          # convs with fewer filters are left alone
    max_ratio: float = 0.8                        # no layer loses more than this when ratios are chosen
    finetune: str | None = None                   # package.module:function(model, epochs)
    epochs: int = 3
    sensitivity_samples: int = 64                 # evaluation samples the sensitivity analysis runs on
    budget: float | None = None                   # allowed metric loss (top-1 points, or cosine x 100)
    cache_dir: Path | None = None                 # where sensitivity results are kept between runs

    @property
    def is_target(self) -> bool:
        return self.goal in (Goal.flops, Goal.params)

    def choice(self, has_data: bool) -> Choice:
        """Fine-tuning recovers a uniform cut well; without it, sensitivity keeps fragile layers wide."""
        if self.choose is not None:
            return self.choose
        return Choice.uniform if self.finetune or not has_data else Choice.sensitivity

    def describe(self) -> str:
        if self.goal is Goal.ratio:
            return f"{self.ratio:g} of the filters of every prunable conv ({self.criterion.value})"
        if self.goal is Goal.layers:
            return "per-layer ratios " + ", ".join(f"{k}={v:g}" for k, v in self.layers) + f" ({self.criterion.value})"
        return f"{self.reduction * 100:g} % fewer {self.goal.value} ({self.criterion.value})"

    def to_json(self) -> dict:
        return {"goal": self.goal.value, "ratio": self.ratio, "layers": dict(self.layers), "reduction": self.reduction,
                "choose": self.choose.value if self.choose else None, "criterion": self.criterion.value,
                "min_filters": self.min_filters,
                "max_ratio": self.max_ratio, "finetune": self.finetune, "epochs": self.epochs,
                "sensitivity_samples": self.sensitivity_samples, "budget": self.budget,
                "cache_dir": str(self.cache_dir) if self.cache_dir else None}


def _fraction(text: Any, what: str, upper: float = 1.0) -> float:
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError as exc:
        raise ConfigError(f"{what} {text!r} is not a number", "write a fraction like 0.3 or a percentage like 30%") from exc
    if not 0.0 < value < upper:
        raise ConfigError(f"{what} {text!r} is outside (0, {upper:g})", "a pruning ratio removes some but not all filters")
    return value


def parse_prune(text: str) -> dict:
    """`--prune` text -> the keys of `[prune]` it stands for."""
    text = text.strip()
    if re.fullmatch(r"[\d.]+%?", text):
        return {"ratio": _fraction(text, "--prune ratio")}
    target = re.fullmatch(r"(flops|params):(.+)", text, re.IGNORECASE)
    if target:
        kind = target.group(1).lower()
        return {"target": kind, "reduction": _fraction(target.group(2), f"--prune {kind} reduction")}
    pairs = [p for p in text.split(",") if p.strip()]
    if pairs and all("=" in p for p in pairs):
        layers = {}
        for pair in pairs:
            name, _, value = pair.partition("=")
            layers[name.strip()] = _fraction(value, f"--prune ratio for {name.strip()!r}")
        return {"layers": layers}
    raise ConfigError(f"--prune {text!r} is not understood",
                      "use a ratio (0.3), a target (flops:50% or params:40%) or per-layer ratios (features.0=0.5,features.4=0.3)")


KNOWN_KEYS = {"ratio", "layers", "target", "reduction", "choose", "criterion", "min_filters", "max_ratio", "finetune",
              "epochs", "sensitivity_samples", "budget", "cache_dir"}


def prune_config(raw: Mapping[str, Any], base: Path | None = None) -> PruneConfig:
    """Validate the merged `[prune]` keys (toml table updated by flags). `base` resolves a relative cache_dir."""
    unknown = set(raw) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"unknown key(s) in [prune]: {', '.join(sorted(unknown))}",
                          f"known keys: {', '.join(sorted(KNOWN_KEYS))}")
    given = [k for k in ("ratio", "layers", "target") if raw.get(k) not in (None, {}, "")]
    if len(given) != 1:
        raise ConfigError(f"[prune] needs exactly one of ratio, layers, target (got {', '.join(given) or 'none'})",
                          "e.g. --prune 0.3, --prune flops:50%, or --prune features.0=0.5")
    fields: dict[str, Any] = {}
    if "ratio" in given:
        fields.update(goal=Goal.ratio, ratio=_fraction(raw["ratio"], "[prune] ratio"))
    elif "layers" in given:
        if not isinstance(raw["layers"], Mapping):
            raise ConfigError("[prune] layers is not a table", 'write layers = { "features.0" = 0.5 }')
        fields.update(goal=Goal.layers, layers=tuple((str(k), _fraction(v, f"[prune] ratio for {k!r}"))
                                                     for k, v in raw["layers"].items()))
    else:
        try:
            goal = Goal(str(raw["target"]).lower())
        except ValueError as exc:
            raise ConfigError(f"[prune] target {raw['target']!r} is unknown", "use flops or params") from exc
        if goal not in (Goal.flops, Goal.params):
            raise ConfigError(f"[prune] target {raw['target']!r} is unknown", "use flops or params")
        if raw.get("reduction") is None:
            raise ConfigError(f"[prune] target = {goal.value!r} needs a reduction", "e.g. reduction = 0.5 (50 % fewer)")
        fields.update(goal=goal, reduction=_fraction(raw["reduction"], "[prune] reduction", 0.95))
    for key, kind in (("choose", Choice), ("criterion", Criterion)):
        if raw.get(key) is not None:
            try:
                fields[key] = kind(str(raw[key]))
            except ValueError as exc:
                raise ConfigError(f"[prune] {key} {raw[key]!r} is unknown",
                                  f"use one of {', '.join(k.value for k in kind)}") from exc
    for key in ("min_filters", "epochs", "sensitivity_samples"):
        if raw.get(key) is not None:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "epochs" else 1):
                sign = "non-negative" if key == "epochs" else "positive"
                raise ConfigError(f"[prune] {key} = {value!r} is not a {sign} integer",
                                  f"write {key} as a whole number")
            fields[key] = value
    if raw.get("max_ratio") is not None:
        fields["max_ratio"] = _fraction(raw["max_ratio"], "[prune] max_ratio")
    if raw.get("budget") is not None:
        budget = raw["budget"]
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget < 0:
            raise ConfigError(f"[prune] budget = {budget!r} is not a non-negative number", "e.g. budget = 1.0 (top-1 points)")
        fields["budget"] = float(budget)
    if raw.get("finetune"):
        if not re.fullmatch(FACTORY_RE, str(raw["finetune"])):
            raise ConfigError(f"fine-tune hook {raw['finetune']!r} is not package.module:function",
                              "e.g. --finetune mypkg.train:finetune (called as finetune(model, epochs))")
        fields["finetune"] = str(raw["finetune"])
    if raw.get("cache_dir"):
        path = Path(str(raw["cache_dir"])).expanduser()
        fields["cache_dir"] = path if path.is_absolute() or base is None else base / path
    return PruneConfig(**fields)


GOAL_KEYS = ("ratio", "layers", "target", "reduction")


def merge_prune(table: Mapping[str, Any] | None, flag: str | None, **flags: Any) -> dict | None:
    """`[prune]` from edgekit.toml overridden by flags; `--prune` replaces the toml's goal as a whole (a toml
    `ratio` and a flag `flops:50%` would otherwise both be set). None when pruning was not asked for."""
    given = {k: v for k, v in flags.items() if v is not None}
    if table is None and flag is None:
        if given:
            raise ConfigError(f"--{next(iter(given)).replace('_', '-')} needs --prune (or a [prune] table)",
                              "add --prune 0.3, --prune flops:50% or per-layer ratios")
        return None
    raw = dict(table or {})
    if flag is not None:
        for key in GOAL_KEYS:
            raw.pop(key, None)
        raw.update(parse_prune(flag))
    raw.update(given)
    return raw
