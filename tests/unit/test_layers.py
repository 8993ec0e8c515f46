"""The import order of edgekit's packages: each layer imports only itself and the layers below it, no module imports
itself back through others (top-level or inside a function), and no module reaches for another's private names.

An import under `if TYPE_CHECKING:` names a type for annotations and never runs: it must still go down the layers,
but it makes no cycle (the shards' job names the Emulator whose `run` starts the shards).

The layers, lowest first (docs/architecture.md draws the same table):"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"edgekit": ROOT / "edgekit", "edgekit.export": ROOT / "export", "edgekit.quantize": ROOT / "quantize",
           "edgekit.lite": ROOT / "lite", "edgekit.prune": ROOT / "prune"}
LAYERS = (
    ("edgekit.core",),                          # errors, files, processes, limits, tables, executors
    ("edgekit.contracts",),                     # the file formats and the settings
    ("edgekit.tasks",),                         # what outputs mean: metrics and post-processing
    ("edgekit.model",),                         # the model artifacts, samples, runners, the one checker
    ("edgekit.export", "edgekit.lite", "edgekit.quantize", "edgekit.prune"),   # the stages' own folders
    ("edgekit.verify",),                        # tiers A-C, the emulator, counts
    ("edgekit.build",),                         # config, record, stages, pipeline, manifest, bundle
    ("edgekit.consumers",),                     # run, package, inspect, bench
    ("edgekit.device", "edgekit.matrix", "edgekit.examples"),
    ("edgekit.cli", "edgekit"),
)


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if package == "edgekit" and parts[0] in ("export", "quantize", "lite", "prune"):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def layer_of(module: str) -> int:
    best = None
    for rank, packages in enumerate(LAYERS):
        for package in packages:
            if module == package or module.startswith(package + "."):
                if best is None or len(package) > best[1]:
                    best = (rank, len(package))
    assert best is not None, f"{module} is in no layer: add its package to LAYERS"
    return best[0]


def _typing_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) blocks."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            found.update(id(n) for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return found


def _imports(module: str, path: Path, runtime_only: bool = False):
    """(imported module, imported name or None, line) for every import of an edgekit module, anywhere in the file
    (`runtime_only`: not those under `if TYPE_CHECKING:`)."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _typing_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[:None if is_package else -1]
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target not in MODULES:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub, None, node.lineno) if sub in MODULES else (target, alias.name, node.lineno)


GRAPH = {m: sorted({t for t, _, _ in _imports(m, p) if t != m}) for m, p in MODULES.items()}
RUNTIME_GRAPH = {m: sorted({t for t, _, _ in _imports(m, p, runtime_only=True) if t != m}) for m, p in MODULES.items()}


def test_every_import_goes_down_the_layers():
    upward = [f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
              for m, targets in GRAPH.items() for t in targets
              if layer_of(t) > layer_of(m) and not m.startswith(t + ".") and t != "edgekit"]
    assert upward == [], "\n".join(upward)


def test_no_import_cycles():
    """Tarjan's strongly connected components over every import that runs, including those inside functions."""
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in RUNTIME_GRAPH.get(v, ()):
            if w.startswith(v + ".") or v.startswith(w + "."):
                continue            # a package and its own modules (__init__ re-exports)
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(RUNTIME_GRAPH):
        if module not in index:
            visit(module)
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_module_uses_another_modules_private_names():
    found = []
    for module, path in MODULES.items():
        aliases = {}
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__") and node.module != "__future__":
                        target = {t for t, n, line in _imports(module, path) if n == alias.name and line == node.lineno}
                        if target and target != {module}:
                            found.append(f"{module}:{node.lineno} imports {alias.name} from {target.pop()}")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    aliases[alias.asname or alias.name.split(".")[-1]] = alias.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.startswith("_") \
                    and not node.attr.startswith("__") and node.value.id in aliases:
                imported = {t for t, n, _ in _imports(module, path) if n is None and t.endswith("." + node.value.id)
                            or (n == node.value.id and f"{t}.{n}" in MODULES)}
                if imported:
                    found.append(f"{module}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert found == [], "\n".join(found)


def test_the_layers_cover_every_package():
    for module in MODULES:
        layer_of(module)


def test_the_architecture_page_maps_every_folder_to_its_layer():
    """docs/architecture.md's layout table names every package folder, in the layer LAYERS gives it."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].startswith("`") and cells[0].isdigit():
            rows[cells[1].strip("`")] = int(cells[0])
    folders = {f"edgekit/{p.name}/" for p in (ROOT / "edgekit").iterdir() if (p / "__init__.py").is_file()}
    folders |= {f"{name}/" for name in ("export", "lite", "quantize", "prune")}
    assert folders | {"edgekit/cli.py"} == set(rows), sorted(folders ^ set(rows))
    for folder, layer in rows.items():
        module = "edgekit." + folder.removeprefix("edgekit/").strip("/").removesuffix(".py").replace("/", ".")
        assert layer_of(module) == layer, (folder, layer, layer_of(module))


def test_a_type_only_import_counts_for_the_layers_but_makes_no_cycle():
    assert "edgekit.verify.emulator" in GRAPH["edgekit.verify.shards"]          # named for ShardJob's annotations
    assert "edgekit.verify.emulator" not in RUNTIME_GRAPH["edgekit.verify.shards"]
    assert "edgekit.verify.shards" in RUNTIME_GRAPH["edgekit.verify.emulator"]  # Emulator.run starts the shards
