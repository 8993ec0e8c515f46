"""A program converted the way every `.nb` of a build is: `rewrite.lite_safe` (the rewrites opt needs, the ARM
speed-ups), then paddle_lite_opt, and for ARM one more try with `flatten_contiguous_range` rewritten to reshape2
when opt crashed on a program that holds it.

opt 2.13rc0 crashes on flatten for x86 always (so `lite_safe` rewrites it for x86), and for ARM on some programs:
measured on MobileNetV2 once relu6's threshold is restored, and on the public PP-OCRv5 mobile rec. Every
conversion goes through `convert_safe`: the bundle's `.nb`, the x86 twin, tier C's FP32 reference, the INT8
search's cost counts, the NMS keep probe, and pruning's `.nb` sizes (pruned, unpruned, unpruned INT8). (The search's FP32 count and tier C's FP32 reference of the PP-OCRv5
rec INT8 build died from SIGSEGV when only the target stage retried.)
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping

import numpy as np

from edgekit.core.errors import ConversionError
from edgekit.model.artifacts import LiteModel, StaticModel

from .opt import convert

log = logging.getLogger(__name__)


def convert_safe(model: StaticModel, places: str, out_file: Path, work: Path, samples: Mapping[str, np.ndarray], *,
                 timeout: float, target: str, precision: str, fp16: bool = False,
                 weight_quant: str | None = None) -> LiteModel:
    """`model` rewritten in `work` (each rewrite checked on `samples`) and converted by opt into `out_file`; the
    rewrites that changed it are the result's `rewrites`."""
    from edgekit.model.passes import run_passes

    from .rewrite import flatten_to_reshape, lite_safe, rewrite_pass

    safe, rewrites = lite_safe(model, work, dict(samples), x86=places == "x86")

    def run(program: StaticModel, done: tuple[dict, ...]) -> LiteModel:
        return convert(program, places, out_file, timeout=timeout, target=target, precision=precision,
                       rewrites=done, fp16=fp16, weight_quant=weight_quant)

    try:
        return run(safe, rewrites)
    except ConversionError as first:
        # only a crash (opt died from a signal) is retried: a timeout or a refusal would only fail twice
        crashed_on_flatten = "died from" in first.message and "flatten_contiguous_range" in safe.op_types
        if places == "x86" or not crashed_on_flatten:
            raise
        crashed = first
    retried, done = run_passes(safe, [rewrite_pass("flatten-retry", flatten_to_reshape, work, dict(samples))])
    log.warning("paddle_lite_opt crashed on a program with flatten_contiguous_range for %s: retrying with it "
                "rewritten to reshape2", places)
    try:
        return run(retried, rewrites + tuple(r.facts for r in done if r.changed))
    except ConversionError as again:
        raise again from crashed
