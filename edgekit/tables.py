"""The tables that replace if/elif chains: targets and precisions."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Target(str, enum.Enum):
    arm64 = "arm64"
    armv7 = "armv7"
    x86 = "x86"


@dataclass(frozen=True)
class TargetInfo:
    opt_places: str       # what paddle_lite_opt's --valid_targets gets
    abi: str              # the runtime library the app links against
    runs_on_host: bool    # can the x86 wheel's runtime execute this .nb?
    note: str


TARGETS: dict[Target, TargetInfo] = {
    Target.arm64: TargetInfo("arm", "arm64-v8a", False, "64-bit ARM phones and boards (Android arm64-v8a, iOS, Linux aarch64)"),
    # opt emits the same ARM program for both ABIs; the runtime library decides 32/64-bit.
    Target.armv7: TargetInfo("arm", "armeabi-v7a", False, "32-bit ARM (Android armeabi-v7a, Linux armhf boards)"),
    Target.x86: TargetInfo("x86", "x86_64", True, "host twin: runs in the paddlelite wheel for parity checks"),
}


class Precision(str, enum.Enum):
    fp32 = "fp32"
    fp16 = "fp16"
    int8 = "int8"
    int8_weight = "int8-weight"
    int16_weight = "int16-weight"


@dataclass(frozen=True)
class PrecisionInfo:
    needs_calibration: bool
    quantized_for_opt: bool
    tradeoff: str
    opt_fp16: bool = False
    opt_weight_quant: str | None = None     # opt's --quant_type for weight-only quantisation
    arm_only: bool = False


PRECISIONS: dict[Precision, PrecisionInfo] = {
    Precision.fp32: PrecisionInfo(False, False, "float32 weights and compute: the reference accuracy, largest file"),
    Precision.fp16: PrecisionInfo(
        False, False,
        "opt's FP16 for ARMv8.2+ cores (Cortex-A55/A75 and newer); refused with the PyPI paddlelite 2.13rc0, "
        "whose opt ignores --enable_fp16 and writes an FP32 .nb",
        opt_fp16=True, arm_only=True,
    ),
    Precision.int8: PrecisionInfo(
        True, True,
        "full-integer PaddleSlim post-training quantisation: ~1/4 weight size, int8 ARM kernels; "
        "needs calibration data; its kernels run only on ARM, so the host checks a simulation",
        arm_only=True,
    ),
    Precision.int8_weight: PrecisionInfo(
        False, False,
        "opt's weight-only INT8: ~1/4 weight size, no calibration, float compute (no speed-up)",
        opt_weight_quant="QUANT_INT8", arm_only=True,
    ),
    Precision.int16_weight: PrecisionInfo(
        False, False,
        "opt's weight-only INT16: ~1/2 weight size, near-lossless, float compute (no speed-up)",
        opt_weight_quant="QUANT_INT16", arm_only=True,
    ),
}
