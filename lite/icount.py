"""Instruction counts of Lite's ARM kernels: the QEMU plugin of native/plugin/ and its JSON.

qemu-user runs the real ARM kernels; the plugin (`libedgekit_icount.so`, host code) counts
the guest instructions each inference executes, by class, between the markers
edgekit-lite-run sets around every `engine.run()`. The same binary, model and input give
the same count on any host, loaded or not: a cost figure CI can gate on, unlike emulated
wall time. `build_plugin` builds it (cached by content); `parse_counts` is the one
reader of its file (schema edgekit.icount/1).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from edgekit.core import proc
from edgekit.core.atomic import publish_dir, staging_dir
from edgekit.core.errors import EmulationUnavailable, ToolError

from .cmake import NOT_BUILD_INPUTS, cmake_generator, native_dir, prune, tool_line, use_entry

ICOUNT_SCHEMA = "edgekit.icount/1"
CLASSES = ("simd_fp", "load_store", "branch", "other")   # disjoint, they sum to total; dot_product is part of simd_fp
FIELDS = ("total", *CLASSES, "dot_product")
LIBRARY = "libedgekit_icount.so"


@dataclass(frozen=True)
class InstructionCounts:
    """Guest instructions per inference, by class: one region per engine run, in the runner's order."""

    target: str                     # the plugin's guest: "aarch64" or "arm"
    classifier: str                 # "encoding" (aarch64) or "disassembly" (32-bit ARM)
    # the pass over the samples, one per chunk (the first includes Lite's first-run work)
    passes: tuple[dict[str, int], ...]
    warmups: tuple[dict[str, int], ...]
    timed: tuple[dict[str, int], ...]    # each {"total", "simd_fp", "load_store", "branch", "other", "dot_product"}
    profile: "BlockProfile | None" = None   # with run_runner(..., profile_region=N)


PROFILE_CLASSES = {"s": "simd_fp", "d": "simd_fp", "l": "load_store", "b": "branch", "o": "other"}  # d: dot product


@dataclass(frozen=True)
class BlockProfile:
    """One region's executed code, as the plugin saw it: each translated block (guest address of its first
    instruction, one class letter per instruction, PROFILE_CLASSES) with its executions inside the region. A block's
    instructions follow each other at 4 bytes (AArch64); their sum over blocks is the region's total."""

    region: int
    blocks: tuple[tuple[int, str, int], ...]
    ops: "OpSegments | None" = None          # with op boundaries (run_runner(..., op_boundaries=...))

    def total(self) -> int:
        return sum(len(classes) * runs for _, classes, runs in self.blocks)


@dataclass(frozen=True)
class OpSegments:
    """The profiled region split at the returns of Lite's outermost KernelBase::Launch calls (native/plugin/
    segments.h): segment k (k < ops) is the k-th op the runtime program ran, from the end of the previous op's kernel
    to the end of its own; segment `ops` is the region's tail. `runs`: (segment, block index in BlockProfile.blocks,
    executions), whose executions add up, block by block, to the block's."""

    ops: int                                  # outermost Launches that returned inside the region
    runs: tuple[tuple[int, int, int], ...]

    def blocks_of(self, segment: int, blocks: tuple[tuple[int, str, int], ...]) -> list[tuple[int, str, int]]:
        return [(blocks[b][0], blocks[b][1], n) for s, b, n in self.runs if s == segment]


def parse_counts(data: object, record: Mapping) -> InstructionCounts:
    """The plugin's JSON read against the runner's record of the same run: region i is the runner's i-th
    inference (pass chunks, then warm-ups, then timed runs), so the numbers must agree."""
    def bad(why: str) -> ToolError:
        return ToolError(f"instruction counts unusable: {why}", "rebuild native/ and its plugin (stale build?)")

    if not isinstance(data, dict) or data.get("schema") != ICOUNT_SCHEMA:
        raise bad(f"not an {ICOUNT_SCHEMA} document")
    regions = data.get("regions")
    if not isinstance(regions, list) or not all(isinstance(r, dict) for r in regions):
        raise bad("no region list")
    if data.get("open_regions") or data.get("unmatched_ends") or data.get("dropped_regions"):
        raise bad(f"unbalanced markers (open {data.get('open_regions')}, unmatched ends {data.get('unmatched_ends')}, "
                  f"dropped {data.get('dropped_regions')})")
    vcpus = data.get("vcpus")
    if isinstance(vcpus, int) and vcpus > 1:
        raise bad(f"the guest ran {vcpus} threads; counts are exact with one thread only")
    if any(r.get("depth") != 0 or not all(type(r.get(f)) is int and r[f] >= 0 for f in FIELDS) for r in regions):
        raise bad("a region is nested or lacks a class count")
    if any(r["total"] != sum(r[c] for c in CLASSES) or r["dot_product"] > r["simd_fp"] for r in regions):
        raise bad("a region's classes do not add up")
    runs = [len(record.get(k) or ()) for k in ("pass_ms", "warmup_ms", "iteration_ms")]
    if len(regions) != sum(runs):
        raise bad(f"{len(regions)} counted regions for {sum(runs)} runs (pass {runs[0]}, warm-up {runs[1]}, "
                  f"timed {runs[2]})")
    clean = tuple({f: r[f] for f in FIELDS} for r in regions)
    profile = _parse_profile(data.get("profile"), clean, bad) if "profile" in data else None
    return InstructionCounts(str(data.get("target")), str(data.get("classifier")), clean[:runs[0]],
                             clean[runs[0]:runs[0] + runs[1]], clean[runs[0] + runs[1]:], profile)


def _parse_profile(found: object, regions: tuple[dict, ...], bad) -> BlockProfile:
    """The plugin's per-block profile of one region, refused unless its blocks add up to that region's counts."""
    if not isinstance(found, dict) or not isinstance(found.get("blocks"), list):
        raise bad("the profile has no block list")
    region = found.get("region")
    if type(region) is not int or not 0 <= region < len(regions) or found.get("complete") is not True:
        raise bad(f"the profiled region {region!r} did not run to its end ({len(regions)} regions counted)")
    if found.get("lost_blocks"):
        raise bad(f"the plugin could not record {found['lost_blocks']} blocks (out of memory?)")
    blocks = []
    for entry in found["blocks"]:
        if (not isinstance(entry, list) or len(entry) != 3 or type(entry[0]) is not int or type(entry[2]) is not int
                or not isinstance(entry[1], str) or not entry[1] or set(entry[1]) - set(PROFILE_CLASSES)):
            raise bad(f"a profile block is malformed: {str(entry)[:80]}")
        blocks.append((entry[0], entry[1], entry[2]))
    profile = BlockProfile(region, tuple(blocks), _parse_ops(found.get("ops"), blocks, bad) if "ops" in found else None)
    want = regions[region]
    sums = dict.fromkeys(FIELDS, 0)
    for _, classes, runs in profile.blocks:
        for letter in classes:
            sums[PROFILE_CLASSES[letter]] += runs
            sums["dot_product"] += runs if letter == "d" else 0
    sums["total"] = sum(sums[c] for c in CLASSES)
    if sums != want:
        raise bad(f"the profile's blocks add up to {sums['total']:,} instructions, region {region} counted "
                  f"{want['total']:,} (classes {sums} vs {want})")
    return profile


def _parse_ops(found: object, blocks: list, bad) -> OpSegments:
    """The plugin's op segments, refused unless every Launch returned and each block's executions are split whole."""
    if not isinstance(found, dict) or not isinstance(found.get("runs"), list):
        raise bad("the op split has no run list")
    for field in ("segments", "entered", "open", "unmatched_exits", "lost"):
        if type(found.get(field)) is not int or found[field] < 0:
            raise bad(f"the op split lacks {field}")
    if found["lost"]:
        raise bad(f"the plugin could not record {found['lost']} op segment entries (out of memory?)")
    if found["open"] or found["unmatched_exits"] or found["entered"] != found["segments"] - 1:
        raise bad(f"Lite's kernel launches did not pair up inside the region ({found['entered']} entered, "
                  f"{found['segments'] - 1} returned, {found['open']} open, {found['unmatched_exits']} unmatched "
                  f"returns): wrong op_enter/op_exit addresses?")
    runs, per_block = [], [0] * len(blocks)
    for entry in found["runs"]:
        if (not isinstance(entry, list) or len(entry) != 3 or not all(type(v) is int for v in entry)
                or not 0 <= entry[0] < found["segments"] or not 0 <= entry[1] < len(blocks) or entry[2] <= 0):
            raise bad(f"an op segment entry is malformed: {str(entry)[:80]}")
        runs.append((entry[0], entry[1], entry[2]))
        per_block[entry[1]] += entry[2]
    if per_block != [b[2] for b in blocks]:
        wrong = next(i for i, (n, b) in enumerate(zip(per_block, blocks)) if n != b[2])
        raise bad(f"the op segments split block {wrong} into {per_block[wrong]:,} executions, it ran {blocks[wrong][2]:,}")
    return OpSegments(found["segments"] - 1, tuple(runs))


def plugin_key() -> tuple[str, dict]:
    """Hash of native/plugin/'s files, the host C compiler, cmake and the generator."""
    folder = native_dir() / "plugin"
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix not in NOT_BUILD_INPUTS):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    inputs = {"sources": digest.hexdigest(), "compiler": tool_line(["cc", "--version"]),
              "cmake": tool_line(["cmake", "--version"]), "generator": cmake_generator()}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest(), inputs


def build_plugin(cache_root: Path, *, timeout: float = 300) -> Path:
    """native/plugin/ built for this host (qemu loads it), cached under cache_root/native/icount-<key>; the .so."""
    for command, package in (("cmake", "cmake"), ("cc", "gcc")):
        if shutil.which(command) is None:
            raise EmulationUnavailable(f"missing {command} to build the instruction-counting plugin",
                                       f"apt-get install {package} (or run native/install-deps.sh)")
    key, inputs = plugin_key()
    folder = Path(cache_root).expanduser().absolute() / "native"
    final = folder / f"icount-{key[:16]}"
    library = final / LIBRARY
    use_entry(final)        # qemu loads it from there: no other process prunes it while this one may count
    if library.is_file():
        return library
    with (folder / f".{final.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if library.is_file():
            return library
        with staging_dir(folder, ".icount-") as scratch:
            steps = [["cmake", "-S", str(native_dir() / "plugin"), "-B", str(scratch), "-G", cmake_generator(),
                      "-DCMAKE_BUILD_TYPE=Release"], ["cmake", "--build", str(scratch)]]
            for argv in steps:
                done = proc.run(argv, timeout=timeout, what="cmake (icount plugin)")
                if done.returncode != 0:
                    raise ToolError(f"building native/plugin failed: {done.tail(4)}",
                                    "rerun by hand: cmake -S native/plugin -B BUILD_DIR && cmake --build BUILD_DIR")
            (scratch / "edgekit-build.json").write_text(json.dumps({"key": key, "inputs": inputs}, indent=2) + "\n")
            publish_dir(scratch, final, keep_existing=lambda entry: (entry / LIBRARY).is_file())
        prune(folder, "icount-", final)
    return library


CANONICAL_ROOT = Path("/tmp/edgekit-icount")   # fixed, so every guest-visible path has the same length on every host


@contextlib.contextmanager
def canonical_paths(build, runtime, nb_file: Path) -> Iterator[tuple]:
    """(build, runtime, nb_file, workdir) seen through symlinks in a fresh folder of fixed-length name.

    Why: the count moves with the lengths of the strings the guest holds (argv, environment, the paths the runner
    keeps), by ~0.1 % (measured: the same .nb from /tmp/ic/a/ and /tmp/ic/abcdefghijk/ counted 782,307 and
    781,548, alignment-dependent scalar code). run_runner gives the counted guest an empty environment; here the
    runner, Lite's library folder, the shim, the model and the work folder get paths of one length everywhere.
    """
    CANONICAL_ROOT.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="r", dir=CANONICAL_ROOT))
    try:
        links = {"edgekit-lite-run": build.runner, "lib": runtime.lib_dir, "model.nb": Path(nb_file).absolute()}
        if build.shim is not None:
            links["shim.so"] = build.shim
        for name, target in links.items():
            (folder / name).symlink_to(target)
        seen_build = dataclasses.replace(build, runner=folder / "edgekit-lite-run",
                                         shim=folder / "shim.so" if build.shim is not None else None)
        yield seen_build, dataclasses.replace(runtime, lib_dir=folder / "lib"), folder / "model.nb", folder / "work"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def read_counts(path: Path, record: Mapping, what: str) -> InstructionCounts:
    if not path.is_file():
        raise ToolError(f"{what}: the counting plugin wrote no {path.name}", "check qemu's stderr (plugin not loaded?)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ToolError(f"{what}: unreadable instruction counts ({exc})", "rerun; report it if it persists") from None
    return parse_counts(data, record)
