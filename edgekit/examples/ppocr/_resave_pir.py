"""Re-save a legacy inference model as a PIR program with Paddle 3 (the format PaddleOCR 3.x ships). Run by
Paddle 3's interpreter, never imported by edgekit (`paddle3.py` starts it).

With FLAGS_enable_pir_api=0 FLAGS_enable_pir_in_executor=1 Paddle 3's legacy loader hands back a PIR
program: `python _resave_pir.py SRC_PREFIX DST_PREFIX`. X2Paddle's
`x2paddle_<name>` feeds get the ONNX input's own name back, as PaddleOCR's exports have them.
"""

import sys

import paddle


def main(src: str, dst: str) -> None:
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    program, _, fetches = paddle.static.load_inference_model(src, exe)
    with paddle.pir_utils.IrGuard():
        feeds = []
        for op in program.global_block().ops:
            if op.name() == "pd_op.data":
                name = op.attrs()["name"]
                if name.startswith("x2paddle_"):
                    op.set_str_attr("name", name[len("x2paddle_"):])
                feeds.append(op.result(0))
        paddle.static.save_inference_model(dst, feeds, fetches, exe, program=program)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
