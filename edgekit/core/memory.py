"""How many samples a run may push through a program at once, given what one sample costs and the memory free.

One rule for every place that batches samples through Paddle on this host (calibration, the reference and
evaluation runs): the largest batch up to the one asked for whose estimated bytes fit `MEMORY_FRACTION` of the
host's MemAvailable, never below 1. Half, because the estimate leaves out what does not grow with the batch (the
program, its weights, the samples themselves, Paddle's allocator: 0.5 GB for PP-OCRv5 det), it was measured
within 10 % of the real growth, and the machine is shared: another build's memory can grow after we read it.
"""

from __future__ import annotations

from edgekit.core import executors

MEMORY_FRACTION = 0.5


def available_bytes() -> int | None:
    """The host's MemAvailable in bytes; None where it cannot be read (then nothing is lowered)."""
    mb = executors.available_memory_mb()
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
    return f"{count / 2**30:.2f} GB" if count >= 2**30 else f"{count / 2**20:.0f} MB"


__all__ = ["MEMORY_FRACTION", "available_bytes", "fitting_batch", "describe_bytes"]
