"""Seeded mutations of every file someone else can hand edgekit, fed to the readers of that file (issue 32).

Six kinds: a bundle's manifest, task.json, preprocess.json and golden index, a Paddle 3 PIR program and a PaddleX
inference.yml. A mutation is structural (a node of the parsed document deleted, replaced by an odd value, wrapped,
duplicated, a key added, a string or number nudged) or textual (the serialised bytes truncated, a byte flipped, a
hostile token inserted: 1e999, NaN, deep brackets, a NUL, invalid UTF-8). Bundle files are re-hashed into the
manifest, as an attacker who edits a file would do, so the readers get past the checksums.

A reader's outcome is "ok", the class name of the EdgekitError it raised (a one-line refusal), or "traceback"
(anything else). `bench/bench_mutations.py` runs 10,000 of each kind in child processes (a death by signal is
counted); `tests/unit/test_file_mutations.py` runs a lean share of them in CI.
"""

from __future__ import annotations

import copy
import json
import pickle
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from untrusted_bundles import make_bundle

ODD_VALUES = [None, True, False, 0, -1, 1, 2 ** 63, 10 ** 30, -2 ** 70, 1.5, 1e308, float("nan"), float("inf"), "",
              "x", "../x", "/etc/passwd", "v2.12", "golden/input_0.npy", "model.nb", "\0", "x" * 300, [], [0], [[[]]],
              {}, {"a": 1}, {"name": "x", "shape": [1], "dtype": "float32", "file": "model.nb"}, [-1, 1, 8, 8], ["x"],
              "int64", "NCHW", "NHWC", "bgr", "gray", [0.5, 0.5, 0.5], [255.0], [0, 0, 0, 0], 1e-300, -0.0, 65536,
              [8192, 8192], "1./255.", "detection", "classification", "ocr", "segmentation", {"kind": "detection"}]
TOKENS = ["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "\\u0000", "\0", "[" * 200, "{" * 200, '"', "\\", ",",
          "}", "]", ":", "*a", "&a ", "!!python/object:os.system", "\t", "\n- ", "..", "\xff\xfe", "é", "0x10"]


# ---------------------------------------------------------------- mutations

def _pick(document, rng: random.Random):
    """A random node by a random walk from the root: (parent, key) of it, or (None, None) for the root."""
    parent, key, node = None, None, document
    while isinstance(node, (dict, list)) and node and rng.random() < 0.8:
        keys = list(node) if isinstance(node, dict) else range(len(node))
        k = rng.choice(list(keys))
        parent, key, node = node, k, node[k]
    return parent, key


def mutate_value(document, rng: random.Random):
    """One structural mutation of a parsed JSON/YAML document (in place where it can; returns the document)."""
    parent, key = _pick(document, rng)
    node = document if parent is None else parent[key]
    op = rng.randrange(7)

    def put(value):
        nonlocal document
        if parent is None:
            document = value
        else:
            parent[key] = value

    if op == 0 and parent is not None:
        del parent[key]
    elif op == 1:
        put(copy.deepcopy(rng.choice(ODD_VALUES)))
    elif op == 2:
        put([node])
    elif op == 3 and isinstance(node, list):
        put(node + node if rng.random() < 0.5 else node[1:])
    elif op == 4 and isinstance(node, dict):
        node[repr(rng.choice(ODD_VALUES))[:20]] = copy.deepcopy(rng.choice(ODD_VALUES))
    elif isinstance(node, str):
        put(node[: rng.randrange(len(node) + 1)] + rng.choice(["/..", "X", "", " " * 50, "\0", "é"]))
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        put(rng.choice([-node, node * 1000, node + 1, 0, node * 1e300 if isinstance(node, float) else 2 ** 62]))
    else:
        put(copy.deepcopy(rng.choice(ODD_VALUES)))
    return document


def mutate_text(data: bytes, rng: random.Random) -> bytes:
    """One textual mutation of serialised bytes."""
    at = rng.randrange(len(data) + 1)
    op = rng.randrange(5)
    if op == 0:
        return data[:at]
    if op == 1 and data:
        at = min(at, len(data) - 1)
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]
    if op == 2:
        end = min(len(data), at + rng.randrange(1, 64))
        return data[:at] + data[at:end] * rng.randrange(2, 5) + data[end:]
    if op == 3:
        return data[:at] + data[at + rng.randrange(1, 16):]
    return data[:at] + rng.choice(TOKENS).encode("utf-8", "surrogateescape") + data[at:]


def mutated(document, dump: Callable[[object], bytes], rng: random.Random) -> bytes:
    """1-3 structural mutations of a copy of `document`, serialised; one in four is then mutated as text too."""
    doc = pickle.loads(pickle.dumps(document))          # a copy (much faster than deepcopy on a real PIR program)
    for _ in range(rng.randint(1, 3)):
        doc = mutate_value(doc, rng)
    try:
        data = dump(doc)
    except (TypeError, ValueError, OverflowError):
        data = dump(document)
    return mutate_text(data, rng) if rng.random() < 0.25 else data


def _json_bytes(value) -> bytes:
    return json.dumps(value, indent=1).encode("utf-8")     # NaN and Infinity as Python writes them: readers refuse


def _yaml_bytes(value) -> bytes:
    import yaml

    return yaml.safe_dump(value, allow_unicode=True, sort_keys=False).encode("utf-8")


# ---------------------------------------------------------------- kinds: where a mutation goes, who reads it

@dataclass
class Kind:
    name: str
    setup: Callable[[Path], "Case"]          # folder -> the files and readers of this kind


@dataclass
class Case:
    bases: list                              # documents to mutate (one picked per mutation)
    dump: Callable[[object], bytes]
    write: Callable[[bytes], None]           # put the mutated bytes in place (and re-hash what must be)
    read: Callable[[], None]                 # every reader of the file; raises EdgekitError when it refuses
    restore: Callable[[], None]


def _bundle_case(folder: Path, rel: str, edit_manifest: Callable[[dict, object], None] | None = None) -> Case:
    """A fake bundle (tests/unit/untrusted_bundles.py) whose file `rel` is mutated and re-hashed into the manifest."""
    from edgekit.build.bundle import MANIFEST, file_table

    bundle = make_bundle(folder)
    manifest_file = bundle / MANIFEST
    original_manifest = manifest_file.read_bytes()
    target = bundle / rel
    original = target.read_bytes()

    def write(data: bytes) -> None:
        target.write_bytes(data)
        manifest = json.loads(original_manifest)
        if edit_manifest is not None:
            try:
                edit_manifest(manifest, json.loads(data))
            except ValueError:
                pass
        manifest["files"] = file_table(bundle)
        manifest_file.write_text(json.dumps(manifest, indent=1), encoding="utf-8")

    def restore() -> None:
        target.write_bytes(original)
        manifest_file.write_bytes(original_manifest)

    return Case([json.loads(original)], _json_bytes, write, lambda: _bundle_readers(bundle, folder), restore)


def _bundle_readers(bundle: Path, folder: Path) -> None:
    """What inspect, parity (up to Paddle-Lite), run (up to Paddle-Lite, then the preprocessing) and package read."""
    from edgekit.consumers import inspection
    from edgekit.consumers.package import Platform, package
    from edgekit.consumers.predict import BundleModel

    inspection.describe(bundle)
    locked = inspection.locked(bundle, twin=True)
    for group in inspection.golden_groups(locked):
        inspection.golden_vectors(locked, group)
    model = BundleModel.load(bundle, runner=object())
    spec = model.spec
    if spec is not None and max(list(getattr(spec, "resize", None) or [0]) + [0]) <= 512:
        model.tensor(np.full((24, 32, 3), 128, np.uint8))
    package([bundle], Platform.linux, folder / "assets")


def _manifest(folder: Path) -> Case:
    from edgekit.build.bundle import MANIFEST

    bundle = make_bundle(folder)
    manifest_file = bundle / MANIFEST
    original = manifest_file.read_bytes()
    return Case([json.loads(original)], _json_bytes, manifest_file.write_bytes,
                lambda: _bundle_readers(bundle, folder), lambda: manifest_file.write_bytes(original))


def _golden_into_manifest(manifest: dict, golden: object) -> None:
    """The manifest's golden section is golden.json's content (bundle.write_golden): an attacker edits both."""
    if isinstance(golden, dict):
        manifest["golden"] = golden


def _with_bases(case: Case, extra: list) -> Case:
    case.bases.extend(extra)
    return case


def _task_bases() -> list:
    """task.json documents of every task kind, from the PaddleX descriptions edgekit reads (tests/data/paddlex)."""
    from edgekit.export import paddlex

    out = []
    for yml in sorted((Path(__file__).resolve().parents[1] / "data" / "paddlex").glob("*/inference.yml")):
        desc = paddlex.read_model_yml(yml)
        if desc.task:
            options = {k: v for k, v in desc.task.items() if k != "kind"}
            if desc.labels:
                options.setdefault("labels", list(desc.labels))
            out.append({"schema": "edgekit.task/1", "kind": desc.task["kind"], "primary": None, "options": options})
    return out


def _preprocess_bases() -> list:
    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.export import paddlex

    out = []
    for yml in sorted((Path(__file__).resolve().parents[1] / "data" / "paddlex").glob("*/inference.yml")):
        desc = paddlex.read_model_yml(yml)
        if desc.preprocess:
            out.append({"schema": "edgekit.preprocess/1", "inputs": ["x"],
                        "preprocess": PreprocessSpec.from_mapping(dict(desc.preprocess)).to_json()})
    return out


PIR_SMALL = {"base_code": {"magic": "pir", "trainable": True, "version": 1},
             "program": {"regions": [{"#": "region_0", "blocks": [{"#": "block_0", "args": [], "ops": [
                 {"#": "p", "A": [0, 1, 1, "linear_0.w_0"], "DA": [], "O": {"%": 1, "TT": {"#": "0.t_dtensor", "D": [
                     {"#": "0.t_f32"}, [4, 2], "NCHW", [], 0]}}},
                 {"#": "1.data", "A": [{"AT": {"#": "0.a_str", "D": "x"}, "N": "name"},
                                       {"AT": {"#": "1.a_intarray", "D": [-1, 4]}, "N": "shape"}],
                  "I": [], "O": [{"%": 2, "TT": {"#": "0.t_dtensor", "D": [{"#": "0.t_f32"}, [-1, 4], "NCHW", [], 0]}}]},
                 {"#": "1.matmul", "I": [{"%": 2}, {"%": 1}], "O": [{"%": 3}]},
                 {"#": "1.fetch", "I": [{"%": 3}], "O": [], "A": [{"AT": {"#": "0.a_str", "D": "out"}, "N": "name"}]},
             ]}]}]}}


def _pir(folder: Path, real: Path | None = None) -> Case:
    """A Paddle 3 model folder (inference.json + inference.pdiparams): what `build -m DIR` reads before Paddle 3 runs."""
    from edgekit.export import pir

    model = folder / "pir-model"
    model.mkdir(parents=True, exist_ok=True)
    program = model / "inference.json"
    bases = [PIR_SMALL] + ([json.loads(real.read_text(encoding="utf-8"))] if real is not None else [])
    program.write_text(json.dumps(PIR_SMALL))
    (model / "inference.pdiparams").write_bytes(b"\0" * 16)

    def read() -> None:
        if pir.is_pir_program(model):
            source = pir.locate(model, None)
            source.staged(folder / "staged")

    return Case(bases, lambda v: json.dumps(v).encode("utf-8"), program.write_bytes, read,
                lambda: program.write_text(json.dumps(PIR_SMALL)))


def _yml(folder: Path) -> Case:
    """A PaddleX inference.yml: read into edgekit's preprocess and task (what `build -m DIR` does with it)."""
    import yaml

    from edgekit.contracts.preprocess import PreprocessSpec
    from edgekit.export import paddlex
    from edgekit.tasks import make_task

    ymls = sorted((Path(__file__).resolve().parents[1] / "data" / "paddlex").glob("*/inference.yml"))
    bases = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in ymls]
    target = folder / "inference.yml"
    target.write_bytes(ymls[0].read_bytes())

    def read() -> None:
        for overridden in ((), ("preprocess",), ("task",)):
            desc = paddlex.read_model_yml(target, overridden=overridden)
            if desc.preprocess:
                PreprocessSpec.from_mapping(dict(desc.preprocess))
            if desc.task and desc.task.get("kind"):
                make_task(desc.task["kind"], {k: v for k, v in desc.task.items() if k != "kind"})

    return Case(bases, _yaml_bytes, target.write_bytes, read, lambda: target.write_bytes(ymls[0].read_bytes()))


def kinds(real_pir: Path | None = None) -> dict[str, Callable[[Path], Case]]:
    return {
        "manifest": _manifest,
        "task.json": lambda f: _with_bases(_bundle_case(f, "task.json"), _task_bases()),
        "preprocess.json": lambda f: _with_bases(_bundle_case(f, "preprocess.json"), _preprocess_bases()),
        "golden index": lambda f: _bundle_case(f, "golden/golden.json", _golden_into_manifest),
        "PIR json": lambda f: _pir(f, real_pir),
        "inference.yml": _yml,
    }


def run(case: Case, seed: int, start: int, count: int, progress: Callable[[int], None] = lambda i: None) -> dict:
    """Mutations start..start+count-1 of `case` (mutation i is seeded by (seed, i), so any one can be replayed):
    {"outcomes": {name: n}, "tracebacks": [first few]}."""
    from edgekit.core.errors import EdgekitError

    outcomes: dict[str, int] = {}
    tracebacks: list[str] = []
    for i in range(start, start + count):
        progress(i)
        rng = random.Random(seed * 1_000_003 + i)
        data = mutated(rng.choice(case.bases), case.dump, rng)
        try:
            case.write(data)
            case.read()
            outcome = "ok"
        except EdgekitError as error:
            outcome = type(error).__name__
        except Exception as exc:  # noqa: BLE001 -- what the harness counts: anything that is not an EdgekitError
            outcome = "traceback"
            if len(tracebacks) < 5:
                tracebacks.append(f"mutation {i}: {type(exc).__name__}: {str(exc)[:200]}")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    case.restore()
    return {"outcomes": outcomes, "tracebacks": tracebacks}
