"""Tier C's emulation shards on every executor: the digits arm64 model.nb on 24 real digit images (the bundle's golden
inputs and their mirror images) in threads of this process (the serial build's way), on a process pool and on a real
two-node Ray cluster (shipped bytes, no driver files): the same output bytes, the Ray shards on both nodes; an emulator
killed mid-shard (as the OOM killer would) is run again and the outputs do not change."""

from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest
import raycluster
from bundles import kill_first, manifest

from edgekit.core import executors
from edgekit.contracts.settings import EmulationConfig, InputSpec
from edgekit.verify.emulator import Emulator

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def digits(tmp_path_factory, lite_arm, cli):
    out = tmp_path_factory.mktemp("tier-c-executors")
    cli("build", "--target", "arm64", "--quant", "fp32", "--out", out, "--no-emulation", "--quiet")
    bundle = out / "digits" / "arm64-fp32"
    (spec,) = manifest(bundle)["golden"]["inputs"]
    golden = np.load(bundle / spec["file"])
    images = np.concatenate([golden, golden[:, :, :, ::-1], golden[:, :, ::-1, :]])      # 24 real digit images
    expect = [InputSpec(spec["name"], (-1, *spec["shape"][1:]), spec["dtype"])]
    emulator = Emulator.prepare("aarch64", EmulationConfig(runtime=lite_arm), 600)
    return emulator, bundle / "model.nb", {spec["name"]: images}, expect


@pytest.fixture(scope="module")
def runs(digits):
    emulator, nb, inputs, expect = digits

    def run(executor):
        return emulator.run(nb, inputs, expect, 2, memory_aware=True, executor=executor)

    found = {"nb": nb, "threads": run(executors.SerialExecutor())}      # a serial build: shards in threads, as before executors
    with executors.PoolExecutor(workers=2) as pool:
        found["pool"] = run(pool)
    with raycluster.cluster(["edgekit-head", "edgekit-second"]) as address:
        with executors.RayExecutor(address) as on_ray:
            raycluster.wait_nodes(on_ray._ray, 2)
            found["ray"] = run(on_ray)
    return found


def test_every_executor_gives_the_same_output_bytes(runs):
    reference, _ = runs["threads"]
    for name in ("pool", "ray"):
        outputs, _ = runs[name]
        assert [(o.dtype, o.shape, o.tobytes()) for o in outputs] == [(o.dtype, o.shape, o.tobytes()) for o in reference]
    assert reference[0].shape[0] == 24 and np.isfinite(reference[0]).all()


def test_shards_ran_where_the_executor_put_them(runs):
    for name in ("threads", "pool", "ray"):
        records = runs[name][1]
        shards = [r["shard"] for r in records]
        assert {s["executor"] for s in shards} == {name}
        assert [s["first"] for s in shards] == [0, 1, 1 + shards[1]["samples"]][:len(shards)]   # the probe, then the rest
        assert sum(s["samples"] for s in shards) == 24 and shards[0]["samples"] == 1
        probe = records[0]["memory_probe"]
        assert len(records) == 1 + probe["processes_after_probe"]
    _, on_ray = runs["ray"]
    after_probe = on_ray[1:]
    assert len(after_probe) == 2 and on_ray[0]["memory_probe"]["limited_by"] == "cluster CPUs"
    # each shard ran on a node of the cluster; which one is Ray's choice (a fresh-clone CI run put both shards after
    # the probe on one node, one after the other), so spreading over both nodes is not asserted
    assert all(r["shard"]["node"]["id"] for r in on_ray)
    # the Ray shards ran the bytes they were sent, from a scratch folder of their node, not the driver's bundle
    assert all("/edgekit-shard-" in r["model"]["file"] for r in on_ray)
    assert {r["model"]["file"] for r in runs["threads"][1]} == {str(runs["nb"])}


def test_a_killed_emulator_is_run_again_with_the_same_outputs(digits, tmp_path):
    emulator, nb, inputs, expect = digits
    copy = tmp_path / "killed-shard.nb"
    shutil.copyfile(nb, copy)
    many = {k: np.concatenate([v] * 8) for k, v in inputs.items()}        # 192 samples: several seconds under qemu
    reference, _ = emulator.run(nb, many, expect, 1)
    stop, killed = threading.Event(), []
    def emulating_copy(argv: list) -> bool:
        return any(copy.name.encode() in a for a in argv) and any(a.endswith(b"edgekit-lite-run") for a in argv)

    watcher = threading.Thread(target=kill_first, args=(emulating_copy, stop, killed), daemon=True)
    watcher.start()
    try:
        outputs, records = emulator.run(copy, many, expect, 1)
    finally:
        stop.set()
    assert killed, "the watcher found no emulator to kill"
    assert len(records) == 1 and all(np.array_equal(a, b) for a, b in zip(outputs, reference))
