"""Reading legacy ProgramDesc files: layout detection, feeds, fetches, op listing."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from edgekit.core import limits
from edgekit.core.errors import InputModelError

MODEL_NAMES = ("__model__", "model", "inference.pdmodel", "model.pdmodel")
PARAM_NAMES = ("__params__", "params", "inference.pdiparams", "model.pdiparams")


def is_pir_json(path: Path) -> bool:
    """Paddle 3 saves PIR programs as JSON; the legacy ProgramDesc is binary protobuf.

    Untrusted input: a file that starts like JSON is read within edgekit.limits (MAX_JSON_BYTES before a byte is
    parsed, MAX_JSON_DEPTH), and one beyond them is refused (InputModelError) rather than parsed; text that is not
    JSON is simply not a PIR program."""
    if not path.is_file():          # a FIFO would block the open
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(256).lstrip()
    except OSError:
        return False
    if not head.startswith(b"{"):
        return False
    try:
        limits.check(InputModelError, f"{path} in bytes", path.stat().st_size, "MAX_JSON_BYTES")
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    try:
        limits.parse_json(text, str(path), _NotJson, "", finite=False)
    except _NotJson as exc:
        if "MAX_JSON_DEPTH" in exc.message:
            raise InputModelError(exc.message, exc.hint) from None
        return False
    return True


class _NotJson(InputModelError):
    """is_pir_json's private refusal: parse failures mean "not a PIR program", limits are refused."""


PIR_FILE_HINT = "a PIR program is the inference.json Paddle 3 saved beside inference.pdiparams; check the file"
PIR_HINT = ("build it with `edgekit build -m` (PIR programs are translated through Paddle 3); this reader takes "
            "legacy .pdmodel programs only")


def locate(model: Path, params: Path | None) -> tuple[Path, Path | None, bool]:
    """Find (model file, params file, separate_params) for any layout opt accepts."""
    if not model.exists():
        raise InputModelError(f"model path {model} does not exist", "check the --model path")
    if model.is_dir():
        jsons = sorted(model.glob("*.json"))
        candidates = [model / n for n in MODEL_NAMES if (model / n).is_file()] + sorted(model.glob("*.pdmodel"))
        if not candidates:
            if any(is_pir_json(j) for j in jsons):
                raise InputModelError(f"{model} holds a Paddle 3 PIR program (.json), which paddle_lite_opt cannot read", PIR_HINT)
            raise InputModelError(f"no .pdmodel or __model__ file in {model}", "point --model at an exported inference model")
        model_file = candidates[0]
        if params is None:
            found = [model / n for n in PARAM_NAMES if (model / n).is_file()] + sorted(model.glob("*.pdiparams"))
            if found:
                params = found[0]
            elif model_file.name == "__model__":
                return model_file, None, True          # one file per parameter beside __model__
            elif _has_parameters(model_file):
                raise InputModelError(f"no .pdiparams beside {model_file.name} in {model}",
                                      "pass --params with the parameters file saved with the model")
    else:
        model_file = model
        if model_file.suffix == ".json" or is_pir_json(model_file):
            raise InputModelError(f"{model_file} is a Paddle 3 PIR program, which paddle_lite_opt cannot read", PIR_HINT)
        if params is None:
            params = sibling_params(model_file, _has_parameters)
    if params is not None and not params.is_file():
        raise InputModelError(f"params file {params} does not exist", "pass --params with the .pdiparams file saved with the model")
    return model_file, params, False


def _has_parameters(model_file: Path) -> bool:
    """Does the program declare persistable parameters (so a params file is required)?"""
    program = parse_program(model_file)
    return any(var.persistable and var.name not in ("feed", "fetch") for var in program.list_vars())


def parse_program(model_file: Path):
    """Parse a ProgramDesc; a clear error instead of a protobuf traceback for corrupt files."""
    import paddle

    paddle.enable_static()   # Operator objects can only be built in static mode
    data = model_file.read_bytes()
    if not data:
        raise InputModelError(f"model file {model_file} is empty", "re-export the model")
    try:
        program = paddle.static.Program.parse_from_string(data)
        program.global_block()
    except Exception as exc:  # paddle raises RuntimeError/ValueError/protobuf errors depending on the damage
        raise InputModelError(f"model file {model_file} is not a valid Paddle program ({type(exc).__name__})",
                              "re-export it with paddle.jit.save or paddle.static.save_inference_model") from exc
    return program


def op_types(program) -> tuple[str, ...]:
    return tuple(sorted({op.type for block in program.blocks for op in block.ops} - {"feed", "fetch"}))


def feeds_and_fetches(program) -> tuple[list[tuple[str, tuple[int, ...], str]], list[str]]:
    """Feed (name, shape, dtype) in column order and fetch names, read from the feed/fetch ops."""
    block = program.global_block()
    feeds, fetches = [], []
    for op in block.ops:
        if op.type == "feed":
            name = op.output("Out")[0]
            var = block.var(name)
            feeds.append((op.attr("col"), name, tuple(int(d) for d in var.shape), _dtype_name(var.dtype)))
        elif op.type == "fetch":
            fetches.append((op.attr("col"), op.input("X")[0]))
    return [(n, s, d) for _, n, s, d in sorted(feeds)], [n for _, n in sorted(fetches)]


def _dtype_name(dtype) -> str:
    text = str(dtype).lower()
    for name in ("float32", "int64", "int32", "float16", "uint8", "bool", "float64"):
        if name in text or (name == "float32" and "fp32" in text):
            return name
    return text.replace("paddle.", "").replace("vartype.", "")


# ---------------------------------------------------------------- rewriting a saved program

def strip_fetch_scales(block, fetch_vars: list) -> list:
    """The identity `scale` ops paddle.static.save_inference_model put before each fetch, removed with their outputs
    (saving names its new ones the same, maybe of another type); their inputs fetched."""
    kept = []
    for var in fetch_vars:
        op = next((o for o in block.ops if var.name in o.output_arg_names), None)
        if op is not None and op.type == "scale" and var.name.startswith("save_infer_model/") and op.attr("scale") == 1.0 \
                and op.attr("bias") == 0.0 and not op.input("ScaleTensor"):
            source = block.var(op.input("X")[0])
            block._remove_op(next(i for i, o in enumerate(block.ops) if o is op))
            block._remove_var(var.name)
            kept.append(source)
        else:
            kept.append(var)
    return kept


@contextmanager
def editing(model_file: Path):
    """The inference program at `model_file` (and its parameters) loaded for a rewrite, in a Paddle scope of its
    own, with the identity scales saving put before its fetches removed (`save_edited` saves it, which adds them
    again: one per fetch, not two). Yields (program, feed names, fetch vars, scope, executor)."""
    import paddle

    paddle.enable_static()
    scope, exe = paddle.static.Scope(), paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(scope):
        program, feed_names, fetch_vars = paddle.static.load_inference_model(str(Path(model_file).with_suffix("")), exe)
        yield program, feed_names, strip_fetch_scales(program.global_block(), fetch_vars), scope, exe


def save_edited(program, exe, out_dir: Path, feed_vars: list, fetch_vars: list):
    """`program` (from `editing`, inside it) saved as out_dir/model.pdmodel + .pdiparams with `feed_vars` and
    `fetch_vars`; returns the saved program as parsed back, its feeds and its fetches."""
    import paddle

    out_dir.mkdir(parents=True, exist_ok=True)
    with paddle.utils.unique_name.guard():      # fresh names: the fetches are save_infer_model/scale_<i>.tmp_0 again
        paddle.static.save_inference_model(str(out_dir / "model"), feed_vars, fetch_vars, exe, program=program)
    parsed = parse_program(out_dir / "model.pdmodel")
    feeds, fetches = feeds_and_fetches(parsed)
    return parsed, feeds, fetches


def sibling_params(model_file: Path, has_parameters) -> Path | None:
    """The `.pdiparams` saved beside a program (.pdmodel or PIR .json), None for a program without parameters; a
    program that declares parameters but has no such file is refused."""
    sibling = model_file.with_suffix(".pdiparams")
    if sibling.is_file() or sibling.is_symlink():
        return limits.plain_file(sibling, InputModelError)     # found by name: never through a link (issue 32)
    if has_parameters(model_file):
        raise InputModelError(f"no {sibling.name} beside {model_file.name}",
                              "pass --params with the parameters file saved with the model")
    return None
