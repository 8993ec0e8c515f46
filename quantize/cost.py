"""Cost in the INT8 search: counted instructions per candidate, and op types kept float where INT8 costs more.

Without a Coster, accuracy alone chooses among the calibrations and float lists; several usually meet the budget, and
they need not cost the same on the target's kernels. A `Coster` (the build gives one when tier C can run,
edgekit/verify/search_cost.py) converts a candidate for the ARM target and counts one inference's guest
instructions per CPU profile; counts are deterministic, so one sample is the figure. Only candidates that
meet the budget are counted, at most `SearchPlan.cost_candidates` of them (qemu time is the CI's cost), the
accuracy choice first. Among the counted, the fewest instructions on the build's CPU profile wins; a tie keeps
the accuracy order.

Op types whose INT8 kernels cost more than their float ones stay float in added candidates: the profile of the
FP32 model and of the accuracy choice, on the build's CPU profile, gives each op type's own kernel instructions
(`OP_TYPE_KERNELS`: depthwise convs, the transposed conv's col2im); a type INT8 does not make cheaper gets a
candidate that leaves it out of PaddleSlim's `quantizable_op_type`. Such a candidate is scored for accuracy and
counted like the others: the count decides, not the profile's guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence

from edgekit.model.artifacts import StaticModel

from .sensitivity import Budget

# op types an INT8 candidate may leave float by type, and how the profile names their own kernels (edgekit/verify/
# profile.py rows): depthwise convs are their own op kind; a transposed conv is a GEMM (shared with the convs, not
# separable) plus its col2im, which is the part that differs (scalar `col2im<int>` in INT8, measured on PP-OCRv4 det)
OP_TYPE_KERNELS: dict[str, dict] = {
    "depthwise_conv2d": {"kinds": ("depthwise",)},
    "conv2d_transpose": {"functions": r"col2im|conv2dtranspose|conv_transpose|deconv"},
}
NOT_CHEAPER = 1.0        # INT8 kernels of an op type at this share of the float ones or more: try it float


class Coster(Protocol):
    """What the search needs to weigh cost: the build's CPU profile and a count per model."""

    cpu: str             # the CPU profile the build runs on ([emulation] cpu): candidates are compared on it

    def count(self, model: StaticModel, precision: str) -> dict[str, int]:
        """Instructions of one inference of `model` converted for the target, per CPU profile counted."""

    def op_costs(self, int8: StaticModel, fp32: StaticModel, op_types: Sequence[str]) -> dict[str, dict]:
        """{op type: {"int8": n, "fp32": n}}: instructions of each type's own kernels in one inference on `cpu`
        (a profile of each model). Both methods raise an EdgekitError when they cannot measure."""


@dataclass(frozen=True)
class OpTypeCost:
    """One op type's own kernels in one inference on the build's CPU profile, INT8 and FP32 (a profile each)."""

    int8: int
    fp32: int
    tried_float: bool = False     # NOT_CHEAPER: a candidate leaving the type float was tried

    def to_json(self) -> dict[str, int | float | bool | None]:
        return {"int8": self.int8, "fp32": self.fp32, "ratio": round(self.int8 / self.fp32, 4) if self.fp32 else None,
                "tried_float": self.tried_float}


@dataclass(frozen=True)
class CostRecord:
    """What the search's cost step did: counted (with FP32's counts, the chosen one's, how it was chosen and the
    op-type profile) or why not."""

    counted: bool
    reason: str = ""                                       # why not counted
    cpu: str = ""                                          # the build's CPU profile, on which the choice is made
    cap: int = 0                                           # [quantize] cost_candidates
    fp32: Mapping[str, int] = field(default_factory=dict)     # CPU profile -> FP32 instructions per inference
    chosen: Mapping[str, int] = field(default_factory=dict)   # the same for the chosen INT8 candidate
    chosen_by: str = ""                                    # "instructions" (cost changed the choice) or "accuracy"
    accuracy_choice: tuple[str, tuple[str, ...], tuple[str, ...], int] | None = None   # algo, layers, op types, count
    op_types: Mapping[str, OpTypeCost] = field(default_factory=dict)
    op_types_note: str = ""
    not_counted: tuple[str, ...] = ()                      # candidates whose count failed, with the error
    counted_candidates: int = 0
    seconds: float = 0.0

    @property
    def int8_vs_fp32(self) -> dict[str, float]:
        return ratios(self.chosen, self.fp32)

    def to_json(self) -> dict[str, object]:
        if not self.counted:
            return {"counted": False, "reason": self.reason}
        found: dict[str, object] = {
            "counted": True, "cpu": self.cpu, "cap": self.cap, "fp32": dict(self.fp32), "chosen": dict(self.chosen),
            "int8_vs_fp32": self.int8_vs_fp32, "chosen_by": self.chosen_by,
            "counted_candidates": self.counted_candidates, "seconds": self.seconds,
            "op_types": {t: c.to_json() for t, c in self.op_types.items()}}
        if self.accuracy_choice is not None:
            algo, layers, op_types, count = self.accuracy_choice
            found["accuracy_choice"] = {"algo": algo, "float_layers": list(layers), "float_op_types": list(op_types),
                                        "instructions": count}
        if self.op_types_note:
            found["op_types_note"] = self.op_types_note
        if self.not_counted:
            found["not_counted"] = list(self.not_counted)
        return found


def counted_on(candidate, cpu: str) -> int | None:
    return dict(candidate.instructions).get(cpu)


def accuracy_order(candidates: Sequence, budget: Budget) -> list:
    """Candidates as `choose` ranks them: least drop, then least error, then first tried."""
    return [c for _, c in sorted(enumerate(candidates), key=lambda ic: (budget.drop(ic[1].score), ic[1].score.error,
                                                                      ic[0]))]


def cost_pool(candidates: Sequence, budget: Budget, first, cap: int, samples: int, prefer: str = "op-float") -> list:
    """The candidates worth counting: scored on all `samples`, within the budget, one per (algorithm, float layers,
    float op types); `first` (the accuracy choice) leads, then those of purpose `prefer` (the ones the profile asked
    for), then the rest in accuracy order; at most `cap`."""
    seen, pool = set(), []
    holding = accuracy_order([c for c in candidates if not c.failed and c.holds and c.samples == samples], budget)
    ordered = ([first] if first.holds else []) + [c for c in holding if c.purpose == prefer] + holding
    for c in ordered:
        key = (c.algo, frozenset(c.skip), frozenset(c.float_ops))
        if key not in seen:
            seen.add(key)
            pool.append(c)
    return pool[:max(0, cap)]


def cheapest(counted: Sequence, budget: Budget, cpu: str, prefer=None):
    """The candidate within the budget with the fewest instructions on `cpu`; a tie goes to `prefer` (the accuracy
    choice), then to the accuracy order. None when no candidate within the budget was counted on `cpu`."""
    pool = [c for c in counted if c.holds and not c.failed and counted_on(c, cpu) is not None]
    if not pool:
        return None
    ranked = accuracy_order(pool, budget)
    return min(enumerate(ranked), key=lambda ic: (counted_on(ic[1], cpu), ic[1] is not prefer, ic[0]))[1]


def float_op_types(op_costs: Mapping[str, Mapping[str, int]], present: Sequence[str]) -> list[tuple[str, ...]]:
    """The float-op-type candidates the profile asks for: each type in the model whose INT8 kernels execute
    NOT_CHEAPER of its float ones or more, alone, then all of them together when more than one."""
    worse = [t for t in OP_TYPE_KERNELS if t in present and t in op_costs
             and op_costs[t].get("int8", 0) > 0 and op_costs[t]["int8"] >= NOT_CHEAPER * op_costs[t].get("fp32", 0)]
    found = [(t,) for t in worse]
    if len(worse) > 1:
        found.append(tuple(worse))
    return found


def ratios(int8: Mapping[str, int], fp32: Mapping[str, int]) -> dict[str, float]:
    """INT8's instructions over FP32's per CPU profile counted for both: the predicted speed-up's inverse."""
    return {p: round(n / fp32[p], 4) for p, n in int8.items() if fp32.get(p)}


__all__ = ["Coster", "CostRecord", "OpTypeCost", "OP_TYPE_KERNELS", "NOT_CHEAPER", "cost_pool", "cheapest", "float_op_types", "ratios",
           "counted_on", "accuracy_order"]
