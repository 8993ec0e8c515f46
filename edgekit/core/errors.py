"""One error hierarchy for every stage.

Each error carries a one-line message saying what failed and why, and a `hint`
saying what to do next. The CLI prints `error: <message>` and `  fix: <hint>` and
exits with the error's `exit_code`; tracebacks only with EDGEKIT_DEBUG=1.
"""

from __future__ import annotations


class EdgekitError(Exception):
    """Base class: a failure the user can act on."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message

    def lines(self) -> list[str]:
        """What a command prints on stderr for it: the message, and the fix when there is one."""
        return [f"error: {self.message}"] + ([f"  fix: {self.hint}"] if self.hint else [])


class ConfigError(EdgekitError):
    """Flags, edgekit.toml or environment values that cannot be used."""

    exit_code = 2


class InputModelError(EdgekitError):
    """The model files are missing, corrupt, in the wrong format or mismatched."""

    exit_code = 3


class DataError(EdgekitError):
    """Calibration or evaluation data that cannot be read or used."""

    exit_code = 4


class ExportError(EdgekitError):
    """Exporting the dynamic-graph model to a static program failed."""

    exit_code = 5


class QuantizeError(EdgekitError):
    """Post-training quantisation failed."""

    exit_code = 6


class UnsupportedOpsError(EdgekitError):
    """The program holds ops that Paddle-Lite cannot run on the target."""

    exit_code = 7


class ConversionError(EdgekitError):
    """paddle_lite_opt failed or crashed."""

    exit_code = 8


class ParityError(EdgekitError):
    """A parity gate was violated: the converted model disagrees with the reference."""

    exit_code = 9


class BundleError(EdgekitError):
    """A bundle is missing, incomplete, or its checksums do not verify."""

    exit_code = 10


class PruneError(EdgekitError):
    """Pruning or its fine-tuning failed, or the plan cannot reach what was asked."""

    exit_code = 12


class ToolError(EdgekitError):
    """An external process failed, timed out or died from a signal."""

    exit_code = 11


class EmulationUnavailable(EdgekitError):
    """No ARM runtime, cross compiler, qemu or cmake: ARM code cannot run on this machine (tier C)."""

    exit_code = 13


class DeviceError(EdgekitError):
    """A device of the regression suite cannot be used: unreachable, wrong ABI, disk full, runner killed or failing."""

    exit_code = 14


class VersionLockError(InputModelError):
    """A `.nb` was written by an opt other than the one its manifest (and so the app's runtime) names."""

    exit_code = 3


class SignatureError(EdgekitError):
    """An asset set is unsigned, or not signed by the given key, when a public key says it must be (15 is the device
    suite's latency regression, 17 its instruction-count regression)."""

    exit_code = 16
