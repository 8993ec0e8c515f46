"""The per-function profile on the real runner, plugin and Lite's unstripped ARM runtime (digits INT8 bundle only:
CI keeps it lean): rows add up to the counted total, and a second run (through the CLI) gives the same profile."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgekit.consumers import costs
from edgekit.verify import profile
from edgekit.cli import app
from edgekit.contracts.settings import EmulationConfig
from edgekit.core.errors import EmulationUnavailable

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def settings(emulation):
    emulation("aarch64")                                   # skips (or fails when required) without the tools
    root = os.environ.get("EDGEKIT_LITE_ARM")
    try:
        profile.symbols_runtime(Path(root) if root else None)
    except EmulationUnavailable as exc:
        if os.environ.get("EDGEKIT_REQUIRE_EMULATION", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail(f"EDGEKIT_REQUIRE_EMULATION=1 but {exc.message}")
        pytest.skip(exc.message)
    return EmulationConfig(runtime=Path(root))


def test_digits_int8_profile_adds_up_and_is_identical_across_runs(settings, digits_int8):
    first = costs.profile_bundle(digits_int8, settings, cpu="default", cache=False)
    total = first["total"]
    assert total == first["counted"]["total"]              # the region the plugin counted, whole
    assert sum(k["total"] for k in first["kinds"]) == total
    assert sum(f["total"] for f in first["functions"]) == total
    assert sum(p["total"] for p in first["by_precision"].values()) == total
    # measured 782,355 (winograd INT8: int16 GEMM 369,712; fp32_to_int8 12,488)
    assert 700_000 < total < 900_000
    kinds = {k["kind"]: k for k in first["kinds"]}
    assert kinds["int8_gemm"]["share"] > 0.6
    assert first["int8_adds"]["total"] == kinds["conversion"]["total"] > 10_000
    assert any(f["function"].endswith("fp32_to_int8") for f in first["functions"])

    done = CliRunner().invoke(app, ["inspect", str(digits_int8), "--profile", "--cpu", "default", "--json"],
                              env={"EDGEKIT_LITE_ARM": str(settings.runtime)})
    assert done.exit_code == 0, done.output
    second = json.loads(done.output)
    assert first.pop("cached") is False and second.pop("cached") is False     # two runs, no cache
    assert second == first                                 # every function, every class: equal


def test_digits_int8_profile_names_the_op_each_instruction_served(settings, digits_int8, monkeypatch):
    """Per op of the program: the ops that ran are the .nb's (in the order Lite's own log creates its instructions),
    each ran instructions, its largest functions are its kernel's, and ops plus the tail add up to the total."""
    import numpy as np

    from edgekit.lite import native
    from edgekit.lite.nbfile import program_ops
    from edgekit.verify.emulator import Emulator

    found = costs.profile_bundle(digits_int8, settings, cpu="default", cache=False)
    split = found["per_op"]
    ops = split["ops"]
    assert split["named"] and len(ops) == split["program_ops"] == 12
    assert sum(r["total"] for r in ops) + split["tail"]["total"] == found["total"]
    assert all(r["total"] > 0 for r in ops)
    assert split["tail"]["total"] < 1_000                 # the loop's exit and Run's return (measured 25)

    # Lite's own record of its instructions, in creation order (GLOG_v=3: "Found the attr ... KERNEL for OP")
    monkeypatch.setenv("GLOG_v", "3")
    emulator = Emulator.prepare("aarch64", dataclasses.replace(settings, runtime=profile.symbols_runtime(
        settings.runtime)), 600)
    image = np.load(digits_int8 / "golden" / "input_0.npy")[:1]
    done = native.run_runner(emulator.build, emulator.runtime, digits_int8 / "model.nb", {"image": image}).process
    logged = [line.split("': ", 1)[1].split(" for ")[0] for line in done.stderr.splitlines()
              if "Found the attr '__@kernel_type_attr@__'" in line]
    lite_order = [k for k in logged if k.split("/")[0] not in ("feed", "fetch")]
    assert [r["kernel"] for r in ops] == lite_order
    assert [(r["type"], r["index"]) for r in ops] == [(o.type, o.index) for o in program_ops(digits_int8 / "model.nb")
                                                      if o.runs]
    # each op's largest function is its kernel's: the instructions went to the op that ran them
    convs = [r for r in ops if r["type"] == "conv2d"]
    assert all(r["functions"][0]["kind"] == "int8_gemm" and r["by_precision"]["int8"] > 0.9 * r["total"]
               for r in convs)
    # measured 312,890 + 200,480 + 205,513 of 782,355
    assert sum(r["total"] for r in convs) > 0.85 * found["total"]
    assert all(r["functions"][0]["function"].endswith("fp32_to_int8") for r in ops if r["type"] == "calib"
               and r["total"] > 5_000)
    assert all(r["functions"][0]["kind"] == "pool_norm" for r in ops if r["type"] == "pool2d")
    text = profile.op_table(split, found["total"])
    assert text[0].startswith("per op of the program (12 ops ran") and text[-1].split()[1] == f"{found['total']:,}"


def test_uneven_depthwise_strides_leave_the_scalar_im2col(settings, tmp_path):
    """lite_safe's depthwise even-stride rewrite (ARM): the conv at stride (2, 1) ran as a scalar im2col plus a GEMM
    per channel; at stride 1 with a row slice it runs Lite's depthwise kernel, same outputs, fewer instructions."""
    import numpy as np

    from edgekit.contracts.settings import InputSpec
    from edgekit.verify.emulator import Emulator
    from edgekit.export.dygraph import export_layer
    from edgekit.lite import convert
    from edgekit.lite.rewrite import lite_safe
    from native_models import uneven_depthwise

    samples = {"x": np.random.default_rng(0).standard_normal((4, 3, 48, 64)).astype(np.float32)}
    static = export_layer(uneven_depthwise(), [InputSpec("x", (-1, 3, 48, 64), "float32")], tmp_path / "export",
                          samples, "uneven depthwise")
    safe, rewrites = lite_safe(static, tmp_path / "safe", samples, x86=False)
    (done,) = [r for r in rewrites if r["rewrite"].startswith("depthwise")]
    assert done["ops"] == 1 and done["max_abs"] <= 1e-6
    emulator = Emulator.prepare("aarch64", dataclasses.replace(settings, runtime=profile.symbols_runtime(
        settings.runtime)), 600)
    found = {}
    for name, model in (("as exported", static), ("rewritten", safe)):
        nb = convert(model, "arm", tmp_path / f"{name}.nb", timeout=300, target="arm64", precision="fp32").nb_file
        found[name] = profile.measure(emulator, nb, {"x": samples["x"][:1]}, cpu="default")
    before, after = found["as exported"], found["rewritten"]
    names = {f["function"].rsplit("::", 1)[-1] for f in before["functions"]}
    assert "im2col<float>" in names                                              # the scalar fallback ran
    assert "im2col<float>" not in {f["function"].rsplit("::", 1)[-1] for f in after["functions"]}
    # measured: 5,200,545 -> 3,957,252 instructions per inference (the two 1x1 convs are most of what is left)
    assert after["total"] < 0.85 * before["total"]


def profiled_on_arm(settings, tmp_path, models: dict, samples: dict) -> tuple[dict, dict]:
    """Each program converted for arm64 FP32: its profile of sample 0 on the default path, and its first output on
    every sample, under qemu with the unstripped runtime."""
    from edgekit.lite import convert, native
    from edgekit.verify.emulator import Emulator

    emulator = Emulator.prepare("aarch64", dataclasses.replace(settings, runtime=profile.symbols_runtime(
        settings.runtime)), 600)
    found, outputs = {}, {}
    for name, model in models.items():
        nb = convert(model, "arm", tmp_path / f"{name}.nb", timeout=300, target="arm64", precision="fp32").nb_file
        found[name] = profile.measure(emulator, nb, {"x": samples["x"][:1]}, cpu="default")
        outputs[name] = native.run_runner(emulator.build, emulator.runtime, nb, samples).outputs[0]
    return found, outputs


def test_one_element_constants_take_the_vectorised_per_channel_path(settings, tmp_path, monkeypatch):
    """lite_safe's per-channel constant rewrite (ARM): `a * x + b` with learned one-element a, b ran value by value on
    Lite's generic broadcast; per channel it is vectorised, and the ARM outputs are the same bit for bit."""
    import numpy as np

    from edgekit.contracts.settings import InputSpec
    from edgekit.export.dygraph import export_layer
    from edgekit.lite.rewrite import SKIP_ENV, lite_safe
    from native_models import learnable_affine

    samples = {"x": np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)}
    static = export_layer(learnable_affine(), [InputSpec("x", (-1, 3, 64, 64), "float32")], tmp_path / "export",
                          samples, "learnable affine")
    safe, rewrites = lite_safe(static, tmp_path / "safe", samples, x86=False)
    (done,) = [r for r in rewrites if r["rewrite"].startswith("elementwise op with a one-element")]
    assert done["ops"] == 2 and done["max_abs"] == 0.0
    monkeypatch.setenv(SKIP_ENV, "per-channel-constants")
    plain, skipped = lite_safe(static, tmp_path / "plain", samples, x86=False)
    assert not [r for r in skipped if r["rewrite"].startswith("elementwise op with a one-element")]
    found, outputs = profiled_on_arm(settings, tmp_path, {"as exported": plain, "rewritten": safe}, samples)
    assert np.array_equal(outputs["as exported"], outputs["rewritten"])
    broadcast = {f["function"] for f in found["as exported"]["functions"] if "broadcast" in f["function"]}
    assert {"paddle::lite::arm::math::elementwise_mul_broadcast<float>",
            "paddle::lite::arm::math::elementwise_add_broadcast<float>"} <= broadcast
    # measured: 13,662,100 -> 3,407,608 instructions per inference
    assert found["rewritten"]["total"] < 0.4 * found["as exported"]["total"]


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_a_pool_over_two_rows_takes_the_neon_2x2_kernel(settings, tmp_path, monkeypatch, kind):
    """lite_safe's two-row pool rewrite (ARM): a 2x2 stride-2 pool over a tensor two rows high ran Lite's scalar
    pooling_basic (PP-OCR cls's last max pool: 37 % of its INT8 instructions); over the input stacked twice it runs
    the NEON 2x2 kernel, with the same ARM outputs (max: bit for bit)."""
    import numpy as np

    from edgekit.contracts.settings import InputSpec
    from edgekit.export import program as prog
    from edgekit.export.dygraph import export_layer
    from edgekit.lite.rewrite import SKIP_ENV, lite_safe
    from native_models import two_row_pool

    samples = {"x": np.random.default_rng(0).standard_normal((2, 3, 5, 96)).astype(np.float32)}
    static = export_layer(two_row_pool(kind), [InputSpec("x", (-1, 3, 5, 96), "float32")], tmp_path / "export",
                          samples, "two-row pool")
    safe, rewrites = lite_safe(static, tmp_path / "safe", samples, x86=False)
    (done,) = [r for r in rewrites if r["rewrite"].startswith("pool2d 2x2/2 over H = 2")]
    assert done["ops"] == 1 and done["max_abs"] == 0.0
    pools = [op for op in prog.parse_program(safe.model_file).global_block().ops if op.type == "pool2d"]
    assert [op.input("X")[0].endswith("edgekit_stacked") for op in pools] == [True]
    monkeypatch.setenv(SKIP_ENV, "two-row-pools")
    plain, _ = lite_safe(static, tmp_path / "plain", samples, x86=False)
    found, outputs = profiled_on_arm(settings, tmp_path, {"as exported": plain, "rewritten": safe}, samples)
    # max: the same values bit for bit; avg: the NEON kernel sums in another order (measured 3e-8)
    assert np.abs(outputs["as exported"] - outputs["rewritten"]).max() <= (0.0 if kind == "max" else 1e-6)
    functions = {name: {f["function"].rsplit("::", 1)[-1] for f in found[name]["functions"]} for name in found}
    assert "pooling_basic" in functions["as exported"]
    assert "pooling_basic" not in functions["rewritten"]
    assert f"pooling2x2s2p0_{kind}" in functions["rewritten"]
    assert found["rewritten"]["total"] < found["as exported"]["total"]


@pytest.mark.parametrize("stride", [(2, 1), (1, 2)])
def test_the_depthwise_rewrite_leaves_the_width_free(tmp_path, stride):
    """A line model (width_mode dynamic) runs at widths other than the one its program declares, and Lite does not
    check shapes: the rewrite must take the width from the tensor (the row split: reshape -1, split in two halves; the
    column slice: an end past any width), never from the program (the 320 baked in made a PP-OCRv4 rec .nb give 40
    time steps at width 1280 under qemu, test_long_lines)."""
    import numpy as np

    from edgekit.contracts.settings import InputSpec
    from edgekit.export import program as prog
    from edgekit.export.dygraph import export_layer
    from edgekit.lite.rewrite import lite_safe
    from native_models import uneven_depthwise

    samples = {"x": np.random.default_rng(0).standard_normal((2, 3, 48, 64)).astype(np.float32)}
    static = export_layer(uneven_depthwise(stride), [InputSpec("x", (-1, 3, 48, 64), "float32")], tmp_path / "export",
                          samples, "uneven depthwise")
    safe, rewrites = lite_safe(static, tmp_path / "safe", samples, x86=False)
    assert any(r["rewrite"].startswith("depthwise") for r in rewrites)
    ops = prog.parse_program(safe.model_file).global_block().ops
    views = [op for op in ops if op.type == "reshape2" and "edgekit_row_pairs" in op.output("Out")[0]]
    halves = [op for op in ops if op.type == "split" and any("edgekit_odd_rows" in o for o in op.output("Out"))]
    slices = [op for op in ops if op.type == "strided_slice" and "edgekit_stride1" in op.input("Input")[0]]
    assert views or slices
    assert all(list(op.attr("shape"))[-1] == -1 for op in views)
    assert all(op.attr("num") == 2 and not list(op.attr("sections")) for op in halves)
    assert all(list(op.attr("ends")) == [2 ** 31 - 1] for op in slices)
