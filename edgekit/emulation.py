"""Tier C: the ARM model.nb itself, on Paddle-Lite's ARM kernels under qemu-user, on the host.

Tiers A and B check the FP32 graph on x86 kernels and a simulation of the reduced
precision; neither is the file a phone loads. Here `edgekit-lite-run` (native/, cross
compiled for the target's ABI and linked against the user's Paddle-Lite ARM Linux
runtime of the opt's version) runs model.nb on the evaluation samples under qemu.
Gates: a reduced precision within the same accuracy budget as tier B; FP32 within
tier A's tolerances. The agreement between B and C says how far the simulation can
be trusted. Without a runtime, emulator or cross compiler the report says tier C
did not run and why; with `required` (CI) that is an error.
"""

from __future__ import annotations

from .errors import EdgekitError
from .parity import ParityReport


class EmulationUnavailable(EdgekitError):
    """No ARM runtime, cross compiler or qemu: tier C cannot run on this machine."""

    exit_code = 13


def emulate(rec) -> tuple[ParityReport, dict]:
    settings = rec.cfg.emulation
    if not settings.enabled:
        return _not_run(rec, "skipped on request (--no-emulation / [emulation] enabled = false)")
    if settings.runtime is None:
        error = EmulationUnavailable("no Paddle-Lite ARM Linux runtime is configured",
                                     "set EDGEKIT_LITE_ARM (or --lite-arm, [emulation] runtime) to the folder holding "
                                     "inference_lite_lib.armlinux.armv8 of the opt's version")
        if settings.required:
            raise error
        return _not_run(rec, f"{error.message}: {error.hint}")
    return _not_run(rec, "not wired yet")


def _not_run(rec, reason: str) -> tuple[ParityReport, dict]:
    """The report gets no tier-C checks; `tiers.tier_notes` says why (never a silent pass)."""
    return rec.report, {"ran": False, "reason": reason}
