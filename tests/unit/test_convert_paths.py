"""One conversion path: outside lite/, a program reaches paddle_lite_opt only through `lite.convert_safe`
(lite/safe.py: the rewrites opt needs, then opt, then the flatten retry). A second path that calls `lite_safe` and
`lite.convert` itself loses the retry, as the INT8 search's cost counter and tier C's FP32 reference did."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"lite/safe.py", "lite/rewrite.py", "lite/opt.py", "lite/__init__.py"}
CALLS = re.compile(r"\blite_safe\(|\blite\.convert\(|\bfrom edgekit\.lite import convert\b|\bfrom \.opt import convert\b")


def test_only_lite_safe_converts_a_program():
    found = []
    for folder in ("edgekit", "export", "quantize", "lite", "prune"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in ALLOWED:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if CALLS.search(line) and not line.lstrip().startswith("#"):
                    found.append(f"{name}:{number}: {line.strip()}")
    assert found == [], "convert through lite.convert_safe:\n" + "\n".join(found)
