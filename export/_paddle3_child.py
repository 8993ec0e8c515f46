"""Child process run by Paddle 3's interpreter (not edgekit's): reads PIR programs and runs Paddle 3.

edgekit's own environment pins Paddle 2.6 (what PaddleSlim 2.6 and Paddle-Lite 2.13's opt
read); Paddle 3 lives in a second interpreter (`edgekit.export.paddle3`). This file is
started there as a script, so it imports nothing from edgekit: only the standard library,
numpy and paddle. The request (one JSON argument) names the action:

- `describe`: load a PIR program (`<prefix>.json` + `<prefix>.pdiparams`) and write a neutral
  description of it (`graph.json`: feeds, fetches, ops with PIR argument names, value ids,
  shapes, dtypes, attributes and the user source line; nested blocks of control-flow ops)
  plus every parameter (`params.npz`), for `edgekit.export.pir_translate`.
- `run`: Paddle 3's own inference of the PIR program on `inputs.npz` -> `outputs.npz`, with the
  static executor and with Paddle Inference (IR passes off), and how far the two disagree; with `inputs_of`
  (an op name), the executor's values of that op's first two operands instead (an NMS op's boxes and scores).
- `export`: a dynamic-graph model written for Paddle 3 (`package.module:factory`): jit.save as
  PIR (Paddle 3's default), and the dynamic model's outputs on `inputs.npz`.

It answers with the parent's child protocol: one stdout line starting with the request's
`result_mark` (or `error_mark` for a failure it caught) followed by JSON.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback

import numpy as np

SKIP_ATTRS = {"stop_gradient", "op_callstack", "persistable", "struct_name", "place", "op_role", "op_dist_attr",
              "kernel_name", "kernel_key", "is_persistable", "need_clip", "trainable", "is_parameter",
              "is_distributed", "chunk_id"}


def _answer(mark: str, payload: dict) -> None:
    sys.stdout.flush()
    print(mark + json.dumps(payload), flush=True)


def _jsonable(value):
    """PIR attribute values as JSON: scalars, lists, dtypes by name; None for what cannot be written."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    name = getattr(value, "name", None)
    if isinstance(name, str) and type(value).__name__ in ("DataType", "VarType"):
        return {"dtype": name.lower()}
    return {"unwritable": type(value).__name__}


def _dtype(value) -> str:
    text = str(value.dtype).replace("paddle.", "").lower()
    return {"bool": "bool", "float32": "float32", "int64": "int64", "int32": "int32", "float16": "float16",
            "float64": "float64", "uint8": "uint8", "int8": "int8"}.get(text, text)


def _shape(value):
    try:
        return [int(d) for d in value.shape]
    except Exception:  # vector values (builtin.combine) and other non-dense types have no shape
        return None


def _user_frame(op) -> str:
    """The innermost frame of the op's creation stack outside Paddle's own code (empty when not recorded)."""
    try:
        stack = list(op.callstack)
    except Exception:
        return ""
    frames = [line.strip() for line in stack if line.strip().startswith("File ")]
    for line in reversed(frames):
        if "site-packages/paddle" not in line and "/paddle/" not in line and "dy2static" not in line:
            return line.replace("File ", "").replace('"', "")
    return ""


class _Describer:
    def __init__(self):
        self.params: dict[str, str] = {}     # value id -> parameter name

    @staticmethod
    def vid(value) -> str | None:
        return f"v{value.id}" if value.initialized() else None

    def block(self, block) -> list[dict]:
        return [d for d in (self.op(op) for op in block.ops) if d is not None]

    def op(self, op) -> dict | None:
        name = op.name()
        if name == "builtin.parameter":
            self.params[self.vid(op.result(0))] = op.attrs()["parameter_name"]
            return None
        attrs = {k: _jsonable(v) for k, v in op.attrs().items() if k not in SKIP_ATTRS}
        operands = list(op.operands_source())
        results = list(op.results())
        try:
            in_names = list(op.get_input_names())
            out_names = list(op.get_output_names())
        except Exception:   # builtin.* ops and others without op yaml info
            in_names = [f"in{i}" for i in range(len(operands))]
            out_names = [f"out{i}" for i in range(len(results))]
        described = {
            "op": name,
            "inputs": [[n, self.vid(v)] for n, v in zip(in_names, operands)],
            "outputs": [[n, self.vid(v), _shape(v), _dtype(v) if _shape(v) is not None else None]
                        for n, v in zip(out_names, results)],
            "attrs": attrs,
            "source": _user_frame(op),
        }
        if op.num_regions():
            described["blocks"] = [self.block(b) for b in op.blocks()]
            # a while's body reads its loop-carried values as block arguments (no op makes them)
            described["block_args"] = [[self.vid(a) for a in b.args()] for b in op.blocks()]
        return described


def _load(prefix: str):
    import paddle

    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        program, feed_names, fetches = paddle.static.load_inference_model(prefix, exe)
    return paddle, exe, scope, program, list(feed_names), list(fetches)


def describe(request: dict) -> dict:
    paddle, _exe, scope, program, feed_names, fetches = _load(request["prefix"])
    describer = _Describer()
    ops = describer.block(program.global_block())
    feeds = [{"name": op["attrs"]["name"], "value": op["outputs"][0][1], "shape": op["outputs"][0][2],
              "dtype": op["outputs"][0][3]} for op in ops if op["op"] == "pd_op.data"]
    order = {n: i for i, n in enumerate(feed_names)}
    feeds.sort(key=lambda f: order.get(f["name"], len(order)))
    arrays = {}
    for vid, pname in describer.params.items():
        var = scope.find_var(pname)
        if var is None:
            raise LookupError(f"parameter {pname} is not in {request['prefix']}.pdiparams")
        arrays[pname] = np.array(var.get_tensor())
    out = request["out_dir"]
    np.savez(os.path.join(out, "params.npz"), **arrays)
    graph = {"schema": "edgekit.pir-graph/1", "paddle": paddle.__version__, "feeds": feeds,
             "fetches": [describer.vid(v) for v in fetches], "params": describer.params, "ops": ops}
    with open(os.path.join(out, "graph.json"), "w", encoding="utf-8") as handle:
        json.dump(graph, handle)
    counts: dict[str, int] = {}
    for op in ops:
        counts[op["op"]] = counts.get(op["op"], 0) + 1
    return {"graph": os.path.join(out, "graph.json"), "params": os.path.join(out, "params.npz"),
            "paddle": paddle.__version__, "ops": counts, "parameters": len(arrays)}


def _operands_of(program, op_name: str) -> list:
    """The first two operands of the one `op_name` op of the program (an NMS op's boxes and scores), the program's
    own fetch ops removed (the executor refuses other fetches beside them)."""
    block = program.global_block()
    found = [op for op in block.ops if op.name() == op_name]
    if len(found) != 1:
        raise LookupError(f"the program holds {len(found)} {op_name} ops, not one")
    values = [found[0].operand_source(0), found[0].operand_source(1)]
    for op in [op for op in block.ops if op.name() == "pd_op.fetch"]:
        block.remove_op(op)
    return values


def run(request: dict) -> dict:
    paddle, exe, scope, program, feed_names, fetches = _load(request["prefix"])
    if request.get("inputs_of"):   # the values an op reads (the program cut before it), not the program's outputs
        fetches = _operands_of(program, request["inputs_of"])
    with np.load(request["inputs"]) as data:
        inputs = {k: data[k] for k in data.files}
    missing = [n for n in feed_names if n not in inputs]
    if missing:
        raise KeyError(f"no samples for the program's inputs {missing}")
    outputs = []
    batch = int(request.get("batch", 8))
    count = len(inputs[feed_names[0]])
    with paddle.static.scope_guard(scope):
        for start in range(0, count, batch):
            feed = {n: inputs[n][start:start + batch] for n in feed_names}
            outputs.append([np.array(o) for o in exe.run(program, feed=feed, fetch_list=fetches)])
    merged = [np.concatenate([chunk[i] for chunk in outputs]) for i in range(len(fetches))]
    np.savez(request["outputs"], **{f"output_{i}": o for i, o in enumerate(merged)})
    if request.get("inputs_of"):   # Paddle Inference fetches the program's outputs only: checked on the whole program
        return {"outputs": request["outputs"], "feeds": feed_names, "count": count, "paddle": paddle.__version__,
                "engines": "paddle.static.Executor", "engine_max_abs": None, "engine_samples": 0}
    # a second engine: Paddle Inference (its IR passes off: fused CPU passes have given wrong results before)
    params = request["prefix"] + ".pdiparams"
    has_params = os.path.exists(params) and os.path.getsize(params) > 0
    config = paddle.inference.Config(request["prefix"] + ".json", params if has_params else "")
    config.switch_ir_optim(False)
    config.disable_mkldnn()
    predictor = paddle.inference.create_predictor(config)
    worst = 0.0
    probe = min(count, batch)
    for name in predictor.get_input_names():
        predictor.get_input_handle(name).copy_from_cpu(np.ascontiguousarray(inputs[name][:probe]))
    predictor.run()
    for index, name in enumerate(predictor.get_output_names()):
        theirs = predictor.get_output_handle(name).copy_to_cpu()
        ours = outputs[0][index]   # the first chunk is the probe: rows of an NMS op are not sliceable by sample
        if theirs.shape == ours.shape and theirs.size:
            worst = max(worst, float(np.max(np.abs(theirs.astype(np.float64) - ours.astype(np.float64)))))
        elif theirs.shape != ours.shape:
            worst = float("inf")
    return {"outputs": request["outputs"], "feeds": feed_names, "count": count, "paddle": paddle.__version__,
            "engines": "paddle.static.Executor vs Paddle Inference (IR passes off)", "engine_max_abs": worst,
            "engine_samples": probe}


def export(request: dict) -> dict:
    import paddle
    from paddle.static import InputSpec

    sys.path.append(request["cwd"])
    module_name, _, attr = request["factory"].partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    paddle.disable_static()
    layer = factory()
    if request.get("weights"):
        layer.set_state_dict(paddle.load(request["weights"]))
    layer.eval()
    specs = [InputSpec(s["shape"], s["dtype"], s["name"]) for s in request["inputs"]]
    with np.load(request["inputs_npz"]) as data:
        samples = {k: data[k] for k in data.files}
    with paddle.no_grad():
        dyn = layer(*[paddle.to_tensor(samples[s["name"]]) for s in request["inputs"]])
    dyn_outs = [t.numpy() for t in (dyn if isinstance(dyn, (list, tuple)) else [dyn])]
    with paddle.utils.unique_name.guard():
        static_layer = paddle.jit.to_static(layer, input_spec=specs, full_graph=True)
        paddle.jit.save(static_layer, request["prefix"])
    np.savez(request["outputs"], **{f"output_{i}": o for i, o in enumerate(dyn_outs)})
    written = sorted(os.listdir(os.path.dirname(request["prefix"])))
    return {"files": written, "outputs": request["outputs"], "paddle": paddle.__version__,
            "pir": os.path.exists(request["prefix"] + ".json")}


ACTIONS = {"describe": describe, "run": run, "export": export}


def main(argv: list[str]) -> int:
    request = json.loads(argv[0])
    try:
        payload = ACTIONS[request["action"]](request)
    except (Exception, SystemExit) as exc:   # Paddle raises all kinds; the parent turns this into a typed error
        frames = traceback.extract_tb(exc.__traceback__)
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        traceback.print_exc()
        _answer(request["error_mark"], {"type": type(exc).__name__, "message": (lines[-1] if lines else repr(exc))[:400],
                                        "where": f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""})
        return 1
    _answer(request["result_mark"], payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
