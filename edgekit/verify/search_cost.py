"""The INT8 search's cost counter (quantize/cost.py's `Coster`): a candidate converted for the ARM target and one
inference counted under qemu on tier C's kernel paths, and the per-op-type profile on the build's CPU profile.

The conversion is the target stage's (`lite.convert_safe` for ARM), so the chosen candidate's `.nb` is the
bundle's `model.nb` byte for byte and the FP32 one tier C's FP32 reference: with the same count cache folder
(`count_cache`) tier C finds both counts made and counts nothing twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.contracts.settings import EmulationConfig
from edgekit.core.errors import EmulationUnavailable
from edgekit.model.artifacts import StaticModel, sha256_file
from edgekit.quantize.cost import OP_TYPE_KERNELS
from edgekit.verify import counts
from edgekit.verify.emulator import Emulator

log = logging.getLogger(__name__)


def count_cache(cfg, work: Path) -> Path:
    """Where tier C and the search keep instruction counts: the calibration cache's `emulation/` folder, else the
    build's scratch folder (shared by the stages of one build)."""
    return cfg.quant.cache_dir / "emulation" if cfg.quant.cache_dir is not None else work / "counts"


class EmulatedCost:
    """`Coster` on an emulator: counts on `counts.kernel_paths(abi, cpu)` (tier C's paths), profiles on `cpu`."""

    def __init__(self, emulator: Emulator, settings: EmulationConfig, target: str, work: Path,
                 rewrite_samples: Mapping[str, np.ndarray], sample: Mapping[str, np.ndarray], cache: Path,
                 timeout: float) -> None:
        self.emulator, self.settings, self.cpu, self.target = emulator, settings, emulator.cpu, target
        self.work, self.rewrite_samples, self.sample = work, dict(rewrite_samples), dict(sample)
        self.cache, self.timeout = cache, timeout
        self.paths = counts.kernel_paths(emulator.abi, emulator.cpu)
        self._profiler: Emulator | None = None

    def convert(self, model: StaticModel, precision: str) -> Path:
        """`model` as the target stage converts it; one folder per program (its hash), reused."""
        from edgekit import lite

        digest = hashlib.sha256(sha256_file(model.model_file).encode()
                                + (sha256_file(model.params_file).encode() if model.params_file else b"")).hexdigest()
        folder = self.work / f"{precision}-{digest[:16]}"
        nb = folder / "model.nb"
        if nb.is_file():
            return nb
        folder.mkdir(parents=True, exist_ok=True)
        return lite.convert_safe(model, "arm", nb, folder / "rewrite", self.rewrite_samples, timeout=self.timeout,
                                 target=self.target, precision=precision).nb_file

    def count(self, model: StaticModel, precision: str) -> dict[str, int]:
        from edgekit.verify import tiers

        # a kept NMS op gives rows, not per-sample outputs: counted in the runner mode tier C uses
        found = counts.measure(self.emulator, self.convert(model, precision), self.sample, cache_folder=self.cache,
                               profiles=self.paths, rows=tiers.holds_nms(model))
        return {path: c["per_inference"]["total"] for path, c in found["paths"].items()}

    def op_costs(self, int8: StaticModel, fp32: StaticModel, op_types: Sequence[str]) -> dict[str, dict]:
        from edgekit.verify import profile

        if self.emulator.abi != "aarch64":
            raise EmulationUnavailable(f"profiles exist for arm64 only, not {self.emulator.abi}",
                                       "build --target arm64 to let the profile pick op types to keep float")
        if self._profiler is None:         # Lite's unstripped build of the same tag (docs/costs.md)
            root = profile.symbols_runtime(self.settings.runtime)
            self._profiler = Emulator.prepare("aarch64", dataclasses.replace(self.settings, runtime=root, cpu=self.cpu),
                                              self.timeout)
        found = {}
        measured = {precision: profile.measure(self._profiler, self.convert(model, precision), self.sample,
                                               cpu=self.cpu, cache_folder=self.cache)
                    for precision, model in (("int8", int8), ("fp32", fp32))}
        for op_type in op_types:
            found[op_type] = {precision: kernel_instructions(p["functions"], op_type)
                              for precision, p in measured.items()}
            found[op_type]["ratio"] = (round(found[op_type]["int8"] / found[op_type]["fp32"], 4)
                                       if found[op_type]["fp32"] else None)
        log.info("cost: op-type kernels on %s: %s", self.cpu, found)
        return found


def kernel_instructions(functions: Sequence[Mapping], op_type: str) -> int:
    """Instructions of one op type's own kernels in a profile's function rows (quantize/cost.py OP_TYPE_KERNELS)."""
    spec = OP_TYPE_KERNELS[op_type]
    pattern = re.compile(spec["functions"], re.IGNORECASE) if "functions" in spec else None
    return sum(r["total"] for r in functions
               if r["kind"] in spec.get("kinds", ()) or (pattern is not None and pattern.search(r["function"])))
