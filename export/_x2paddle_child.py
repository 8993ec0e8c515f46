"""Child-process entry for X2Paddle's ONNX converter: its crashes stay in here.

Usage: python -m edgekit.export._x2paddle_child '<json request>', started by
`onnx_import` with the working directory set to a scratch folder (X2Paddle puts
its output folder on sys.path and imports the Python code it generated there).

The request holds `onnx` (the sanitised, shape-fixed copy) and `save_dir`. It
answers with `edgekit.core.proc`'s child protocol: an error line also when X2Paddle
called exit() (it prints a `paddle.jit.save` error and exits with status 0).
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from edgekit.core.proc import emit_error, emit_result


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _shape_inference_stop(onnx_path: str) -> dict | None:
    """The node at which X2Paddle's own symbolic shape inference gave up, and why; None if it ran through.

    X2Paddle swallows that exception (it prints "[WARNING] Incomplete symbolic shape inference") and goes on
    with ONNX's plain shape inference, which loses every dim computed at run time: the usual reason why a
    later op sees [-1, -1, ...]. Measured here so the error can name it.
    """
    try:
        import onnx
        from x2paddle.decoder.onnx_shape_inference import SymbolicShapeInference

        model = onnx.load(onnx_path)
        inference = SymbolicShapeInference(2**31 - 1, False, False, 0)
        inference._preprocess(model, input_shapes={})
        seen = []
        for op, handler in list(inference.dispatcher_.items()):
            inference.dispatcher_[op] = lambda node, handler=handler: (seen.append(node), handler(node))
        while inference.run_:
            inference._infer_impl(model)
    except Exception as exc:  # the very exception X2Paddle swallowed (an AssertionError for opset-13 Squeeze)
        if not seen:
            return None
        node = seen[-1]
        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
        return {"op": node.op_type, "node": node.name, "inputs": len([i for i in node.input if i]),
                "error": f"{type(exc).__name__} {_last_line(str(exc))}".strip(), "where": where}
    return None


def main(argv: list[str]) -> int:
    request = json.loads(argv[0])
    save_dir = request["save_dir"]
    try:
        from x2paddle.convert import onnx2paddle

        # disable_feedback: X2Paddle otherwise reports every conversion to a Baidu statistics URL.
        # No input_shape_dict: the parent writes fixed dims into the model itself (X2Paddle's
        # option re-appends the named inputs at the end of graph.input and cannot keep a dim dynamic).
        onnx2paddle(request["onnx"], save_dir, disable_feedback=True, enable_onnx_checker=True)
    except (Exception, SystemExit) as exc:  # X2Paddle raises bare Exception, AssertionError and SystemExit alike
        sys.stdout.flush()
        frames = traceback.extract_tb(exc.__traceback__)
        where = next((f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(frames)
                      if "x2paddle" in f.filename), "")
        error = {"type": type(exc).__name__, "message": _last_line(str(exc)) or repr(exc), "where": where}
        if isinstance(exc, SystemExit):   # X2Paddle prints the real error, then calls exit(0)
            error["message"] = "X2Paddle exited before writing a model"
        if isinstance(exc, SyntaxError):   # generated code that does not compile: show the offending line
            error["code_line"] = (exc.text or "").strip()
        traceback.print_exc()
        stop = _shape_inference_stop(request["onnx"])
        if stop:
            error["shape_inference_stop"] = stop
        emit_error(error)
        return 1
    model = os.path.join(save_dir, "inference_model", "model.pdmodel")
    params = os.path.join(save_dir, "inference_model", "model.pdiparams")
    import paddle
    import x2paddle

    emit_result({"model_file": model, "params_file": params, "x2paddle": x2paddle.__version__, "paddle": paddle.__version__})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
