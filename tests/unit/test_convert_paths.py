"""One conversion path: outside lite/, a program reaches paddle_lite_opt only through `lite.convert_safe`
(lite/safe.py: the rewrites opt needs, then opt, then the flatten retry). A second path that calls `lite_safe` and
`lite.convert` itself loses the retry, as the INT8 search's cost counter and tier C's FP32 reference did."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"lite/safe.py", "lite/rewrite.py", "lite/opt.py", "lite/__init__.py",
           # the latency fit's fixed recipe (x86 rewrites for all five models, no ARM speed-ups): its stored counts
           # (tests/data/costs/bench_costs_counts.json) are measured that way
           "bench/bench_costs.py"}
FORBIDDEN = {"convert", "lite_safe"}          # what only lite/safe.py may call
LITE_MODULES = {"edgekit.lite", "edgekit.lite.opt", "edgekit.lite.rewrite", "lite", "lite.opt", "lite.rewrite"}


def uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each import of `convert`/`lite_safe` from the lite package and each `lite.convert(...)` /
    `lite_safe(...)` call in `tree`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = ("." * node.level) + (node.module or "")
            inside_lite = module in LITE_MODULES or (node.level and module.lstrip(".") in ("opt", "rewrite", ""))
            found += [(node.lineno, f"from {module} import {a.name}") for a in node.names
                      if inside_lite and a.name in FORBIDDEN]
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in FORBIDDEN and isinstance(func.value, ast.Name) \
                    and func.value.id in ("lite", "opt", "rewrite"):
                found.append((node.lineno, f"{func.value.id}.{func.attr}(...)"))
            elif isinstance(func, ast.Name) and func.id == "lite_safe":
                found.append((node.lineno, "lite_safe(...)"))
    return found


def test_only_lite_safe_converts_a_program():
    found = []
    for folder in ("edgekit", "export", "quantize", "lite", "prune", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name not in ALLOWED:
                found += [f"{name}:{line}: {what}" for line, what in uses(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == [], "convert through lite.convert_safe:\n" + "\n".join(found)


def test_the_guard_sees_each_way_in():
    text = ("from edgekit.lite.opt import convert\nfrom edgekit.lite import (read_header,\n    convert)\n"
            "from .rewrite import lite_safe\nlite.convert(m)\nlite_safe(m)\nfrom edgekit.lite import convert_safe\n")
    assert [line for line, _ in uses(ast.parse(text))] == [1, 2, 4, 5, 6]
