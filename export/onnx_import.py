"""Stage `export` for ONNX models: X2Paddle in a child process, checked against ONNX Runtime.

    model.onnx -> (a variable width: computed reshape targets made width-free, width_free.py) -> copy
    with input shapes fixed -> simplified (simplify.py: onnxsim's shape inference and constant folding;
    checked in ONNX Runtime) -> legalised (legalize.py: ops
    X2Paddle lacks rewritten, constant axes inputs in a form X2Paddle's shape inference reads,
    opset > 15 converted down; checked in ONNX Runtime) -> names sanitised -> X2Paddle (child
    process, scratch working directory) -> Paddle inference model -> checked against ONNX
    Runtime running the untouched model.onnx (import_gate.py) -> out_dir/model.pdmodel + .pdiparams

X2Paddle 1.6.0 writes ONNX names into generated Python code as `x2paddle_<name>`
after replacing only ` .*?\\/-:;`; other characters (`@`, `+`, `[`, ...) give a
SyntaxError, and its replacement is not collision-free (`a.b`, `a:b` and `a_b` all
become `x2paddle_a_b`). So every name outside `[A-Za-z0-9_]` is
rewritten here, injectively, before X2Paddle sees the model (docs/toolchain.md).

The check's tolerances are the build's `[parity] import_max_abs` / `import_min_cosine`, judged
as import_gate.py says; here on seeded random inputs (the build judges again on its data).
A model that converts but disagrees with ONNX Runtime raises `InputModelError`,
like `inference.cross_check` does when two engines disagree: the imported model is
then not a reference anything downstream can be checked against, and the user's
way out is on the model side (fixed shapes, another opset, a Paddle export).
Not `ConversionError`: its exit code 8 is documented as "paddle_lite_opt failed".
X2Paddle failures are `ExportError` (exit 5): for ONNX, X2Paddle is the export stage.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from edgekit.core import proc
from edgekit.model.artifacts import StaticModel, sha256_file
from edgekit.model.data import IMPORTED_PREFIX
from edgekit.contracts.settings import InputSpec
from edgekit.core.errors import ConfigError, ExportError, InputModelError, ToolError
from edgekit.model.parity import Tolerance

from . import import_gate, legalize, onnx_nms, onnxrt, simplify
from . import width_free as width_free_mod
from . import program as prog
from edgekit.model.passes import IMPORT_TOLERANCE

log = logging.getLogger(__name__)

CHILD = "edgekit.export._x2paddle_child"
FEED_PREFIX = IMPORTED_PREFIX      # X2Paddle names every variable x2paddle_<onnx name>
CHECK_DRAWS = 2                    # seeded random input sets run through both engines
DYNAMIC_BATCH = 2                  # a dynamic first dimension is probed with 2, to catch baked-in batch sizes
_SAFE_NAME = re.compile(r"[A-Za-z0-9_]+")     # a valid identifier once X2Paddle prefixes it
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_]")
_UNSUPPORTED_OP_LINE = re.compile(r"^=+ (\S+) =+$")
_PRINTED_ERROR = re.compile(r"[A-Za-z_.]*(?:Error|Exception)\b")   # then a ':' later on the line (not `.*:`: quadratic)


# --- loading and inspecting the ONNX model (no Paddle) -------------------------------------------

def load_onnx(path: Path):
    """The ONNX model at `path`, checked; a one-line error for missing, corrupt or empty files."""
    import onnx

    if not path.is_file():
        raise InputModelError(f"ONNX model {path} does not exist", "check the --model path")
    if path.stat().st_size == 0:
        raise InputModelError(f"ONNX model {path} is empty", "re-export it or check the download")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf DecodeError, ...: the file is not usable either way
        raise InputModelError(f"{path} is not a readable ONNX model ({type(exc).__name__}: {_first_line(exc)})",
                              "re-export it (torch.onnx.export / paddle2onnx) or check the download") from exc
    check_external_data(model, path)
    try:
        onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
    except Exception as exc:  # external-data OSError, ...
        raise InputModelError(f"{path} is not a readable ONNX model ({type(exc).__name__}: {_first_line(exc)})",
                              "re-export it (torch.onnx.export / paddle2onnx) or check the download") from exc
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx.checker.ValidationError and C++ checker errors
        raise InputModelError(f"{path} is not a valid ONNX model: {_first_line(exc)}",
                              "re-export it; onnx.checker.check_model(onnx.load(path), full_check=True) shows the details") from exc
    if not model.graph.node or not graph_inputs(model) or not model.graph.output:
        raise InputModelError(f"{path} holds no graph (no nodes, inputs or outputs)", "re-export the model")
    return model


def check_external_data(model, path: Path) -> None:
    """Every tensor stored outside the .onnx must be a file in the model's own folder.

    A location is the model's word for a file to read into model.nb: an absolute path,
    `..` or a link out of the folder (`link.bin -> /some/secret`) would put another
    file's bytes into the bundle. ONNX Runtime reads the same locations, so this runs
    before either engine sees the model.
    """
    import onnx.external_data_helper as external

    folder = path.parent.resolve()
    for tensor in _tensors(model.graph):
        if not external.uses_external_data(tensor):
            continue
        location = external.ExternalDataInfo(tensor).location
        resolved = (folder / location).resolve()
        if (not location or Path(location).is_absolute() or ".." in Path(location).parts or "\\" in location
                or (resolved != folder and folder not in resolved.parents)):
            raise InputModelError(f"{path}: tensor {tensor.name!r} keeps its data at {location!r}, outside the model's "
                                  f"folder {folder}", "keep the external-data files beside the .onnx (no absolute "
                                  "paths, '..' or links out of the folder), or save the model with its weights inside")


def _tensors(graph) -> Iterator:
    """Every TensorProto of a graph: initializers, sparse ones, node attributes, and those of its subgraphs."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
        for sub in _subgraphs(node):
            yield from _tensors(sub)


def graph_inputs(model) -> list:
    """The graph's real inputs: old exporters also list every initializer as a graph input."""
    weights = {init.name for init in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in weights]


def input_shape(value_info) -> tuple[int, ...]:
    """Dims of an input's value info, -1 for symbolic or unknown ones."""
    dims = value_info.type.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in dims)


def fix_input_shapes(model, shapes: Mapping[str, tuple[int, ...]]):
    """A copy of `model` whose named inputs have the given dims (-1 keeps a dim as the model has it)."""
    import onnx

    inputs = {vi.name: vi for vi in graph_inputs(model)}
    unknown = [name for name in shapes if name not in inputs]
    if unknown:
        first = next(iter(inputs.values()))
        raise InputModelError(f"input(s) {', '.join(unknown)} not in the ONNX model; its inputs are {', '.join(inputs)}",
                              f"use the model's ONNX input names in --input (e.g. --input {first.name}:"
                              f"{_spec_text(input_shape(first))}, a size for each ?)")
    for name, given in shapes.items():
        have = input_shape(inputs[name])
        has_shape = inputs[name].type.tensor_type.HasField("shape")
        if has_shape and len(have) != len(given):
            raise InputModelError(f"input {name!r} has rank {len(have)} in the ONNX model ({_shape_text(have)}), "
                                  f"but {list(given)} was given", "give one size per dimension, -1 to keep one dynamic")
        clash = [i for i, (h, g) in enumerate(zip(have, given)) if h > 0 and g > 0 and h != g]
        if clash:
            raise InputModelError(f"input {name!r} has shape {_shape_text(have)} in the ONNX model, but {list(given)} was given",
                                  "only dynamic dimensions can be fixed; keep the model's fixed sizes")
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for vi in fixed.graph.input:
        given = shapes.get(vi.name)
        if given is None:
            continue
        shape = vi.type.tensor_type.shape
        while len(shape.dim) < len(given):   # an input declared without any shape
            shape.dim.add()
        for dim, size in zip(shape.dim, given):
            if size > 0:
                dim.Clear()
                dim.dim_value = size
    return fixed


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


# --- name sanitising ---------------------------------------------------------------------------

def _graph_names(graph) -> Iterator[str]:
    """Every tensor and node name of `graph` and its subgraphs, in graph order."""
    for vi in graph.input:
        yield vi.name
    for init in graph.initializer:
        yield init.name
    for sparse in graph.sparse_initializer:
        yield sparse.values.name
        yield sparse.indices.name
    for node in graph.node:
        yield node.name
        yield from node.input
        yield from node.output
        for sub in _subgraphs(node):
            yield from _graph_names(sub)
    for vi in graph.output:
        yield vi.name
    for vi in graph.value_info:
        yield vi.name


def _subgraphs(node) -> Iterator:
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.g
        yield from attr.graphs


def sanitized_names(names) -> dict[str, str]:
    """original -> sanitised for every name outside [A-Za-z0-9_]; deterministic and injective.

    Unsafe characters become `_`; a result that is already taken (by a name kept as it
    is or by an earlier rewrite) gets the first free `_1`, `_2`, ... suffix. Names that
    are already safe are never changed, so feeds keep their names (`x` -> `x2paddle_x`).
    """
    ordered = list(dict.fromkeys(n for n in names if n))
    taken = {n for n in ordered if _SAFE_NAME.fullmatch(n)}
    mapping: dict[str, str] = {}
    for name in ordered:
        if name in taken:
            continue
        base = _UNSAFE_CHAR.sub("_", name)
        candidate, suffix = base, 0
        while candidate in taken:
            suffix += 1
            candidate = f"{base}_{suffix}"
        taken.add(candidate)
        mapping[name] = candidate
    return mapping


def _rename_graph(graph, mapping: Mapping[str, str]) -> None:
    def new(name: str) -> str:
        return mapping.get(name, name)

    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        vi.name = new(vi.name)
    for init in graph.initializer:
        init.name = new(init.name)
    for sparse in graph.sparse_initializer:
        sparse.values.name = new(sparse.values.name)
        sparse.indices.name = new(sparse.indices.name)
    for annotation in graph.quantization_annotation:
        annotation.tensor_name = new(annotation.tensor_name)
    for node in graph.node:
        node.name = new(node.name)
        node.input[:] = [new(n) for n in node.input]
        node.output[:] = [new(n) for n in node.output]
        for sub in _subgraphs(node):
            _rename_graph(sub, mapping)


def sanitize_names(model):
    """A copy of `model` with every unsafe name rewritten, and the original -> sanitised mapping."""
    import onnx

    mapping = sanitized_names(_graph_names(model.graph))
    clean = onnx.ModelProto()
    clean.CopyFrom(model)
    if mapping:
        _rename_graph(clean.graph, mapping)
    return clean, mapping


# --- conversion --------------------------------------------------------------------------------

def _run_x2paddle(clean_onnx: Path, save_dir: Path, source: Path, timeout: float,
                  dynamic_hint: str) -> tuple[dict, proc.ProcessRecord]:
    request = {"onnx": str(clean_onnx), "save_dir": str(save_dir)}
    # cwd: X2Paddle imports the code it generates from sys.path and may leave files behind
    answer = proc.run_child(CHILD, request, timeout=timeout, cwd=str(save_dir.parent), what="X2Paddle (ONNX -> Paddle)")
    record, result, error = answer.record, answer.result, answer.error
    if answer.ok:
        if not (Path(result["model_file"]).is_file() and Path(result["params_file"]).is_file()):
            raise ExportError(f"X2Paddle reported success on {source.name} but wrote no inference model: {record.tail(2)}",
                              "run with EDGEKIT_DEBUG=1 and report the model with this line")
        return result, record
    raise _x2paddle_failure(source, record, error, dynamic_hint)


def _error_line(record: proc.ProcessRecord) -> str:
    """The last `SomethingError: ...` line X2Paddle or Paddle printed, else the output's tail."""
    for line in reversed((record.stdout + "\n" + record.stderr).splitlines()):
        found = _PRINTED_ERROR.match(line.strip())
        if found and ":" in line.strip()[found.end():]:
            return line.strip()[:300]
    return record.tail(2) or "no output"


def _x2paddle_failure(source: Path, record: proc.ProcessRecord, error: dict | None, dynamic_hint: str) -> ExportError:
    unsupported = sorted({m.group(1) for m in map(_UNSUPPORTED_OP_LINE.match, record.stdout.splitlines()) if m})
    if unsupported:
        return ExportError(f"X2Paddle 1.6.0 cannot convert {source.name}: no translation for ONNX op(s) {', '.join(unsupported)}",
                           "export the model without those ops (another opset or model variant), or export it from Paddle directly")
    if error and error.get("type") == "SyntaxError":
        return ExportError(f"X2Paddle generated Python code that does not compile for {source.name}: {error.get('code_line', '')}",
                           "report the model with this line (edgekit already rewrites names X2Paddle cannot use as identifiers)")
    cause, hint = _measured_cause(error, dynamic_hint)
    if error and error.get("type") != "SystemExit":
        where = f" at {error['where']}" if error.get("where") else ""
        return ExportError(f"X2Paddle failed on {source.name}: {error['type']}: {error['message']}{where}{cause}", hint)
    if record.signal_name:
        return ExportError(f"X2Paddle died from {record.signal_name} while converting {source.name}: "
                           f"{_error_line(record)}{cause}", hint)
    return ExportError(f"X2Paddle stopped without writing a model for {source.name}: {_error_line(record)}{cause}", hint)


def _measured_cause(error: dict | None, dynamic_hint: str) -> tuple[str, str]:
    """What the child measured about the failure (where X2Paddle's shape inference stopped), and the way out."""
    stop = (error or {}).get("shape_inference_stop")
    if stop:
        cause = (f"; measured cause: X2Paddle's shape inference stopped at {stop['op']} node {stop['node']!r} "
                 f"({stop['inputs']} inputs; {stop['error'] or 'no message'} at {stop['where']}), so the dims of "
                 f"the tensors after it were unknown (-1) to X2Paddle")
        hint = (dynamic_hint + "; otherwise " if dynamic_hint else "") + \
            (f"export that {stop['op']} with constant inputs (edgekit rewrites constant Squeeze/Unsqueeze axes and "
             "Split sizes, and folds shapes of fixed dims), or export the model from Paddle directly")
        return cause, hint
    hint = (dynamic_hint + "; otherwise " if dynamic_hint else "") + \
        "run with EDGEKIT_DEBUG=1 to see X2Paddle's output, and report the model with this line, or export it from Paddle directly"
    return "", hint


def _dynamic_hint(fixed_inputs: Mapping[str, tuple[int, ...]]) -> str:
    """Shape-dependent ops (layer_norm, reshape) often fail on dimensions left dynamic past the batch."""
    dynamic = {name: shape for name, shape in fixed_inputs.items() if any(d < 0 for d in shape[1:])}
    if not dynamic:
        return ""
    example = " ".join(f"--input {name}:{_spec_text(shape)}" for name, shape in dynamic.items())
    return f"the model keeps dynamic dimensions: fix them with {example} (a size for each ?)"


def _spec_text(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) if d > 0 else "?" for d in shape)


def _static_model(model_file: Path, params_file: Path, fixed_inputs: Mapping[str, tuple[int, ...]],
                  renamed: Mapping[str, str], output_names: list[str]) -> tuple[StaticModel, dict, dict]:
    program = prog.parse_program(model_file)
    found, fetches = prog.feeds_and_fetches(program)
    by_feed = {name: (shape, dtype) for name, shape, dtype in found}
    feed_map = {}
    for name in fixed_inputs:
        paddle_name = FEED_PREFIX + renamed.get(name, name)
        if paddle_name in by_feed:
            feed_map[name] = paddle_name
        else:   # X2Paddle drops inputs that no node reads
            log.info("ONNX input %r is unused; the Paddle model has no feed for it", name)
    if len(feed_map) != len(found) or len(fetches) != len(output_names):
        raise ExportError(f"X2Paddle's model has feeds {[n for n, _, _ in found]} and {len(fetches)} fetch(es), but the ONNX "
                          f"model has inputs {list(fixed_inputs)} and outputs {output_names}",
                          "report the model: X2Paddle changed the model's interface")
    feeds = tuple(InputSpec(name, shape, dtype) for name, shape, dtype in found)
    fetch_map = dict(zip(output_names, fetches))   # X2Paddle keeps the graph's output order
    return StaticModel(model_file, params_file, feeds, tuple(fetches), "onnx", prog.op_types(program)), feed_map, fetch_map


# --- the check against ONNX Runtime ------------------------------------------------------------

def _probe_inputs(model, fixed_inputs: Mapping[str, tuple[int, ...]], probe_shapes: Mapping[str, tuple[int, ...]],
                  seed: int, layout: str = "NCHW") -> list[dict[str, np.ndarray]]:
    """Seeded N(0, 1) inputs (0/1 for integer ones), CHECK_DRAWS sets; PaddleDetection's im_shape and scale_factor
    beside the image hold the image tensor's own geometry, the values the build writes into the graph."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    unknown = [name for name in probe_shapes if name not in fixed_inputs]
    if unknown:
        raise InputModelError(f"probe shape(s) for {', '.join(unknown)}, which the ONNX model does not have; its inputs "
                              f"are {', '.join(fixed_inputs)}", "use the model's ONNX input names")
    concrete = {}
    for vi in graph_inputs(model):
        have = fixed_inputs[vi.name]
        shape = list(probe_shapes.get(vi.name, have))
        if len(shape) != len(have) or any(h > 0 and s != h for h, s in zip(have, shape)):
            raise InputModelError(f"probe shape {shape} for input {vi.name!r} does not fit its shape {_shape_text(have)}",
                                  "give sizes only where the model's dimensions are dynamic")
        if shape and shape[0] < 0:
            shape[0] = DYNAMIC_BATCH
        if any(d < 0 for d in shape):
            raise ConfigError(f"input {vi.name!r} keeps dynamic dimension(s) {_shape_text(fixed_inputs[vi.name])} and the "
                              f"ONNX Runtime check needs sizes for them",
                              f"fix them with --input {vi.name}:{_spec_text(have)} (a size for each ?), "
                              "or give probe shapes to keep them dynamic")
        concrete[vi.name] = (tuple(shape), helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
    draws = []
    for _ in range(CHECK_DRAWS):
        draw = {}
        for name, (shape, dtype) in concrete.items():
            if np.issubdtype(dtype, np.floating):
                draw[name] = rng.standard_normal(shape).astype(dtype)
            else:
                draw[name] = rng.integers(0, 2, shape).astype(dtype)
        draws.append(_with_geometry(draw, concrete, layout))
    return draws


def _with_geometry(draw: dict[str, np.ndarray], concrete: Mapping[str, tuple], layout: str) -> dict[str, np.ndarray]:
    """`draw` with the geometry inputs (export/geometry.py's rule) holding `geometry_values` of the image tensor
    (`data.with_geometry`, as synthetic and image data get them)."""
    from edgekit.model.data import Samples, with_geometry

    from .geometry import bound_feeds

    specs = [InputSpec(name, shape, np.dtype(dtype).name) for name, (shape, dtype) in concrete.items()]
    names = bound_feeds(specs)
    if not names:
        return draw
    (image,) = [s.name for s in specs if s.name not in names]
    return dict(with_geometry(Samples(draw), names, image, layout).inputs)


def _onnxruntime_outputs(onnx_path: Path, draws: list[dict[str, np.ndarray]]) -> list[list[np.ndarray]]:
    with onnxrt.answers(f"ONNX Runtime cannot run {onnx_path.name} on the probe inputs",
                        "check the model with ONNX Runtime directly; give the input shapes it expects with --input"):
        session = onnxrt.session(onnx_path)
        return [[np.asarray(o) for o in session.run(None, draw)] for draw in draws]


def fixed_batch(model) -> int | None:
    """The batch size an ONNX model's inputs fix (their first dimension), or None when it is dynamic."""
    sizes = {input_shape(vi)[0] for vi in graph_inputs(model) if input_shape(vi)}
    fixed = sorted(d for d in sizes if d > 0)
    return fixed[0] if fixed else None


def baked_batch(model, fixed_inputs: Mapping[str, tuple[int, ...]], probe_shapes: Mapping[str, tuple[int, ...]],
                seed: int) -> str | None:
    """Why a model whose batch dimension is dynamic still computes one sample per run (its reshapes bake batch 1, say),
    or None when it takes a batch. Measured in ONNX Runtime: two seeded samples run as one batch must give two
    samples per output, each what the sample gives alone. None too when other dims lack sizes to probe with."""
    from onnx import helper

    dynamic = [name for name, shape in fixed_inputs.items() if shape and shape[0] < 0]
    if not dynamic:
        return None
    rng = np.random.default_rng(seed)
    draw = {}
    for vi in graph_inputs(model):
        shape = list(probe_shapes.get(vi.name, fixed_inputs[vi.name]))
        shape[0] = DYNAMIC_BATCH
        if any(d < 0 for d in shape[1:]) or len(shape) != len(fixed_inputs[vi.name]):
            return None
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        draw[vi.name] = (rng.standard_normal(shape) if np.issubdtype(dtype, np.floating)
                         else rng.integers(0, 2, shape)).astype(dtype)
    try:   # onnxruntime raises its own Fail/InvalidArgument/RuntimeException types
        session = onnxrt.session(model.SerializeToString())
        alone = [session.run(None, {k: v[i:i + 1] for k, v in draw.items()}) for i in range(DYNAMIC_BATCH)]
    except Exception:
        return None            # not even one sample runs: the import's own check says why
    try:
        together = session.run(None, draw)
    except Exception as exc:
        return f"a batch of {DYNAMIC_BATCH} fails in ONNX Runtime ({_first_line(exc)[:160]})"
    for k, out in enumerate(together):
        out = np.asarray(out)
        parts = [np.asarray(a[k]) for a in alone]
        if out.ndim == 0 or out.shape[0] != DYNAMIC_BATCH or out.shape[1:] != parts[0].shape[1:]:
            return (f"a batch of {DYNAMIC_BATCH} gives output {k} the shape {list(out.shape)}, one sample "
                    f"{list(parts[0].shape)}")
        scale = max(float(np.abs(np.concatenate(parts)).max()), 1e-6)
        if float(np.abs(out - np.concatenate(parts)).max()) > 1e-4 * scale:
            return f"a batch of {DYNAMIC_BATCH} gives output {k} other values than its samples run alone"
    return None


def onnxruntime_run(onnx_path: Path, inputs: Mapping[str, np.ndarray], batch: int | None = None) -> list[np.ndarray]:
    """ONNX Runtime on the source .onnx over every sample of `inputs` (keyed by ONNX input names), in batches of
    `batch`; by default the batch the model's inputs fix, else 8."""
    from edgekit.model.runners import run_batched

    if batch is None:
        batch = fixed_batch(load_onnx(Path(onnx_path))) or 8
    session = onnxrt.session(onnx_path)
    return run_batched(lambda chunk: [np.asarray(o) for o in session.run(None, chunk)], inputs, batch)


def check_against_onnxruntime(model: StaticModel, onnx_path: Path, draws: list[dict[str, np.ndarray]],
                              feed_map: Mapping[str, str], fetch_map: Mapping[str, str],
                              limits: Tolerance = IMPORT_TOLERANCE, probe: str = "random",
                              refuse: bool = True) -> dict:
    """Figures per output: the Paddle model on the static executor vs ONNX Runtime on the source file, judged by
    import_gate (relative to each output's scale; cosine only where the signal stands above float noise).

    `probe` says where `draws` come from (a key of import_gate.PROBES). Raises InputModelError on a miss.
    """
    import onnxruntime as ort

    from .runner import StaticRunner

    expected = _onnxruntime_outputs(onnx_path, draws)
    runner = StaticRunner(model)
    dtypes = {f.name: f.dtype for f in model.feeds}
    got = [runner.run({feed_map[k]: v.astype(dtypes[feed_map[k]]) for k, v in draw.items() if k in feed_map}) for draw in draws]
    refs, outs = [], []
    for i, name in enumerate(fetch_map):
        ref = np.concatenate([np.asarray(e[i]).reshape(1, -1) if np.ndim(e[i]) == 0 else e[i] for e in expected])
        out = np.concatenate([np.asarray(g[i]).reshape(1, -1) if np.ndim(g[i]) == 0 else g[i] for g in got])
        if ref.shape != out.shape:
            if ref.size != out.size:
                raise InputModelError(f"output {name!r} has shape {list(ref.shape[1:])} in ONNX Runtime but "
                                      f"{list(out.shape[1:])} in the Paddle model X2Paddle made",
                                      "fix dynamic dimensions with --input, or export the model from Paddle directly")
            out = out.reshape(ref.shape)   # e.g. a scalar that X2Paddle keeps as shape [1]
        refs.append(ref)
        outs.append(out)
    first = [next(iter(d.values()), np.zeros(1)) for d in draws]
    samples = sum(a.shape[0] if a.ndim else 1 for a in first)
    check = import_gate.compare(refs, outs, list(fetch_map), limits, probe, samples)
    check.update(engine=f"paddle.static.Executor vs ONNX Runtime {ort.__version__} on the source .onnx",
                 seed_draws=len(draws) if probe == "random" else 0,
                 fetches={name: fetch for name, fetch in fetch_map.items()})
    if refuse:
        import_gate.decide(check, None, onnx_path.name)
    elif not check["passed"]:     # the build judges again on its own data (the import-metric stage) and decides there
        check["deferred"] = "missed on this probe; judged again on the build's data by the import-metric stage"
    return check


check_lines = import_gate.check_lines


# --- the stage ---------------------------------------------------------------------------------

TOOLS = ("x2paddle", "onnx", "onnxruntime", "onnxsim")


def _require_tools() -> None:
    from importlib.util import find_spec

    missing = [name for name in TOOLS if find_spec(name) is None]
    if missing:
        raise ToolError(f"ONNX import needs {', '.join(missing)}, which this environment lacks",
                        "install edgekit's pinned set again (./run recreates the venv; pip install -e . inside it)")


def import_onnx(onnx_path: Path, out_dir: Path, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                timeout: float = 600.0, *, probe_shapes: Mapping[str, tuple[int, ...]] | None = None,
                seed: int = 0, limits: Tolerance = IMPORT_TOLERANCE,
                refuse: bool = True, width_free: tuple[str, int, int, tuple[int, int, int]] | None = None,
                layout: str = "NCHW") -> tuple[StaticModel, dict]:
    """Convert `onnx_path` into `out_dir/model.pdmodel` + `model.pdiparams`, checked against ONNX Runtime.

    `input_shapes` (ONNX input name -> dims, -1 keeps a dim dynamic) are written into
    the model before conversion; `probe_shapes` give sizes for the check to dims that
    stay dynamic (a dynamic first dim is probed with 2). `limits` are the check's
    tolerances; with `refuse` False a miss is recorded, not raised (a build with data decides
    on its data). Returns the StaticModel (its `check` holds the ONNX Runtime figures) and
    an import report: source file, tool versions, the legalisation (rewrites, opset
    conversion, their ONNX Runtime check), the X2Paddle command, original -> sanitised
    names, ONNX -> Paddle feed and fetch names, and the check. Nothing is written to
    `out_dir` unless the checks pass. `width_free` = (input, channels, height, (resize width, width_step,
    max_width)) for a variable-width model: its computed reshape targets are made width-free first
    (width_free.py), before the input shapes are fixed. `layout` is the image input's (PaddleDetection's geometry
    inputs are probed with its own geometry). paddle2onnx's multiclass_nms3 pattern is converted up to the NMS op's
    inputs and the op written back into the program (onnx_nms.py).
    """
    _require_tools()
    import onnx

    onnx_path = Path(onnx_path).absolute()
    out_dir = Path(out_dir).absolute()
    source = load_onnx(onnx_path)
    free_report = None
    if width_free is not None:
        name, channels, height, widths = width_free
        free, free_report = width_free_mod.rewrite(source, name, channels, height, widths, onnx_path.name)
        if free_report is not None:
            log.info("made %d reshape target(s) width-free (checked in ONNX Runtime at widths %s, max abs %.3g)",
                     len(free_report["reshapes"]), sorted({w for _, w in free_report["checks"]}), free_report["max_abs"])
            source = free
    fixed = fix_input_shapes(source, dict(input_shapes or {}))
    fixed_inputs = {vi.name: input_shape(vi) for vi in graph_inputs(fixed)}
    baked = baked_batch(fixed, fixed_inputs, dict(probe_shapes or {}), seed)
    if baked is not None:    # every later engine (checks, reference, tiers, calibration) then runs one sample at a time
        log.warning("%s runs one sample at a time: %s", onnx_path.name, baked)
        fixed = fix_input_shapes(fixed, {name: (1,) + tuple(shape[1:]) for name, shape in fixed_inputs.items()
                                         if shape and shape[0] < 0})
        fixed_inputs = {vi.name: input_shape(vi) for vi in graph_inputs(fixed)}
    batch = {"samples_per_run": fixed_batch(fixed),
             "why": f"the batch is dynamic but {baked}" if baked else
             "the model's inputs fix the batch" if fixed_batch(fixed) else "the batch is dynamic"}
    draws = _probe_inputs(fixed, fixed_inputs, dict(probe_shapes or {}), seed, layout)   # shape errors before the slow part
    lift = onnx_nms.find(fixed)
    if lift is not None:
        log.info("%s: paddle2onnx's %s pattern at %s; X2Paddle converts the network up to its inputs and the op is "
                 "written back", onnx_path.name, onnx_nms.OP, lift.node)
    converting = onnx_nms.network(fixed, lift) if lift is not None else fixed
    simplified, simplify_report = simplify.simplify(converting, draws, onnx_path.name)
    legal = legalize.legalise(simplified, onnx_path.name)
    legal_report = legal.report()
    if legal.changed:
        legal_report["check"] = legalize.check_rewrites(simplified, legal, draws)
        log.info("legalised for X2Paddle: %s", ", ".join(f"{r['op']} x{r['nodes']}" for r in legal_report["by_op"]) or
                 f"opset {legal.source_opset} -> {legal.opset}")
    clean, renamed = sanitize_names(legal.model)
    opset = legal.source_opset
    notes = list(legal.notes)
    if renamed:
        log.info("renamed %d ONNX name(s) X2Paddle cannot use as identifiers", len(renamed))

    out_dir.mkdir(parents=True, exist_ok=True)
    # scratch inside out_dir: same filesystem, so the checked files are renamed into place
    with tempfile.TemporaryDirectory(prefix=".x2paddle-", dir=out_dir) as scratch:
        work = Path(scratch)
        onnx.save(clean, str(work / "model.onnx"))
        result, record = _run_x2paddle(work / "model.onnx", work / "paddle", onnx_path, timeout, _dynamic_hint(fixed_inputs))
        converted, feed_map, fetch_map = _static_model(Path(result["model_file"]), Path(result["params_file"]),
                                                       fixed_inputs, renamed, [o.name for o in converting.graph.output])
        judged_on = onnx_path
        if lift is not None:      # ONNX Runtime on the source up to the NMS op's inputs, then the op's rows on all of it
            judged_on = work / "network" / onnx_path.name
            judged_on.parent.mkdir()
            onnx.save(converting, str(judged_on))
        check = check_against_onnxruntime(converted, judged_on, draws, feed_map, fetch_map, limits, refuse=refuse)
        for line in check_lines(check):
            log.info("%s", line)
        nms_report = None
        if lift is not None:
            converted = onnx_nms.append(converted, lift, work / "nms")
            fetch_map = dict(zip((lift.rows, lift.count), converted.fetches))
            nms_report = dict(lift.to_json(), check=onnx_nms.rows_check(fixed, converted, lift, feed_map, draws,
                                                                        onnx_path.name))
            log.info("%s written for %s: rows equal ONNX Runtime's on %d image(s) (%d rows, max abs %.3g)", onnx_nms.OP,
                     lift.node, nms_report["check"]["images"], nms_report["check"]["rows"],
                     nms_report["check"]["max_abs"])
        model_file, params_file = out_dir / "model.pdmodel", out_dir / "model.pdiparams"
        shutil.move(str(converted.model_file), model_file)
        shutil.move(str(converted.params_file), params_file)
        command = record.to_manifest()
        command["argv"] = [arg.replace(str(work), "<scratch>") for arg in command["argv"]]   # same inputs, same manifest

    model = StaticModel(model_file, params_file, converted.feeds, converted.fetches, "onnx", converted.op_types, check=check)
    report = {
        "source": {"path": str(onnx_path), "sha256": sha256_file(onnx_path), "opset": opset,
                   "ir_version": source.ir_version, "producer": f"{source.producer_name} {source.producer_version}".strip()},
        "versions": {"x2paddle": result.get("x2paddle"), "paddle": result.get("paddle"), "onnx": onnx.__version__,
                     "onnxruntime": _version("onnxruntime")},
        "width_free": free_report,
        "simplify": simplify_report,
        "legalise": legal_report,
        "x2paddle": command,
        "input_shapes": {name: list(shape) for name, shape in fixed_inputs.items()},
        "batch": batch,
        "renamed": dict(renamed),
        "feeds": dict(feed_map),
        "fetches": dict(fetch_map),
        "check": check,
        "notes": notes,
    }
    if nms_report is not None:
        report["nms"] = nms_report
    return model, report


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
