"""Calibration data checks: PTQ fails quietly on too little, too uniform or unrepresentative data.

Each check returns a warning with its numbers; the build reports them and goes on (the
parity gates decide whether the result is acceptable).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

MIN_SAMPLES = 32              # below this, activation ranges are estimated from very little
MIN_SPREAD = 0.05             # sample-to-sample std / overall std: below this the samples are nearly alike
MAX_MEAN_SHIFT = 0.5          # |mean_calib - mean_eval| / std_eval, per channel
STD_RATIO = (0.5, 2.0)        # std_calib / std_eval, per channel


def _channels(x: np.ndarray) -> np.ndarray:
    """(samples, channels, rest) view: NCHW channels on axis 1; other ranks one channel."""
    x = np.asarray(x, np.float64)
    if x.ndim >= 3:
        return x.reshape(x.shape[0], x.shape[1], -1)
    return x.reshape(x.shape[0], 1, -1)


def check_calibration(calibration: Mapping[str, np.ndarray], evaluation: Mapping[str, np.ndarray] | None,
                      used: int) -> list[str]:
    warnings = []
    if used < MIN_SAMPLES:
        warnings.append(f"calibration uses {used} samples (< {MIN_SAMPLES}): activation ranges come from very little "
                        "data; a few hundred representative inputs are typical")
    for name, calib in calibration.items():
        if not np.issubdtype(np.asarray(calib).dtype, np.floating) or len(calib) < 2:
            continue
        flat = np.asarray(calib, np.float64).reshape(len(calib), -1)
        overall = float(flat.std())
        between = float(flat.std(axis=0).mean())
        if overall > 0 and between / overall < MIN_SPREAD:
            warnings.append(f"calibration input {name!r}: samples are nearly identical (sample-to-sample spread "
                            f"{between / overall:.3f} of the overall std, < {MIN_SPREAD}); calibrate on varied real inputs")
        unique = len(np.unique(flat.round(6), axis=0))
        if unique < len(flat) * 0.5:
            warnings.append(f"calibration input {name!r}: only {unique} of {len(flat)} samples are distinct")
        if evaluation is None or name not in evaluation:
            continue
        c, e = _channels(calib), _channels(evaluation[name])
        if c.shape[1] != e.shape[1]:
            continue
        c_mean, e_mean = c.mean(axis=(0, 2)), e.mean(axis=(0, 2))
        c_std, e_std = c.std(axis=(0, 2)), e.std(axis=(0, 2))
        safe = np.where(e_std > 0, e_std, 1.0)
        shift = np.abs(c_mean - e_mean) / safe
        ratio = np.where(e_std > 0, c_std / safe, 1.0)
        worst = int(np.argmax(shift))
        if shift[worst] > MAX_MEAN_SHIFT:
            warnings.append(f"calibration input {name!r} channel {worst}: mean {c_mean[worst]:.4g} vs evaluation "
                            f"{e_mean[worst]:.4g} ({shift[worst]:.2f} evaluation std apart, > {MAX_MEAN_SHIFT}): "
                            "the calibration data do not look like the evaluation data (preprocessing differs?)")
        bad = np.flatnonzero((ratio < STD_RATIO[0]) | (ratio > STD_RATIO[1]))
        if bad.size:
            k = int(bad[np.argmax(np.abs(np.log(ratio[bad])))])
            warnings.append(f"calibration input {name!r} channel {k}: std {c_std[k]:.4g} vs evaluation {e_std[k]:.4g} "
                            f"(ratio {ratio[k]:.2f}, outside {STD_RATIO[0]}–{STD_RATIO[1]})")
    return warnings
