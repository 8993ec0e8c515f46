"""Every reader of user files goes through edgekit.core.limits before parsing (issue 32).

The test lists every call of a parser (json, numpy, yaml, toml, cv2 decoding) in edgekit's source and fails on one
it does not know: a new reader either goes through `edgekit.core.limits` (its function calls it, or one of the
checked readers below) or is listed as reading files edgekit wrote itself (caches, its own children's answers),
with the reason. A listed reader that no longer exists fails too, so the list stays true.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("edgekit", "export", "lite", "prune", "quantize")
PARSERS = {("json", "load"), ("json", "loads"), ("np", "load"), ("numpy", "load"), ("np", "fromfile"),
           ("yaml", "load"), ("yaml", "safe_load"), ("yaml", "parse"), ("yaml", "compose"), ("tomllib", "load"),
           ("tomllib", "loads"), ("tomli", "load"), ("tomli", "loads"), ("cv2", "imread"), ("cv2", "imdecode"),
           ("pickle", "load"), ("pickle", "loads"), ("Image", "open")}
# a function checks its input when it calls edgekit.core.limits or one of these checked readers
CHECKED = ("limits.", "read_npy(", "_npy_header(", "image_size(", "_check_events(")

# readers of files someone else may hand over: each must go through the limits (checked below)
USER_FILES = {
    "edgekit/contracts/settings.py:load_toml": "edgekit.toml, matrix files (MAX_CONFIG_BYTES)",
    "edgekit/core/images.py:decode_image": "images (header checked against the image limits first)",
    "edgekit/core/limits.py:parse_json": "every JSON file of a bundle, asset set, PIR program (the gate itself)",
    "edgekit/model/data.py:load_tensors": ".npz / .npy evaluation and calibration data (headers, zip directory)",
    "export/paddlex.py:_parse": "inference.yml (MAX_YML_BYTES, DEPTH, NODES)",
}
# readers of what edgekit wrote itself: caches keyed by content, its own child processes' answers, in-memory copies
OWN_FILES = {
    "edgekit/contracts/manifest.py:write_manifest": "the manifest text being written, parsed back to check it",
    "edgekit/core/proc.py:run_child_argv": "the answer line of edgekit's own child process",
    "edgekit/device/baseline.py:updated": "a deep copy of a document in memory",
    "edgekit/device/baseline.py:load": "the device suite's baseline store, written by edgekit",
    "edgekit/device/farm.py:run_device": "the result a node's edgekit wrote for this run",
    "edgekit/device/session.py:DeviceSession.launch": "outputs edgekit's runner wrote on the device",
    "edgekit/device/session.py:DeviceSession.evaluate.launch": "outputs edgekit's runner wrote on the device",
    "edgekit/matrix/cells.py:_cached": "a matrix row edgekit wrote",
    "edgekit/verify/counts.py:measure": "the instruction-count cache",
    "edgekit/verify/profile.py:measure": "the profile cache (edgekit's own, like the instruction-count cache)",
    "edgekit/verify/tier_c.py:_cached_run": "tier C's cache of the emulator's outputs",
    "export/_paddle3_child.py:run": "arrays the parent process wrote for this child",
    "export/_paddle3_child.py:export": "arrays the parent process wrote for this child",
    "export/_paddle3_child.py:main": "the parent's request",
    "export/_x2paddle_child.py:main": "the parent's request",
    "export/paddle3.py:load_outputs": "outputs the Paddle 3 child wrote",
    "export/pir_translate.py:translate": "the graph and parameters the Paddle 3 child described",
    "export/pir_translate.py:survey": "the graph and parameters the Paddle 3 child described",
    "lite/_opt_child.py:main": "the parent's request",
    "lite/_twin_child.py:main": "the parent's request (.npy data, no pickles)",
    "lite/icount.py:read_counts": "the counts edgekit's qemu plugin wrote",
    "lite/native.py:run_runner": "outputs edgekit's runner wrote",
    "lite/runtime.py:TwinProcess._answer": "the twin child's answer (.npy data, no pickles)",
    "prune/sensitivity.py:cached": "the pruning sensitivity cache",
    "quantize/search.py:_valid_entry": "the quantisation search cache",
    "quantize/search.py:_search": "the thresholds of the search's own calibration, in its cache or scratch",
    "quantize/ptq.py:requantize_int8": "the thresholds quantize_int8 wrote into the search's cache or scratch",
    "quantize/search.py:ScoreStore.get": "the quantisation search cache",
}


@functools.lru_cache(maxsize=1)
def _readers() -> dict[str, str]:
    """'path:Qualified.function' -> that function's source, for every function calling a parser."""
    found = {}
    for root in SOURCES:
        for path in sorted((REPO / root).rglob("*.py")):
            if "examples" in path.parts:
                continue
            source = path.read_text(encoding="utf-8")
            rel = path.relative_to(REPO).as_posix()
            stack: list[ast.AST] = []

            def visit(node: ast.AST) -> None:
                scoped = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                if scoped:
                    stack.append(node)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and isinstance(node.func.value, ast.Name) and (node.func.value.id, node.func.attr) in PARSERS:
                    functions = [n for n in stack if not isinstance(n, ast.ClassDef)]
                    name = ".".join(n.name for n in stack) or "<module>"
                    found[f"{rel}:{name}"] = ast.get_source_segment(source, functions[-1]) if functions else source
                for child in ast.iter_child_nodes(node):
                    visit(child)
                if scoped:
                    stack.pop()

            visit(ast.parse(source))
    return found


def test_every_reader_is_listed():
    found = _readers()
    unknown = sorted(set(found) - set(USER_FILES) - set(OWN_FILES))
    assert not unknown, (f"new readers {unknown}: route them through edgekit.core.limits and list them in USER_FILES, "
                         "or list them in OWN_FILES with why the file is edgekit's own")
    gone = sorted((set(USER_FILES) | set(OWN_FILES)) - set(found))
    assert not gone, f"listed readers that no longer exist (or no longer parse): {gone}"


@pytest.mark.parametrize("reader", sorted(USER_FILES))
def test_readers_of_user_files_go_through_the_limits(reader):
    source = _readers()[reader]
    if reader.startswith("edgekit/core/limits.py:"):
        return                       # the gate itself
    assert any(mark in source for mark in CHECKED), f"{reader} parses a user file without edgekit.core.limits"
