"""Paddle 3 sources in: PIR programs (`.json`) and dynamic graphs written for Paddle 3, to a legacy `StaticModel`.

Route (docs/toolchain.md, "Paddle 3"): Paddle 3 describes its own PIR program
(`_paddle3_child.py`), `pir_translate` writes the legacy ProgramDesc with Paddle 2.6's API,
and the result must compute what Paddle 3 computes: the translation is checked against
Paddle 3's own inference of the source `.json`, and that inference is every later tier's
reference. A dynamic graph written for Paddle 3 is exported by Paddle 3 as PIR (its default
and best-supported mode), checked against the dynamic model there, and then takes the same
route.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from edgekit.core import limits
from edgekit.model.artifacts import StaticModel, sha256_file
from edgekit.contracts.settings import InputSpec, ModelConfig
from edgekit.core.errors import ExportError, InputModelError, ParityError
from edgekit.model.data import Samples, run_lines
from edgekit.model.parity import check_same, output_scale

from . import paddle3
from . import program as prog
from .inference import merge_specs
from .pir_translate import translate
from .runner import StaticRunner
from edgekit.model.passes import TOLERANCES, judge

log = logging.getLogger(__name__)

PIR_NAMES = ("inference.json", "model.json")
PIR_FILE_HINT = "pass the inference.json that paddle.jit.save wrote under Paddle 3"


@dataclass(frozen=True)
class PirSource:
    """A PIR program and its parameters, as given."""

    program: Path
    params: Path | None

    def staged(self, folder: Path) -> Path:
        """Copies named `model.json` / `model.pdiparams` (Paddle 3 loads a pair by one prefix); returns the prefix."""
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.program, folder / "model.json")
        if self.params is not None:
            shutil.copyfile(self.params, folder / "model.pdiparams")
        else:
            (folder / "model.pdiparams").write_bytes(b"")
        return folder / "model"


def is_pir_program(path: Path) -> bool:
    """A PIR `.json` (magic `pir`), or a folder holding one and no legacy `.pdmodel`."""
    if path.is_dir():
        if any(path.glob("*.pdmodel")) or (path / "__model__").is_file():
            return False
        return any(prog.is_pir_json(path / n) for n in PIR_NAMES) or any(prog.is_pir_json(j) for j in path.glob("*.json"))
    return path.suffix.lower() == ".json"


def locate(model: Path, params: Path | None) -> PirSource:
    if not model.exists():
        raise InputModelError(f"model path {model} does not exist", "check the --model path")
    if model.is_dir():
        found = [model / n for n in PIR_NAMES if (model / n).is_file()] or sorted(model.glob("*.json"))
        # files found in a folder someone handed over: no link may point the build at a file elsewhere
        programs = [f for f in found if prog.is_pir_json(limits.plain_file(f, InputModelError))]
        if not programs:
            raise InputModelError(f"no PIR program (inference.json) in {model}", "point --model at a Paddle 3 model folder")
        model = programs[0]
    _require_pir(model)
    if params is None:
        params = prog.sibling_params(model, _declares_parameters)
    elif not params.is_file():
        raise InputModelError(f"params file {params} does not exist", "pass --params with the .pdiparams saved with the program")
    return PirSource(model, params)


def _require_pir(path: Path) -> None:
    """Untrusted input: read within the JSON limits (edgekit.limits), and shaped like a PIR program at the top."""
    data = limits.read_json(path, InputModelError, PIR_FILE_HINT, finite=False)
    base = data.get("base_code") if isinstance(data, dict) else None
    magic = base.get("magic") if isinstance(base, dict) else None
    if magic != "pir" or not isinstance(data.get("program"), dict):
        raise InputModelError(f"{path} is JSON but not a PIR program (no base_code.magic = \"pir\")", PIR_FILE_HINT)


def _declares_parameters(path: Path) -> bool:
    return '"#":"p"' in path.read_text(encoding="utf-8").replace(" ", "")


def load_pir(cfg: ModelConfig, out_dir: Path, timeout: float) -> tuple[StaticModel, dict]:
    """Describe the PIR program in Paddle 3, translate it into `out_dir/model.pdmodel` (+ `.pdiparams`)."""
    source = locate(cfg.model_file, cfg.params_file)
    return _translate(paddle3.find(), source, out_dir, cfg.inputs, timeout, origin="pir")


def _translate(p3: paddle3.Paddle3, source: PirSource, out_dir: Path, given: Sequence[InputSpec], timeout: float,
               origin: str) -> tuple[StaticModel, dict]:
    prefix = source.staged(out_dir / "source")
    described = out_dir / "described"
    described.mkdir()
    answer = p3.call("describe", {"prefix": str(prefix), "out_dir": str(described)}, timeout=timeout,
                     what=f"the PIR program {source.program.name}")
    target = out_dir / "model"
    translation = translate(Path(answer["graph"]), Path(answer["params"]), target)
    program = prog.parse_program(target.with_suffix(".pdmodel"))
    feeds, fetches = prog.feeds_and_fetches(program)
    static = StaticModel(target.with_suffix(".pdmodel"), target.with_suffix(".pdiparams"), merge_specs(feeds, tuple(given)),
                         tuple(fetches), origin, prog.op_types(program))
    report = {"source": {"path": str(source.program), "sha256": sha256_file(source.program),
                         "params": str(source.params) if source.params else None,
                         "params_sha256": sha256_file(source.params) if source.params else None},
              "paddle": p3.version, "python": p3.python, "prefix": str(prefix), "pir_ops": answer["ops"],
              "translated_ops": translation["pir_ops"], "legacy_ops": _op_counts(program),
              "control_flow_blocks": _control_flow_blocks(program)}
    return static, report


def _op_counts(program) -> dict[str, int]:
    counts: dict[str, int] = {}
    for block in program.blocks:
        for op in block.ops:
            if op.type not in ("feed", "fetch"):
                counts[op.type] = counts.get(op.type, 0) + 1
    return dict(sorted(counts.items()))


def _control_flow_blocks(program) -> int:
    return len(program.blocks) - 1


def reference(static: StaticModel, report: Mapping, samples: Samples, folder: Path,
              timeout: float) -> tuple[list[np.ndarray], list[np.ndarray], dict]:
    """Paddle 3's own inference of the source program on `samples` (every tier's reference; text lines in width
    groups, `run_lines`), the translated legacy program's outputs on them, and the check that the two agree."""
    p3 = paddle3.Paddle3(report["python"], report["paddle"])
    folder.mkdir(parents=True, exist_ok=True)
    answers: list[dict] = []

    def run(inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        name = f"group{len(answers)}"
        answer = p3.call("run", {"prefix": report["prefix"],
                                 "inputs": str(paddle3.save_inputs(folder / f"{name}-inputs.npz", inputs)),
                                 "outputs": str(folder / f"{name}-outputs.npz")},
                         timeout=timeout + 2.0 * len(next(iter(inputs.values()))), what="the source program's inference")
        answers.append(answer)
        return paddle3.load_outputs(Path(answer["outputs"]))

    theirs = run_lines(run, samples)
    scale = max(1.0, output_scale(theirs))
    engine_max_abs = max(float(a["engine_max_abs"]) for a in answers)
    if not np.isfinite(engine_max_abs) or engine_max_abs > TOLERANCES["pir-translate"].max_abs * scale:
        raise InputModelError(f"Paddle 3's executor and Paddle Inference disagree on the source program by "
                              f"{engine_max_abs:.3g}", "the reference cannot be trusted: report the model")
    ours = run_lines(StaticRunner(static).run, samples)
    check = _translation_check(static, theirs, ours, p3.version, "the source", len(samples))
    check.update(reference_engines=answers[0]["engines"], reference_engines_max_abs=engine_max_abs)
    return theirs, ours, check


def reference_at_cut(cut: StaticModel, report: Mapping, inputs: Mapping[str, np.ndarray], nms_type: str, folder: Path,
                     timeout: float) -> tuple[list[np.ndarray], dict]:
    """The reference of a translated program cut before its NMS op (lite/nms.py `cut`): Paddle 3's own values of the
    boxes [N, M, 4] and scores [N, C, M] the source program's `nms_type` op reads, the scores transposed to [N, M, C]
    as the cut program fetches them, fed `inputs` (the source's feeds, geometry inputs included); and the check that
    the cut translation computes them."""
    p3 = paddle3.Paddle3(report["python"], report["paddle"])
    folder.mkdir(parents=True, exist_ok=True)
    answer = p3.call("run", {"prefix": report["prefix"], "inputs": str(paddle3.save_inputs(folder / "inputs.npz", inputs)),
                             "outputs": str(folder / "outputs.npz"), "inputs_of": f"pd_op.{nms_type}"},
                     timeout=timeout + 2.0 * len(next(iter(inputs.values()))), what=f"the source program up to {nms_type}")
    boxes, scores = paddle3.load_outputs(Path(answer["outputs"]))
    theirs = [boxes, np.ascontiguousarray(np.transpose(scores, (0, 2, 1)))]
    ours = StaticRunner(cut).run({f: inputs[f] for f in cut.feed_names})
    return theirs, _translation_check(cut, theirs, ours, p3.version, f"the source up to its {nms_type} op", len(boxes))


def _translation_check(static: StaticModel, theirs: Sequence[np.ndarray], ours: Sequence[np.ndarray], version: str,
                       where: str, count: int) -> dict:
    """The translated program's outputs against Paddle 3's on the same inputs, judged by the pass manager's table."""
    scale = max(1.0, output_scale(theirs))
    try:
        found = check_same(theirs, ours, static.fetches, TOLERANCES["pir-translate"],
                           f"the translated program (Paddle 2.6) vs Paddle {version} on {where}")
    except ParityError as exc:
        raise InputModelError(f"the translated program does not match Paddle 3 on {where}: {exc.message}",
                              "report the model: a PIR op was translated wrongly") from exc
    judge(static, "pir-translate", found, error=InputModelError, hint="report the model: a PIR op was translated wrongly")
    worst = found.worst_max_abs
    log.info("PIR translation check: legacy program (Paddle 2.6) vs Paddle %s on %s, max abs %.3g", version, where, worst)
    return {"engine": f"legacy program on paddle.static.Executor (Paddle 2.6) vs Paddle {version} on {where} (.json)",
            "max_abs": worst, "limit": TOLERANCES["pir-translate"].max_abs * scale, "samples": int(count)}


def export_paddle3_factory(cfg: ModelConfig, out_dir: Path, samples: Mapping[str, np.ndarray],
                           timeout: float) -> tuple[StaticModel, dict]:
    """A dynamic graph written for Paddle 3: Paddle 3 exports it as PIR and runs it; the PIR program is translated."""
    p3 = paddle3.find()
    exported = out_dir / "paddle3-export"
    exported.mkdir()
    request = {"factory": cfg.factory, "weights": str(cfg.weights) if cfg.weights else None, "cwd": str(Path.cwd()),
               "inputs": [{"name": s.name, "shape": [None if d == -1 else d for d in s.shape], "dtype": s.dtype}
                          for s in cfg.inputs],
               "inputs_npz": str(paddle3.save_inputs(exported / "inputs.npz", samples)),
               "prefix": str(exported / "model"), "outputs": str(exported / "dynamic.npz")}
    answer = p3.call("export", request, timeout=timeout, what=cfg.factory or "the model", cwd=str(Path.cwd()))
    if not answer["pir"]:
        raise ExportError(f"Paddle 3 wrote no PIR program for {cfg.factory} (files: {answer['files']})",
                          "unset FLAGS_enable_pir_api in the environment: edgekit exports Paddle 3 models as PIR")
    dynamic = paddle3.load_outputs(Path(answer["outputs"]))
    static, report = _translate(p3, PirSource(exported / "model.json", exported / "model.pdiparams"), out_dir / "translated",
                                cfg.inputs, timeout, origin="paddle3-dygraph")
    static_outs, _, check = reference(static, report, Samples(dict(samples)), out_dir / "export-check", timeout)
    found = check_same(dynamic, static_outs, [f"output {i}" for i in range(len(dynamic))], TOLERANCES["paddle3-export"],
                       f"Paddle 3's export of {cfg.factory} vs its dynamic graph")
    judge(static, "paddle3-export", found, error=ExportError,
          hint="check for layers that behave differently in eval mode or when traced")
    worst = found.worst_max_abs
    report["export_check"] = {"engine": f"Paddle {p3.version} static (PIR) vs dynamic graph", "max_abs": worst,
                              "samples": check["samples"]}
    report["factory"] = cfg.factory
    return static, report
