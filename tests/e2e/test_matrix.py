"""`edgekit matrix` for real: the digits example fp32 + int8 for arm64 and a bad model, serial, on the pool (with a
build killed mid-cell) and on a two-node Ray cluster: the same table and the same bundle bytes; a rerun is all cache hits."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

import raycluster
from bundles import kill_first

from edgekit.core import executors
from edgekit.matrix import cells as matrix
from edgekit.core.executors import Resources, Task

pytestmark = pytest.mark.e2e

DIGITS = Path(matrix.__file__).parents[1] / "examples" / "digits" / "edgekit.toml"
TIMING = {"seconds", "attempts", "status"}


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    root = tmp_path_factory.mktemp("matrix")
    (root / "bad.pdmodel").write_bytes(b"not a paddle program")
    (root / "m.toml").write_text(f"""
targets = ["arm64"]
precisions = ["fp32", "int8"]
[[model]]
name = "digits"
config = "{DIGITS}"
args = ["--no-emulation"]
[[model]]
name = "bad"
model = "bad.pdmodel"
precisions = ["fp32"]
args = ["--no-emulation"]
""")
    return root, matrix.load(root / "m.toml")


def _digits_int8_build(argv: list) -> bool:
    return b"build" in argv and b"digits" in argv and b"int8" in argv


@pytest.fixture(scope="module")
def runs(spec, tmp_path_factory):
    root, m = spec
    source = matrix.source_digest()      # taken once: someone may edit the tree while this runs (not in CI)
    results = {"serial": matrix.run(m, root / "serial", executors.SerialExecutor(), source=source)}
    done, killed = threading.Event(), []
    watcher = threading.Thread(target=kill_first, args=(_digits_int8_build, done, killed), daemon=True)
    watcher.start()
    with executors.PoolExecutor(workers=2) as pool:
        results["pool"] = matrix.run(m, root / "pool", pool, source=source)
    done.set()
    results["killed"] = killed
    # a real cluster: a head and a second node, one CPU and one custom resource each (Ray local: test_executors_processes)
    with raycluster.cluster(["edgekit-head", "edgekit-second"]) as address:
        with executors.RayExecutor(address) as on_ray:
            results["ray_nodes"] = len(raycluster.wait_nodes(on_ray._ray, 2))
            results["ray_workers"] = on_ray.workers
            pinned = Resources(custom={"edgekit-second": 1})      # as a device lease would be
            results["ray_pinned"] = (on_ray.slots(pinned), on_ray.run([Task(os.getpid, (), pinned)])[0])
            results["ray"] = matrix.run(m, root / "ray", on_ray, source=source)
    with executors.PoolExecutor(workers=2) as pool:
        results["rerun"] = matrix.run(m, root / "pool", pool, source=source)
    results["source_changed"] = source != matrix.source_digest()
    return results


def _plain(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_the_bad_cell_fails_alone(runs):
    serial = {r["cell"]: r for r in runs["serial"].rows}
    assert [r["cell"] for r in runs["serial"].rows] == ["digits/arm64-fp32", "digits/arm64-int8", "bad/arm64-fp32"]
    assert serial["bad/arm64-fp32"]["status"] == "failed"
    assert "bad.pdmodel" in serial["bad/arm64-fp32"]["error"] and serial["bad/arm64-fp32"]["exit_code"] == 3
    for cell in ("digits/arm64-fp32", "digits/arm64-int8"):
        assert serial[cell]["status"] == "built" and serial[cell]["accuracy"]["fp32 reference"] >= 95.0
    assert serial["digits/arm64-int8"]["nb_bytes"] < serial["digits/arm64-fp32"]["nb_bytes"]
    assert not (runs["serial"].out / "bundles" / "bad").exists()
    table = json.loads(runs["serial"].table_json.read_text())
    assert table["schema"] == "edgekit.matrix/1" and len(table["cells"]) == 3
    assert "| digits/arm64-int8 | built |" in runs["serial"].table_md.read_text()


def test_every_executor_gives_the_same_table_and_bundles(runs):
    serial = _plain(runs["serial"].rows)
    assert _plain(runs["pool"].rows) == serial
    assert _plain(runs["ray"].rows) == serial       # includes every bundle file's sha256
    for name in ("pool", "ray"):
        for cell in ("digits/arm64-fp32", "digits/arm64-int8"):
            a = runs["serial"].out / "bundles" / cell / "model.nb"
            b = runs[name].out / "bundles" / cell / "model.nb"
            assert a.read_bytes() == b.read_bytes()
        leftovers = [p for p in (runs[name].out / "bundles").rglob(".*")]
        assert leftovers == [], leftovers           # no staging folder or half bundle left


def test_the_ray_cluster_had_two_nodes_and_pins_by_custom_resource(runs):
    assert runs["ray_nodes"] == 2 and runs["ray_workers"] == 2
    slots, pinned = runs["ray_pinned"]
    assert slots == 1 and pinned.ok and isinstance(pinned.value, int)


def test_a_killed_build_is_retried(runs):
    assert runs["killed"], "the watcher found no int8 build to kill"
    int8 = next(r for r in runs["pool"].rows if r["cell"] == "digits/arm64-int8")
    assert int8["status"] == "built" and int8["attempts"] == 2


def test_a_rerun_is_all_cache_hits(runs):
    rerun = runs["rerun"]
    assert [r["status"] for r in rerun.rows] == ["cached", "cached", "failed"]   # failures are not cached
    assert _plain(rerun.rows) == _plain(runs["serial"].rows)


def test_the_cli_reports_each_cell(spec, cli, runs):
    root, _ = spec
    result = cli("matrix", root / "m.toml", "--out", root / "pool", "--executor", "serial", ok=False)
    assert result.exit_code == 1                    # the bad cell fails the command
    assert "failed bad/arm64-fp32: model file" in result.output
    assert "| digits/arm64-int8 |" in result.output and "1 failed) in" in result.output
    if not runs["source_changed"]:
        assert "cached digits/arm64-int8" in result.output and "3 cells (2 cached, 1 failed)" in result.output


def _sigint_as_a_terminal_gives_it() -> None:
    """In the child before exec: SIGINT at its default action. A background job of a non-interactive shell (`cmd &`
    in a CI script) inherits SIGINT *ignored* (POSIX), and Python keeps an ignored SIGINT: the CLI then never sees
    the Ctrl-C this test sends, and the matrix runs to the end (issue 32: exit 1, "lost under load")."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_leaves_only_complete_bundles(spec):
    import subprocess
    import sys

    from edgekit.build import bundle as bundle_mod

    root, _ = spec
    out = root / "interrupted"
    child = subprocess.Popen([sys.executable, "-c", "from edgekit.cli import main; main()", "matrix", str(root / "m.toml"),
                              "--out", str(out), "-j", "2"], stderr=subprocess.PIPE, text=True, start_new_session=True,
                             preexec_fn=_sigint_as_a_terminal_gives_it)
    seen = []
    for line in child.stderr:
        seen.append(line)
        if "running digits/arm64-int8" in line:
            break
    # the event, not a number of seconds: a cell's build is inside its stages once its staging folder exists
    # (pipeline.STAGING_PREFIX beside its bundle), however loaded the machine is
    deadline = time.monotonic() + 600
    while not list((out / "bundles").glob(".edgekit-staging-*")) and child.poll() is None:
        assert time.monotonic() < deadline, "".join(seen)
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGINT)          # what Ctrl-C sends to the terminal's foreground group
    rest = child.stderr.read()
    assert child.wait(timeout=60) == 130, "".join(seen) + rest
    assert "interrupted" in rest
    bundles = [p for p in (out / "bundles").glob("*/*")] if (out / "bundles").exists() else []
    for folder in bundles:
        assert bundle_mod.verify(bundle_mod.load(folder)) == []
    assert [p for p in out.rglob(".*")] == []     # no staging folder, no temporary file
    assert not (out / "matrix.json").exists()     # the table is written only for a finished matrix
