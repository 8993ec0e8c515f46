"""How many samples a run may push through a program at once, given what one sample costs and the memory free.

One rule for every place that batches samples through Paddle on this host (calibration, the reference and
evaluation runs): the largest batch up to the one asked for whose estimated bytes fit `MEMORY_FRACTION` of the
host's memory, never below 1. Which memory depends on whether the batch changes the result. The reference and
evaluation runs give the same outputs in any batch, so they size against MemAvailable, what is free now.
Calibration does not: `mse`/`emd` thresholds are each batch's best, `avg` weighs batches of text lines' width
groups equally, and the batch is part of the calibration cache's keys. Sized against MemAvailable, the same
build could give another INT8 model, and miss every cached calibration and score, when other jobs held memory as
it started (a PP-OCRv5 rec at 0.54 GiB a sample calibrates in batches of 8 with 17.3 GiB or more available, of 4
below that; a rebuild beside other jobs recomputed an hour of cached layer scores). So calibration sizes
against MemTotal (`calibration_bytes`): one answer per machine.

A quarter, because the machine is shared and other builds' memory grows after we read it: a PP-OCRv5 det
calibration in batches of 8 (half of 18.4 GiB available) peaked at 9.3 GiB while MemAvailable fell to 2 GiB under
the other builds. The estimate leaves out what does not grow with the batch (the
program, its weights, the samples: 0.5 GiB there) and was within 10 % of the measured growth. A smaller batch
costs no time: that calibration took 2.1 s a sample in batches of 1, 3.4 s in batches of 2 and 5.9 s in batches
of 4.
"""

from __future__ import annotations

from edgekit.core import executors

MEMORY_FRACTION = 0.25


def available_bytes() -> int | None:
    """The host's MemAvailable in bytes; None where it cannot be read (then nothing is lowered)."""
    mb = executors.available_memory_mb()
    return None if mb is None else mb << 20


def calibration_bytes() -> int | None:
    """The host's MemTotal in bytes, what the calibration batch is sized against (module docstring); None where it
    cannot be read."""
    mb = executors.total_memory_mb()
    return None if mb is None else mb << 20


def fitting_batch(wanted: int, sample_bytes: int, available: int | None, fraction: float = MEMORY_FRACTION,
                  divides: int | None = None) -> int:
    """The largest batch <= `wanted` whose `sample_bytes` each fit `fraction` of `available` bytes, never below 1.
    With `divides`, only a batch that divides it (so the same samples still split into whole batches).
    Unknown memory or cost (None, 0) keeps `wanted`."""
    if wanted <= 1 or not available or sample_bytes <= 0:
        return max(1, wanted)
    budget = int(available * fraction)
    for batch in range(wanted, 1, -1):
        if batch * sample_bytes <= budget and (divides is None or divides % batch == 0):
            return batch
    return 1


def describe_bytes(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.0f} MiB"


__all__ = ["MEMORY_FRACTION", "available_bytes", "calibration_bytes", "fitting_batch", "describe_bytes"]
