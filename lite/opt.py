"""paddle_lite_opt, always in a child process (see `_opt_child`)."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from edgekit.core import proc
from edgekit.model.artifacts import LiteModel, StaticModel, sha256_file
from edgekit.core.errors import ConversionError

from .nbfile import zero_version_padding

log = logging.getLogger(__name__)

CHILD = "edgekit.lite._opt_child"
# Kernel columns that serve every target: host kernels and target-agnostic ones.
ANY_TARGET_COLUMNS = ("kHost", "kAny", "kUnk")


def _call(request: dict, timeout: float, what: str) -> tuple[dict, proc.ProcessRecord]:
    answer = proc.run_child(CHILD, request, timeout=timeout, what=what)
    if not answer.ok:
        raise ConversionError(f"{what} {answer.cause()}: {answer.record.tail(3) or 'no output'}",
                              "run `edgekit inspect` on the exported model to see its ops; report the model with this line")
    return answer.result, answer.record


def opt_version(timeout: float = 120) -> str:
    return _call({"action": "version"}, timeout, "paddle_lite_opt --version")[0]["version"]


def parse_supported_table(text: str, target_column: str) -> set[str]:
    """Parse `print_supported_ops`: an op is usable if it has a kernel for the target or for any target."""
    lines = [line.rstrip("\n") for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if line.strip().startswith("OP_name")), None)
    if header_at is None:
        raise ConversionError("paddle_lite_opt printed no supported-ops table", "check the paddlelite installation")
    header = lines[header_at]
    columns = {}
    for name in header.split()[1:]:
        end = header.index(name) + len(name)
        columns[name] = end
    wanted = [c for c in columns if c == target_column or c in ANY_TARGET_COLUMNS]
    ops = set()
    for line in lines[header_at + 1:]:
        if not line.strip():
            continue
        op = line.split()[0]
        for column in wanted:
            end = columns[column]
            if end <= len(line) and line[end - 1] == "Y":
                ops.add(op)
    return ops


def supported_ops(places: str, timeout: float = 120) -> set[str]:
    _, record = _call({"action": "supported_ops", "places": places}, timeout, f"paddle_lite_opt --print_supported_ops ({places})")
    column = {"arm": "kARM", "x86": "kX86", "opencl": "kOpenCL"}[places]
    return parse_supported_table(record.stdout, column)


def convert(model: StaticModel, places: str, out_file: Path, *, timeout: float, target: str, precision: str,
            rewrites: tuple[dict, ...] = (), fp16: bool = False, weight_quant: str | None = None) -> LiteModel:
    """Optimise `model` into `out_file` (.nb) for opt's `places`."""
    out_prefix = out_file.with_suffix("")
    request = {"action": "convert", "model_file": str(model.model_file), "params_file": str(model.params_file),
               "places": places, "out": str(out_prefix), "fp16": fp16, "weight_quant": weight_quant}
    result, record = _call(request, timeout, f"paddle_lite_opt ({places}, {precision})")
    produced = out_prefix.with_suffix(".nb")
    if not produced.is_file() or produced.stat().st_size == 0:
        raise ConversionError(f"paddle_lite_opt reported success but wrote no {produced.name}: {record.tail(2)}",
                              "run with EDGEKIT_DEBUG=1 and report the model")
    if produced != out_file:
        produced.replace(out_file)
    zero_version_padding(out_file)   # reproducible builds: see nbfile.zero_version_padding
    argv = ("paddle_lite_opt", f"--model_file={model.model_file.name}", f"--param_file={model.params_file.name}",
            f"--valid_targets={places}", "--optimize_out_type=naive_buffer", f"--optimize_out={out_prefix.name}")
    if fp16:
        argv += ("--enable_fp16=true",)
    if weight_quant:
        argv += ("--quant_model=true", f"--quant_type={weight_quant}")
    inputs = {"model_file": sha256_file(model.model_file), "params_file": sha256_file(model.params_file)}
    return LiteModel(out_file, target, precision, result["version"], argv, record.seconds, rewrites,
                     tuple(record.argv), inputs)


def nb_ops(nb_file: Path, timeout: float = 120) -> list[str]:
    """Op types in an optimised `.nb` (any target), via opt's own visualiser."""
    with tempfile.TemporaryDirectory(prefix="edgekit-vis-") as scratch:
        result, _ = _call({"action": "visualize", "nb": str(nb_file), "out_dir": scratch}, timeout, "paddle_lite_opt visualize")
        ops = []
        for block in result.get("blocks", []):
            dot = Path(scratch) / f"{block}.dot"
            if not dot.is_file():
                continue
            for line in dot.read_text(encoding="utf-8", errors="replace").splitlines():
                # op nodes are the records drawn without shape="record"
                if "[label=" in line and 'shape="record"' not in line:
                    ops.append(line.split('label="', 1)[1].split('"', 1)[0])
        return ops
