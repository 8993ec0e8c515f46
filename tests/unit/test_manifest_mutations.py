"""Any mutation of a valid manifest gives a typed edgekit error or works, never a traceback (issue 22).

The readers under test are every Python consumer of a bundle: `inspect` (describe), the
verified bundle with its golden vectors and version lock (what `parity` does before
Paddle-Lite), `BundleModel.load` (what `run` does before it) and `package`. The bundle is
a tiny fake one (no Paddle build); mutations touch the manifest only, as an attacker
editing it would.
"""

from __future__ import annotations

import copy
import json
import os
import random
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from untrusted_bundles import make_bundle

from edgekit.consumers import inspection
from edgekit.build.bundle import MANIFEST
from edgekit.core.errors import EdgekitError
from edgekit.consumers.package import Platform, package
from edgekit.consumers.predict import BundleModel

ODD_VALUES = [None, True, False, 0, -1, 1, 2 ** 63, 10 ** 30, -2 ** 70, 1.5, 1e308, float("nan"), "", "x", "../x",
              "/etc/passwd", "v2.12", "golden/input_0.npy", "model.nb", "\0", "x" * 300, [], [0], [[[]]], {}, {"a": 1},
              {"name": "x", "shape": [1], "dtype": "float32", "file": "model.nb"}, [-1, 1, 8, 8], ["x"], "int64"]


def _nodes(value, path=()):
    """Every (path, node) of a JSON value, containers and scalars, iteratively."""
    found, stack = [], [(path, value)]
    while stack:
        where, node = stack.pop()
        found.append((where, node))
        if isinstance(node, dict):
            stack.extend((where + (k,), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((where + (i,), v) for i, v in enumerate(node))
    return found


def _set(root, path, value):
    if not path:
        return value
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return root


def mutate(manifest: dict, choose) -> object:
    """One mutation picked by `choose(n) -> 0..n-1`: delete, replace, wrap, duplicate or add a key, anywhere."""
    nodes = _nodes(manifest)
    path, node = nodes[choose(len(nodes))]
    op = choose(6)
    if op == 0 and path:                                  # delete the node
        parent = manifest
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        return manifest
    if op == 1:                                           # replace it with an odd value
        return _set(manifest, path, copy.deepcopy(ODD_VALUES[choose(len(ODD_VALUES))]))
    if op == 2:                                           # wrap it in a list
        return _set(manifest, path, [node])
    if op == 3 and isinstance(node, list):                # duplicate or drop list items
        return _set(manifest, path, node + node if choose(2) else node[1:])
    if op == 4 and isinstance(node, dict):                # a key nobody expects
        node[ODD_VALUES[choose(len(ODD_VALUES))].__repr__()[:20]] = copy.deepcopy(ODD_VALUES[choose(len(ODD_VALUES))])
        return manifest
    if isinstance(node, str):                             # a near miss of a string
        return _set(manifest, path, node[: choose(len(node) + 1)] + ("/.." if choose(2) else "X"))
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return _set(manifest, path, -node if choose(2) else node * 1000)
    return _set(manifest, path, copy.deepcopy(ODD_VALUES[choose(len(ODD_VALUES))]))


def _describe(bundle, out):
    inspection.describe(bundle)                               # edgekit inspect


def _parity(bundle, out):
    inspection.golden_vectors(inspection.locked(bundle, twin=True))     # edgekit parity, up to Paddle-Lite


def _run(bundle, out):
    BundleModel.load(bundle, runner=object())                 # edgekit run, up to Paddle-Lite


def _package(bundle, out):
    package([bundle], Platform.linux, out)                    # edgekit package


READERS = (_describe, _parity, _run, _package)


def consume(bundle, out, readers=READERS) -> str:
    """What the readers do with the bundle; the outcome's name (the first error's class, or ok)."""
    try:
        for reader in readers:
            reader(bundle, out)
    except EdgekitError as error:
        return type(error).__name__
    return "ok"


@pytest.fixture(scope="module")
def fake():
    # 10,000 manifest writes and reads: on tmpfs when there is one (a disk-backed /tmp takes ms a write)
    fast = Path("/dev/shm") if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="edgekit-mutations-", dir=fast) as folder:
        bundle = make_bundle(Path(folder))
        yield bundle, json.loads((bundle / MANIFEST).read_text()), Path(folder)


@pytest.fixture(autouse=True)
def _no_runtime_child(monkeypatch):
    monkeypatch.setattr(inspection, "_host_runtime_version", lambda: None)   # no paddle_lite_opt child process


def _write(bundle, manifest) -> None:
    (bundle / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")


def test_the_unmutated_bundle_passes_every_reader(fake):
    bundle, original, root = fake
    _write(bundle, original)
    assert consume(bundle, root / "assets-ok") == "ok"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(choices=st.lists(st.integers(min_value=0, max_value=10 ** 6), min_size=3, max_size=40),
       rounds=st.integers(min_value=1, max_value=4))
def test_any_mutation_gives_a_typed_error_or_works(fake, choices, rounds):
    bundle, original, root = fake
    picks = iter(choices)
    manifest = copy.deepcopy(original)
    for _ in range(rounds):
        if not isinstance(manifest, (dict, list)):
            break
        manifest = mutate(manifest, lambda n: next(picks, 0) % n)
    _write(bundle, manifest)
    try:
        consume(bundle, root / "assets")
    finally:
        _write(bundle, original)


def test_ten_thousand_seeded_mutations_give_no_traceback(fake):
    bundle, original, root = fake
    rng = random.Random(22)
    outcomes: dict[str, int] = {}
    tracebacks = []
    start = time.monotonic()
    for i in range(10_000):
        manifest = copy.deepcopy(original)
        for _ in range(rng.randint(1, 3)):
            if isinstance(manifest, (dict, list)):
                manifest = mutate(manifest, rng.randrange)
        _write(bundle, manifest)
        try:
            readers = READERS if i % 100 == 0 else (rng.choice(READERS[:3]),)   # package copies: 1 in 100
            outcome = consume(bundle, root / "assets", readers)
        except Exception as exc:  # noqa: BLE001 - what this test counts: anything that is not an EdgekitError
            tracebacks.append(f"{type(exc).__name__}: {exc}")
            outcome = "traceback"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    _write(bundle, original)
    print(f"\n10,000 mutations in {time.monotonic() - start:.1f} s: {sorted(outcomes.items())}")
    assert tracebacks == [], f"{len(tracebacks)} tracebacks, first: {tracebacks[:3]}"
    assert outcomes.get("BundleError", 0) > 5000          # most mutations break the contract and are refused
