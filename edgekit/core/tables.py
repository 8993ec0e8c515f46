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
    emulation: str | None  # the ARM Linux ABI whose runtime runs this .nb under qemu (tier C); None: the host runs it
    note: str


TARGETS: dict[Target, TargetInfo] = {
    Target.arm64: TargetInfo("arm", "arm64-v8a", "aarch64", "64-bit ARM phones and boards (Android arm64-v8a, iOS, Linux aarch64)"),
    # opt emits the same ARM program for both ABIs; the runtime library decides 32/64-bit.
    Target.armv7: TargetInfo("arm", "armeabi-v7a", "armhf", "32-bit ARM (Android armeabi-v7a, Linux armhf boards)"),
    Target.x86: TargetInfo("x86", "x86_64", None, "host twin: runs in the paddlelite wheel for parity checks"),
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
    tradeoff: str
    opt_fp16: bool = False
    opt_weight_quant: str | None = None     # opt's --quant_type for weight-only quantisation
    arm_only: bool = False


PRECISIONS: dict[Precision, PrecisionInfo] = {
    Precision.fp32: PrecisionInfo(False, "float32 weights and compute: the reference accuracy, largest file"),
    Precision.fp16: PrecisionInfo(
        False,
        "opt's FP16 for ARMv8.2+ cores (Cortex-A55/A75 and newer); refused with the PyPI paddlelite 2.13rc0, "
        "whose opt ignores --enable_fp16 and writes an FP32 .nb",
        opt_fp16=True, arm_only=True,
    ),
    Precision.int8: PrecisionInfo(
        True,
        "full-integer PaddleSlim post-training quantisation: ~1/4 weight size, int8 ARM kernels; "
        "needs calibration data; its kernels run only on ARM, so the host checks a simulation",
        arm_only=True,
    ),
    Precision.int8_weight: PrecisionInfo(
        False,
        "opt's weight-only INT8: ~1/4 weight size, no calibration, float compute (no speed-up)",
        opt_weight_quant="QUANT_INT8", arm_only=True,
    ),
    Precision.int16_weight: PrecisionInfo(
        False,
        "opt's weight-only INT16: ~1/2 weight size, near-lossless, float compute (no speed-up)",
        opt_weight_quant="QUANT_INT16", arm_only=True,
    ),
}


@dataclass(frozen=True)
class CpuProfile:
    """What the emulated ARM CPU looks like to Paddle-Lite, which picks its INT8 kernels by the cores it detects."""

    cpu_part: str | None       # the "CPU part" an injected /proc/cpuinfo reports; None: qemu shows the host's x86 one
    qemu_cpu: str | None       # qemu's -cpu model; None: qemu's default
    int8_kernels: str          # what Lite then runs: "neon" (plain NEON INT8) or "dotprod" (ARMv8.2 sdot)
    abis: tuple[str, ...]      # emulation ABIs the profile exists for
    note: str


CPU_PROFILES: dict[str, CpuProfile] = {
    "default": CpuProfile(None, None, "neon", ("aarch64", "armhf"),
                          "qemu's own: Lite sees unknown cores and runs its plain NEON INT8 kernels (Cortex-A53/A72 path)"),
    "a53": CpuProfile("0xd03", "cortex-a53", "neon", ("aarch64",), "Cortex-A53 (ARMv8.0): plain NEON INT8 kernels"),
    "a55": CpuProfile("0xd05", "max", "dotprod", ("aarch64",),
                      "Cortex-A55 (ARMv8.2 dot product): the sdot INT8 kernels of current phones"),
}


# The ONNX import's gate against ONNX Runtime: the defaults of [parity] import_max_abs (relative to each output's
# largest |value|) and import_min_cosine, and of `edgekit import onnx --max-abs/--min-cosine`.
IMPORT_MAX_ABS = 1e-4
IMPORT_MIN_COSINE = 0.9999
