"""Validation, separate from the transformations: compare outputs, apply gates, report.

Tier A: the FP32 x86 twin `.nb` (Paddle-Lite runtime) against the reference.
Tier B: the INT8 model as PaddleSlim simulates it (fake-quant ops on the host)
against the reference. Paddle-Lite's INT8 kernels run only on ARM, so the real
INT8 `.nb` is checked on devices by replaying the bundle's golden vectors.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np

from .errors import ParityError


def max_abs(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean per-sample cosine similarity (flattened per sample)."""
    a2 = a.reshape(len(a), -1).astype(np.float64) if a.ndim > 1 else a.reshape(1, -1).astype(np.float64)
    b2 = b.reshape(a2.shape).astype(np.float64)
    na, nb = np.linalg.norm(a2, axis=1), np.linalg.norm(b2, axis=1)
    both_zero = (na == 0) & (nb == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(both_zero, 1.0, (a2 * b2).sum(axis=1) / (na * nb))
    return float(np.nanmean(np.where(np.isnan(cos), 0.0, cos)))


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    noise = float(np.sum((reference.astype(np.float64) - test.astype(np.float64)) ** 2))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def top1(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits.reshape(len(logits), -1), axis=1) == labels) * 100.0)


@dataclass(frozen=True)
class Check:
    tier: str          # "A" or "B" (or "export")
    subject: str       # what is compared, e.g. "x86 twin .nb vs reference"
    metric: str        # "max_abs", "cosine", "top1_drop", ...
    value: float
    limit: float
    higher_is_better: bool
    output: str = ""

    @property
    def passed(self) -> bool:
        if not math.isfinite(self.value) and not (self.value == math.inf and self.higher_is_better):
            return False
        return self.value >= self.limit if self.higher_is_better else self.value <= self.limit

    def line(self) -> str:
        mark = "✓" if self.passed else "✗"
        op = "≥" if self.higher_is_better else "≤"
        out = f" [{self.output}]" if self.output else ""
        return f"  {mark} tier {self.tier} {self.subject}{out}: {self.metric} {self.value:.6g} ({op} {self.limit:g})"


@dataclass(frozen=True)
class OutputStats:
    output: str
    max_abs: float
    cosine: float
    snr_db: float


def compare(reference: Sequence[np.ndarray], test: Sequence[np.ndarray], names: Sequence[str]) -> list[OutputStats]:
    if len(reference) != len(test):
        raise ParityError(f"the model under test returns {len(test)} outputs, the reference {len(reference)}",
                          "report the model: opt changed the program's outputs")
    stats = []
    for name, ref, got in zip(names, reference, test):
        if ref.shape != got.shape:
            raise ParityError(f"output {name!r} has shape {list(got.shape)}, the reference {list(ref.shape)}",
                              "report the model: the converted program's output shape differs")
        if not np.isfinite(got).all():
            raise ParityError(f"output {name!r} of the model under test contains NaN or Inf",
                              "check the calibration data and the model's numerics in fp32")
        stats.append(OutputStats(name, max_abs(ref, got), cosine(ref, got), snr_db(ref, got)))
    return stats


@dataclass
class ParityReport:
    checks: list[Check] = field(default_factory=list)
    outputs: dict[str, list[dict]] = field(default_factory=dict)    # tier -> per-output stats
    accuracy: dict[str, float] = field(default_factory=dict)        # engine -> the task's primary metric, %
    metric: str = "top1"                                            # the primary metric's name
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)   # engine -> every task metric
    samples: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def lines(self) -> list[str]:
        out = [f"parity on {self.samples} evaluation samples:"]
        for tier, stats in self.outputs.items():
            for s in stats:
                out.append(f"    tier {tier} [{s['output']}]: max_abs {s['max_abs']:.3g}  cosine {s['cosine']:.8f}  SNR {s['snr_db']:.1f} dB")
        name = "top-1" if self.metric == "top1" else self.metric.replace("_", " ")
        for engine, acc in self.accuracy.items():
            out.append(f"    {name} {engine}: {acc:.2f} %")
        out.extend(c.line() for c in self.checks)
        out.extend(f"  note: {n}" for n in self.notes)
        return out

    def to_json(self) -> dict:
        return {
            "passed": self.passed, "samples": self.samples, "outputs": self.outputs, "accuracy": self.accuracy,
            "metric": self.metric, "metrics": self.metrics,
            "checks": [dict(asdict(c), passed=c.passed) for c in self.checks], "notes": self.notes,
        }

    def raise_if_failed(self) -> None:
        failed = self.failures()
        if failed:
            first = failed[0]
            error = ParityError(
                f"{len(failed)} parity gate(s) failed; first: tier {first.tier} {first.subject} {first.metric} "
                f"{first.value:.4g} vs limit {first.limit:g}",
                "see the table above; loosen the gate in [parity] only if the figure is acceptable, "
                "or try another calibration algorithm (--algo) or more calibration data",
            )
            error.report_lines = self.lines()
            raise error
