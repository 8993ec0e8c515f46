"""The instruction-counting QEMU plugin (native/plugin/) on the real runner and Paddle-Lite ARM runtimes: counts are
exact per inference, identical from process to process (also beside a concurrent emulator), and tell the kernels
apart (INT8 vs FP32, dot-product vs plain NEON)."""

from __future__ import annotations

import json
import subprocess
import threading

import numpy as np
import pytest

from edgekit.lite import icount, native

pytestmark = pytest.mark.e2e

BEGIN_A64, END_A64 = 0xD5032FBF, 0xD5032FDF          # hint #125 / #126
BEGIN_A32, END_A32 = 0xE320F07D, 0xE320F07E
BEGIN_T32, END_T32 = 0x807DF3AF, 0x807EF3AF          # hint.w, as the little-endian word of its two halfwords


@pytest.fixture(scope="module")
def plugin(native_cache):
    return icount.build_plugin(native_cache)


def counted(emulation, plugin, abi, nb, feeds, profile="default", warmup=1, repeat=3):
    runtime, build = emulation(abi)
    return native.run_runner(build, runtime, nb, feeds, warmup=warmup, repeat=repeat, cpu_profile=profile,
                             icount_plugin=plugin)


def golden_sample(bundle):
    manifest = json.loads((bundle / "manifest.json").read_text())
    return {i["name"]: np.load(bundle / i["file"])[:1] for i in manifest["golden"]["inputs"]}


def words(path, step=4):
    data = path.read_bytes()
    usable = len(data) // 4 * 4
    return np.frombuffer(data[:usable], dtype="<u4") if step == 4 else np.frombuffer(data[2:usable - 2], dtype="<u4")


@pytest.mark.parametrize("test", ["edgekit-icount-decode-test", "edgekit-icount-segments-test"])
def test_the_classifiers_and_op_segments_pass_their_host_tests(plugin, test):
    done = subprocess.run([str(plugin.parent / test)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "all cases pass" in done.stdout


@pytest.mark.parametrize("abi", ["aarch64", "armhf"])
def test_markers_occur_in_the_runner_only(emulation, abi):
    runtime, build = emulation(abi)
    lite = words(runtime.library)
    markers = (BEGIN_A64, END_A64) if abi == "aarch64" else (BEGIN_A32, END_A32, BEGIN_T32, END_T32)
    assert not np.isin(lite, markers).any()                               # Lite's code never holds them
    if abi == "armhf":                                                     # Thumb words may sit at 2 mod 4
        assert not np.isin(words(runtime.library, step=2), markers).any()
    runner = np.concatenate([words(build.runner), words(build.runner, step=2)])
    found = {m: int((runner == m).sum()) for m in markers}
    assert sum(found.values()) >= 2 and found[markers[0]] == found[markers[1]]   # begin/end in pairs


def test_fp32_counts_are_identical_from_process_to_process(emulation, plugin, tiny_model):
    nb, feeds = tiny_model["nb"], {"x": tiny_model["feeds"]["x"][:3]}
    first = counted(emulation, plugin, "aarch64", nb, feeds)
    # two more processes while another emulator (the same model, no plugin) runs beside them
    runtime, build = emulation("aarch64")
    load = threading.Thread(target=lambda: native.run_runner(build, runtime, nb, feeds, repeat=200))
    load.start()
    others = [counted(emulation, plugin, "aarch64", nb, feeds) for _ in range(2)]
    load.join()
    for other in others:
        assert other.counts == first.counts                               # every region, every class: equal
    c = first.counts
    assert (c.target, c.classifier) == ("aarch64", "encoding")
    assert len(c.passes) == 3 and len(c.warmups) == 1 and len(c.timed) == 3
    one = c.timed[0]
    assert one["total"] == sum(one[k] for k in icount.CLASSES) and one["dot_product"] == 0
    assert 20_000 < one["total"] < 2_000_000                              # measured 94,510 on the tiny conv net
    assert c.passes[0]["total"] > one["total"]                           # the first run does Lite's one-time work
    assert 0.05 < one["simd_fp"] / one["total"] < 0.9 and one["load_store"] > 0 and one["branch"] > 0
    assert np.allclose(first.outputs[0], tiny_model["reference"][0][:3], atol=1e-4)   # counting changes nothing


def test_int8_runs_fewer_instructions_than_fp32_and_dot_products_on_a55(emulation, plugin, digits_int8, digits_fp32):
    int8_neon = counted(emulation, plugin, "aarch64", digits_int8 / "model.nb", golden_sample(digits_int8))
    int8_dot = counted(emulation, plugin, "aarch64", digits_int8 / "model.nb", golden_sample(digits_int8), "a55")
    fp32 = counted(emulation, plugin, "aarch64", digits_fp32 / "model.nb", golden_sample(digits_fp32))
    neon, dot, flt = (r.counts.timed[0] for r in (int8_neon, int8_dot, fp32))
    assert int8_neon.record["cpu"]["int8_kernel_path"] == "neon" and int8_dot.record["cpu"]["int8_kernel_path"] == "dotprod"
    # measured: INT8 neon 782,307, INT8 sdot 455,713 (159,808 SDOT), FP32 ~999,000
    assert neon["total"] < 0.9 * flt["total"]
    assert dot["total"] < 0.7 * neon["total"]
    assert neon["dot_product"] == 0 == flt["dot_product"] and dot["dot_product"] > 0.2 * dot["simd_fp"]
    assert len({r["total"] for r in int8_neon.counts.timed}) == 1            # INT8: the same count every run


def test_a_bundle_s_count_is_identical_over_five_processes_beside_a_busy_emulator(emulation, plugin, digits_int8):
    nb, sample = digits_int8 / "model.nb", golden_sample(digits_int8)
    runtime, build = emulation("aarch64")
    busy = threading.Thread(target=lambda: native.run_runner(build, runtime, nb, sample, repeat=1500))
    busy.start()
    runs = [counted(emulation, plugin, "aarch64", nb, sample, warmup=1, repeat=1) for _ in range(5)]
    busy.join()
    figures = [r.counts.timed[0] for r in runs]
    assert all(f == figures[0] for f in figures), figures                   # equality, not a tolerance
    assert all(r.counts == runs[0].counts for r in runs)


def test_armhf_counts_by_disassembly(emulation, plugin, tiny_model):
    nb, feeds = tiny_model["nb"], {"x": tiny_model["feeds"]["x"][:1]}
    runs = [counted(emulation, plugin, "armhf", nb, feeds, warmup=0, repeat=2) for _ in range(2)]
    assert runs[0].counts == runs[1].counts
    c = runs[0].counts
    assert (c.target, c.classifier) == ("arm", "disassembly")
    one = c.timed[0]
    assert one["total"] == sum(one[k] for k in icount.CLASSES) and one["total"] > 20_000
    assert one["simd_fp"] > 0 and one["load_store"] > 0 and one["branch"] > 0 and one["dot_product"] == 0


def test_a_plugin_without_its_output_argument_stops_qemu(emulation, plugin, tiny_model):
    runtime, build = emulation("aarch64")
    argv = native.emulator_argv("aarch64", runtime)
    argv[1:1] = ["-plugin", str(plugin)]
    done = subprocess.run(argv + [str(build.runner), "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "out=FILE.json" in done.stderr


def test_counts_do_not_depend_on_where_the_bundle_lies_or_on_the_environment(emulation, digits_int8, tmp_path,
                                                                             monkeypatch):
    """Guest-visible strings shift alignment-dependent scalar code (~0.1 % when only the .nb's folder name grew by
    ten characters, measured); counts.measure counts through fixed-length paths in an empty environment."""
    import os
    import shutil
    from pathlib import Path

    from edgekit.verify import counts
    from edgekit.contracts.settings import EmulationConfig
    from edgekit.verify.emulator import Emulator

    emulation("aarch64")                                                   # the skip/fail policy
    emulator = Emulator.prepare("aarch64", EmulationConfig(runtime=Path(os.environ["EDGEKIT_LITE_ARM"])), 600)
    sample = golden_sample(digits_int8)
    figures = []
    for folder, padding in ((tmp_path / "a", ""), (tmp_path / ("b" * 40), "x" * 3000)):
        folder.mkdir()
        shutil.copy(digits_int8 / "model.nb", folder / "model.nb")
        monkeypatch.setenv("EDGEKIT_TEST_PADDING", padding)
        found = counts.measure(emulator, folder / "model.nb", sample, profiles=["default"])
        figures.append(found["paths"]["default"]["per_inference"])
    assert figures[0] == figures[1] and figures[0]["total"] > 300_000
