"""One pass manager for every model-to-model transform, and the one table of how close a transform must stay.

A pass takes a model and returns a `PassResult`: the new model, what the manifest records about it (`facts`), and
one `SameCheck` (edgekit/model/parity.py: the transformed model against its input on the same samples), or no
check when it changed nothing. `run_passes` applies a list of passes in order and checks after each one, the way
ExecuTorch's `PassResult` and `run_checks_after_each_pass` work: a failed check of a required pass stops the run
with an error naming the pass, its worst output and the passes that ran before it; a failed check of an optional
pass (fold: "used only if it computes the same") drops that pass and the run goes on from its input. Every run
returns the `PassRecord`s, which the build writes into the manifest. A transform whose check can only be measured
where it ran (an export against its dynamic graph, the PIR translation against Paddle 3 on the evaluation data, the
ONNX rewrites in ONNX Runtime) hands that check to `judge`: the same rule and the same error.

The ONNX import itself is judged by its own gate (export/import_gate.py): against ONNX Runtime per output with a
cosine only where the signal stands above float noise, and on the build's data in the task metric, which decides.

The transforms and the check each one answers to (`TRANSFORMS`; tests/unit/test_passes.py holds every one of them
to this list):

    export        dygraph export (paddle.jit) vs the dynamic model               export/dygraph.py
    paddle3-export  a Paddle 3 factory's export vs its dynamic model (Paddle 3)   export/pir.py
    pir-translate the PIR -> ProgramDesc translation vs Paddle 3's inference      export/pir.py
    onnx-import   X2Paddle's program vs ONNX Runtime on the source .onnx          export/onnx_import.py
    simplify      onnx-simplifier's model vs the source (ONNX Runtime)           export/simplify.py
    legalise      ONNX rewrites for X2Paddle, per rewritten node (ONNX Runtime)   export/legalize.py
    width-free    width-free reshape targets at other widths (ONNX Runtime)      export/width_free.py
    engine        paddle.static.Executor vs Paddle Inference (no IR passes)      export/inference.py
    geometry      im_shape/scale_factor written into the graph                   export/geometry.py
    nms           the NMS op kept, or cut with the bundle's NMS reproducing it    edgekit/verify/nms.py
    fold          conv affine chains and decomposed activations folded            export/fold.py
    lite-rewrite  the rewrites opt needs (attributes, 0-D constants, ...)         lite/rewrite.py
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

from edgekit.core.errors import EdgekitError, ParityError
from edgekit.core.tables import IMPORT_MAX_ABS, IMPORT_MIN_COSINE
from edgekit.model.parity import SameCheck, SameTolerance, Tolerance

log = logging.getLogger(__name__)

M = TypeVar("M")
Facts = Mapping[str, Any]     # a pass's manifest entry, written as JSON as it is

# How close each transform must stay to its input: max abs within max_abs x max(1, scale) (the output's largest
# |value|, every output's when not per_output, 1 when not scaled) and cosine >= min_cosine when given.
TOLERANCES: Mapping[str, SameTolerance] = {
    "export": SameTolerance(1e-4, scaled=False),
    "paddle3-export": SameTolerance(1e-4, per_output=False),
    "pir-translate": SameTolerance(1e-4, per_output=False),
    "simplify": SameTolerance(1e-5),              # folding reorders float arithmetic only
    "legalise": SameTolerance(1e-5),              # per rewritten node output
    "width-free": SameTolerance(1e-4, scaled=False),   # measured 1.4e-6 on PP-OCRv4 rec at widths 320..1280
    "engine": SameTolerance(1e-4, per_output=False),
    "geometry": SameTolerance(0.0, per_output=False),   # the same values, fed or written into the graph
    "nms": SameTolerance(1e-3, scaled=False),     # boxes (pixels) and scores of one engine's rows against Paddle's
    "fold": SameTolerance(1e-4, 0.99999),
    "lite-rewrite": SameTolerance(1e-6, per_output=False),
}
# The ONNX import is judged against ONNX Runtime per output, max abs relative to the output's largest |value| and a
# cosine floor: [parity] import_max_abs / import_min_cosine, whose defaults these are.
IMPORT_TOLERANCE = Tolerance(IMPORT_MAX_ABS, IMPORT_MIN_COSINE)
TRANSFORMS = tuple(TOLERANCES) + ("onnx-import",)


@dataclass(frozen=True)
class PassResult(Generic[M]):
    model: M
    check: SameCheck | None = None     # None: the pass changed nothing
    facts: Facts | None = None

    @property
    def changed(self) -> bool:
        return self.check is not None


@dataclass(frozen=True)
class Pass(Generic[M]):
    name: str                                     # one of TRANSFORMS
    run: Callable[[M], PassResult[M]]
    optional: bool = False                        # a failed check drops the pass instead of failing the run
    error: type[EdgekitError] = None              # what a failed check of a required pass raises (PassCheckError)
    hint: str = "report the model with this message: it cannot be transformed safely"

    def __post_init__(self) -> None:
        if self.name not in TRANSFORMS:
            raise ValueError(f"pass {self.name!r} is not in TRANSFORMS")


@dataclass(frozen=True)
class PassRecord:
    name: str
    changed: bool
    kept: bool                        # False: an optional pass whose check failed, dropped
    check: SameCheck | None
    facts: Facts | None

    def to_json(self) -> dict:
        return {"name": self.name, "changed": self.changed, "kept": self.kept,
                "check": self.check.to_json() if self.check is not None else None}


class PassCheckError(ParityError):
    """A required pass changed what the model computes."""


def failure_text(record_name: str, check: SameCheck, before: Sequence[str]) -> str:
    bad = check.failure
    where = (f" on {bad.output} (max abs {bad.max_abs:.3g}, limit {bad.max_abs_limit:.3g}, cosine {bad.cosine:.8f})"
             if bad is not None else "")
    ran = f"; passes before it: {', '.join(before)}" if before else "; it was the first pass"
    return f"pass {record_name} ({check.what}) changed the outputs{where}{ran}"


def run_passes(model: M, passes: Sequence[Pass[M]]) -> tuple[M, tuple[PassRecord, ...]]:
    """Apply `passes` in order, checking after each; (the final model, one record per pass)."""
    records: list[PassRecord] = []
    for p in passes:
        result = p.run(model)
        check = result.check
        if check is not None and not check.passed:
            before = [r.name for r in records if r.changed and r.kept]
            if not p.optional:
                raise (p.error or PassCheckError)(failure_text(p.name, check, before), p.hint)
            log.warning("%s: building without it", failure_text(p.name, check, before))
            records.append(PassRecord(p.name, True, False, check, result.facts))
            continue
        records.append(PassRecord(p.name, result.changed, True, check, result.facts))
        model = result.model
    return model, tuple(records)


def judge(model: M, name: str, check: SameCheck, *, error: type[EdgekitError] | None = None,
          hint: str = Pass.hint, optional: bool = False) -> PassRecord:
    """The manager's verdict on a transform whose check is measured where it ran (an export against its dynamic
    graph, the PIR translation against Paddle 3 on the evaluation data, an ONNX rewrite in ONNX Runtime): the same
    rule and error as a pass run by `run_passes`."""
    _, (record,) = run_passes(model, [Pass(name, lambda m: PassResult(m, check), optional=optional, error=error,
                                           hint=hint)])
    return record


def flat_check(before: Mapping[str, Any], after: Mapping[str, Any], tolerance: SameTolerance, what: str,
               samples: int) -> SameCheck:
    """`check_same` over outputs gathered as flat arrays (ONNX Runtime's outputs over several draws of other shapes):
    one row per output, `samples` the draws they came from."""
    import numpy as np

    from edgekit.model.parity import check_same

    names = list(before)
    found = check_same([np.asarray(before[n], np.float64).reshape(1, -1) for n in names],
                       [np.asarray(after[n], np.float64).reshape(1, -1) for n in names], names, tolerance, what)
    return SameCheck(found.what, samples, found.outputs)
