"""Child-process entry for paddlelite's Opt: its C++ aborts and segfaults stay in here.

Usage: python -m edgekit.lite._opt_child '<json request>'; answers with
`edgekit.core.proc`'s child protocol (`EDGEKIT-RESULT <json>` as the last stdout line).
"""

from __future__ import annotations

import json
import sys

from edgekit.core.proc import emit_result


def main(argv: list[str]) -> int:
    request = json.loads(argv[0])
    import paddlelite.lite as lite

    opt = lite.Opt()
    action = request["action"]
    result: dict = {"version": opt.version()}
    if action == "convert":
        opt.set_model_file(request["model_file"])
        opt.set_param_file(request["params_file"])
        opt.set_valid_places(request["places"])
        opt.set_model_type("naive_buffer")
        opt.set_optimize_out(request["out"])         # opt appends .nb
        if request.get("fp16"):
            opt.enable_fp16()
        if request.get("weight_quant"):
            opt.set_quant_model(True)
            opt.set_quant_type(request["weight_quant"])
        sys.stdout.flush()
        opt.run()
    elif action == "supported_ops":
        opt.set_valid_places(request["places"])
        sys.stdout.flush()
        opt.print_supported_ops()
    elif action == "visualize":
        result["blocks"] = list(opt.visualize_optimized_nb_model(request["nb"], request["out_dir"]))
    elif action != "version":
        raise SystemExit(f"unknown action {action}")
    emit_result(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
