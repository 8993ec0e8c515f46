"""Every dataclass and NamedTuple field in edgekit's packages says what it holds (issue 33, "typed all the way").

A field typed `object` or `Any`, a bare `Mapping`/`dict`, or an untyped JSON report (`Mapping[str, Json]`, the
old `Report`) hides the shape its readers depend on: they index it by key, and nothing checks that the writer
still writes that key. Fields are read from the source (no import: the stage folders import Paddle), module-level
aliases are followed (`Report = Mapping[str, Json]` is caught where it is used), and annotations under
`if TYPE_CHECKING:` count like any other.

A report's figures that no stage reads, written into the manifest as they came, are a frozen JSON object
(`edgekit.model.reports.Written`): allowed only in that module, whose `to_json` gives the manifest its JSON back.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("edgekit", "export", "lite", "quantize", "prune")
OPEN = {"object", "Any"}                                  # anything at all
UNTYPED_JSON = {"Json", "Report"}                         # the old JSON report aliases
BARE = {"Mapping", "MutableMapping", "dict", "Dict"}      # a mapping of what to what?
FROZEN_JSON, REPORTS = "Written", "edgekit/model/reports.py"

# Fields open by nature, each with the reason.
ALLOWED = {
    "edgekit/core/executors.py:Task.fn": "any picklable callable: the executor runs what callers hand it",
    "edgekit/core/executors.py:Outcome.value": "whatever the task returned (Executor.run is not generic)",
    "edgekit/build/record.py:StageOutput.artifacts": "any record field's value, by field name (the record's history)",
    "edgekit/core/proc.py:ChildAnswer.*": "a child process's JSON answer: each caller reads its own child's",
    "edgekit/model/passes.py:PassResult.facts": "each pass's own facts (the record types those it keeps: Geometry, "
                                                "NmsDecision, Folding in edgekit/model/reports.py)",
    "edgekit/model/passes.py:PassRecord.facts": "each pass's own facts, as PassResult.facts",
    "edgekit/contracts/task.py:TaskFile.options": "a task's free options: each task kind reads its own",
    "edgekit/contracts/files.py:MapOf.value": "a schema node: any value spec of the schema language",
    "edgekit/contracts/files.py:Nullable.value": "a schema node: any value spec of the schema language",
    "edgekit/contracts/settings.py:TaskConfig.options": "a task's free options: each task kind reads its own",
    "edgekit/tasks/truth.py:Truth.meta": "a truth file's free metadata (generator, seed): nothing reads it",
    "export/paddlex.py:ModelDescription.*": "a PaddleX inference.yml section as the file holds it",
}

# Known shapes not typed yet (issue 33 is under way): the file formats are typed with the contracts split (a typed
# Manifest, golden, runner record and baseline: another change), the JSON reports each by its own change. Listed one
# by one so nothing new joins them; the test fails when one is typed and still listed.
PENDING = {
    "edgekit/contracts/manifest.py:Manifest.document": "contracts: the document as read, beside the typed fields",
    "edgekit/contracts/golden.py:GoldenTolerances.floors": "contracts: a task's golden floors (detections, masks)",
    "edgekit/device/preflight.py:Prepared.info": "contracts split (the manifest's facts about a bundle)",
    "edgekit/device/farm.py:DeviceRun.baseline": "contracts split (a device baseline file)",
    "lite/native.py:RunnerResult.record": "contracts split (the runner's record, edgekit.runner/1)",
    "edgekit/verify/shards.py:ShardResult.record": "contracts split (the runner's record, edgekit.runner/1)",
    "edgekit/device/results.py:CellResult.*": "the device suite's report, cell by cell (docs/device-suite.md)",
    "edgekit/device/results.py:SuiteResult.settings": "the device suite's report",
    "edgekit/device/results.py:SuiteResult.versions": "the device suite's report",
    "edgekit/matrix/cells.py:MatrixResult.rows": "the matrix report's rows",
    "edgekit/model/artifacts.py:StaticModel.check": "a reference check's figures (the pass manager's SameCheck)",
    "edgekit/model/artifacts.py:LiteModel.rewrites": "the Lite rewrites' reports (the pass manager's passes)",
    "export/legalize.py:Legalised.rewrites": "the legalisation's rewrites (the pass manager's passes)",
    "edgekit/model/parity.py:ParityReport.extra": "parity's per-tier extras",
    "prune/report.py:PruneReport.sensitivity": "the pruning sensitivity table",
}


def _listed(where: str, table: dict) -> str | None:
    """The entry of `table` naming `where` (`file:Class.field`, or `file:Class.*` for every field of the class)."""
    if where in table:
        return where
    whole = where.rsplit(".", 1)[0] + ".*"
    return whole if whole in table else None


def _annotation(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return ast.parse(node.value, mode="eval").body
    return node


def _aliases(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level `Name = <type expression>` assignments (and `Name: TypeAlias = ...`)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def problems(annotation: ast.expr, aliases: dict[str, ast.expr], seen: frozenset = frozenset()) -> set[str]:
    """What is open, bare or untyped JSON in `annotation` (at any depth, through module aliases)."""
    found: set[str] = set()

    def visit(node: ast.expr, subscripted: bool = False) -> None:
        node = _annotation(node)
        if isinstance(node, ast.Subscript):
            visit(node.value, subscripted=True)
            visit(node.slice)
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in OPEN:
                found.add(name)
            elif name in UNTYPED_JSON:
                found.add(f"untyped JSON ({name})")
            elif name in BARE and not subscripted:
                found.add(f"bare {name}")
            elif name == FROZEN_JSON:
                found.add(FROZEN_JSON)
            elif isinstance(node, ast.Name) and name in aliases and name not in seen:
                found.update(problems(aliases[name], aliases, seen | {name}))
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    visit(child)

    visit(annotation)
    return found


def _is_record(cls: ast.ClassDef) -> bool:
    decorators = [ast.unparse(d) for d in cls.decorator_list]
    bases = [ast.unparse(b) for b in cls.bases]
    return any(d.split("(")[0].endswith("dataclass") for d in decorators) or any(b.endswith("NamedTuple") for b in bases)


def fields():
    """(where, problems) for every field of every dataclass and NamedTuple in edgekit's packages."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            tree = ast.parse(path.read_text(encoding="utf-8"))
            aliases = _aliases(tree)
            for cls in ast.walk(tree):
                if not isinstance(cls, ast.ClassDef) or not _is_record(cls):
                    continue
                for stmt in cls.body:
                    if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                        continue
                    annotation = _annotation(stmt.annotation)
                    if ast.unparse(annotation).startswith(("ClassVar", "typing.ClassVar")):
                        continue
                    found = problems(annotation, aliases)
                    if rel == REPORTS:
                        found.discard(FROZEN_JSON)
                    yield f"{rel}:{cls.name}.{stmt.target.id}", ast.unparse(annotation), found


def test_no_field_is_open_bare_or_untyped_json():
    bad = [f"{where}: {text} ({', '.join(sorted(found))})" for where, text, found in fields()
           if found and not _listed(where, ALLOWED) and not _listed(where, PENDING)]
    assert bad == [], "fields to type (or justify in ALLOWED):\n" + "\n".join(bad)


def test_the_lists_only_hold_fields_that_need_them():
    used = {_listed(where, table) for where, _, found in fields() if found for table in (ALLOWED, PENDING)}
    stale = sorted((set(ALLOWED) | set(PENDING)) - used)
    assert stale == [], f"typed now (or gone): remove from ALLOWED / PENDING: {stale}"
    assert not set(ALLOWED) & set(PENDING)


def test_the_checker_sees_what_it_must():
    aliases = _aliases(ast.parse("Json = Union[None, str, Mapping[str, 'Json']]\nReport = Mapping[str, Json]\n"
                                 "Rows = Mapping[str, tuple[int, ...]]\n"))
    def check(text: str) -> set[str]:
        return problems(ast.parse(text, mode="eval").body, aliases)

    assert check("object | None") == {"object"} and check("Callable[..., Any]") == {"Any"}
    assert check("Report | None") == {"untyped JSON (Report)"} and check("'Mapping[str, Json]'") == {"untyped JSON (Json)"}
    assert check("Mapping") == {"bare Mapping"} and check("tuple[dict, ...]") == {"bare dict"}
    assert check("dict[str, float]") == set() and check("Rows | None") == set() and check("Mapping[str, int]") == set()
    assert check("Written") == {"Written"}          # a frozen JSON object outside the reports module
