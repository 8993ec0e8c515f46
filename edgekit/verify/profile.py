"""Where one inference's instructions go: each counted instruction attributed to the function it executes in, and the
functions grouped into op kinds (INT8 GEMM/conv, depthwise, FP32 GEMM, conversions, activations, ...).

The counting plugin (native/plugin/icount.c, `profile=N`) reports every block the profiled region executed, by guest
address; the runner's record says where the guest's dynamic loader mapped each library (`code_maps`, read from
/proc/self/maps after the runs). A library's ELF symbol table then names the function at each address. Lite's
shipped library is stripped, so the profile runs the unstripped build of the same tag (`symbols/` beside the
runtime: `symbols_runtime`); its layout differs, its counts barely (docs/costs.md). The profile's rows add up to the
region's counted total exactly (`attribute` refuses otherwise), and the same bundle gives the same profile on every
run: the plugin's counts are deterministic and the attribution is pure.

Per op: Lite's RuntimeProgram::Run runs the main block's ops in program order (feed and fetch skipped), each through
KernelBase::Launch(). The plugin is given Launch's entry and the return points of its call sites (`launch_points`,
at the load address a first run finds) and splits the profile at each return of an outermost Launch; op k of the
split is the k-th op of the `.nb`'s program that runs (lite/nbfile.program_ops), from the end of the previous op's
kernel (Lite's loop step, the op's InferShape) to the end of its own.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from edgekit.core.errors import ConfigError, EmulationUnavailable, ToolError
from edgekit.verify.counts import sample_digest

SCHEMA = "edgekit.profile/2"
SYMBOLS_ENV = "EDGEKIT_LITE_ARM_SYMBOLS"
LITE_LIBRARY = "libpaddle_light_api_shared.so"
TOP_FUNCTIONS = 25        # the text table's function rows; the rest is one row, so the rows still add up
TOP_OPS = 60              # the text table's op rows (the largest, in program order); the rest is one row
OP_FUNCTIONS = 3          # functions listed per op
LAUNCH = "_ZN6paddle4lite10KernelBase6LaunchEv"   # paddle::lite::KernelBase::Launch(): one call per op run

# op kinds, first match wins, on "library:function" (demangled, without parameters). Lite's kernels are named by
# precision (`..._int8`, `<signed char>`, sdot), so the INT8 rows come before the float ones they would also match.
KINDS: tuple[tuple[str, str, str], ...] = (
    ("conversion", "quantize/dequantize/calib (INT8<->float)",
     r"fp32_to_int8|int8_to_fp32|int32_to_int8|int32_to_fp32|int8_to_int32|quantizetensor|calib|quantiz|dequant"),
    ("depthwise", "depthwise conv", r"depthwise|conv_dw|_dw\b|_dw_|dw_conv|nxwc8_int8_dw"),
    ("int8_gemm", "INT8 GEMM/conv", r"(?=.*(?:int8|int16|sdot|signed char>|<int>|precisiontype\)2))"
                                    r"(?=.*(?:gemm|gemv|conv|sdot|pack|fc|matmul|_trans|im2col|col2im|sparse))"),
    ("fp32_gemm", "FP32 GEMM/conv",
     r"sgemm|sgemv|gemm|gemv|prepack|loadb|packb|winograd|conv_3x3s|conv_\w*direct|im2col|col2im|conv_compute|"
     r"conv2dtranspose|"
     r"input_trans|output_trans|weight_trans|fc_|conv_1x1|matmul"),
    ("softmax", "softmax", r"softmax"),
    ("activation", "activation",
     r"act_|relu|sigmoid|swish|hard_swish|hardswish|tanh|gelu|prelu|leaky|clip|\bexp|\blog\b|erf"),
    ("layout", "layout/transpose/concat", r"transpose|concat|split|slice|reshape|flatten|layout|nchw|nhwc|"
     r"write_to_output|"
     r"\bpad|gather|stack|squeeze|shuffle"),
    ("elementwise", "elementwise/scale", r"elementwise|scale|\badd\b|\bmul\b"),
    ("pool_norm", "pooling/normalisation/reduce", r"pool|norm|reduce|mean"),
    ("resize", "resize/interpolate", r"interp|resize|upsample|nearest|bilinear"),
    ("memcpy", "memcpy/memset", r"memcpy|memmove|memset|bzero"),
    ("runtime", "thread/runtime overhead",
     r"^libgomp|^ld-linux|^libstdc\+\+|^libgcc|gomp|\bomp_|malloc|free\b|calloc|realloc|operator new|"
     r"operator delete|pthread|__aarch64_|_dl_|runtimeprogram|instruction::|kernelbase|tensorlite|\bstd::|"
     r"context|buffer|targetwrapper|ddim|scope|variable|lite_api|predictor|edgekit|infershape|oplite|plt stubs|"
     r"memcmp|strlen|strcmp|std::string|std::operator==|"
     r"\(local function"),
)
KIND_LABELS = dict([(k, label) for k, label, _ in KINDS] + [("other", "other")])
_NAMESPACES = re.compile(r"paddle::lite(?:_api)?::|arm::math::|kernels::arm::")
_KIND_PATTERNS = tuple((k, re.compile(p)) for k, _, p in KINDS)
INT8_PATTERN = re.compile(r"int8|int16|int32|sdot|signed char|<int>|precisiontype\)2")
KERNEL_KINDS = {"depthwise", "int8_gemm", "fp32_gemm", "softmax", "activation", "layout", "elementwise", "pool_norm",
                "resize"}
PRECISIONS = ("int8", "float", "conversion", "runtime")


def kind_of(library: str, function: str) -> str:
    """The op kind of one function of one library (a file's base name), by KINDS."""
    text = f"{library}:{_NAMESPACES.sub('', function)}".lower()
    if library.startswith("libc.so") and re.search(r"mem(cpy|move|set)|bzero", text):
        return "memcpy"
    for kind, pattern in _KIND_PATTERNS:
        if pattern.search(text):
            return kind
    return "other"


def precision_of(kind: str, function: str) -> str:
    """int8 (integer kernels), float (float kernels), conversion (the work INT8 adds between INT8 and float
    segments) or runtime (copies, threads, Lite's program loop, what no kernel claims)."""
    if kind == "conversion":
        return "conversion"
    if kind == "int8_gemm":
        return "int8"
    if kind in KERNEL_KINDS:
        return "int8" if INT8_PATTERN.search(function.lower()) else "float"
    return "runtime"


# ----------------------------------------------------------------- ELF symbols (64-bit little-endian)

@dataclass(frozen=True)
class Symbols:
    """A library's functions, sorted by address (file virtual addresses), and its loadable segments."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]
    names: tuple[str, ...]
    segments: tuple[tuple[int, int, int, int], ...]   # PT_LOAD (p_offset, p_vaddr, p_filesz, p_flags)

    def lookup(self, vaddr: int) -> str | None:
        at = bisect.bisect_right(self.starts, vaddr) - 1
        if at < 0:
            return None
        # a function of size 0 (an assembler label) reaches to the next symbol
        if vaddr < self.ends[at]:
            return self.names[at]
        return None

    def bias(self, start: int, offset: int, end: int) -> int | None:
        """Load bias of an executable mapping [start, end) of the file at `offset`: vaddr = address - bias."""
        code = [s for s in self.segments if s[3] & 1]          # PF_X
        for p_offset, p_vaddr, _, _ in code:                   # the segment starts inside the mapping
            if offset <= p_offset < offset + (end - start):
                return start + (p_offset - offset) - p_vaddr
        for p_offset, p_vaddr, p_filesz, _ in code:            # the mapping starts inside the segment
            if p_offset <= offset < p_offset + p_filesz:
                return start + (p_offset - offset) - p_vaddr
        return None


def read_symbols(path: Path) -> Symbols:
    """Function symbols of a 64-bit little-endian ELF file: .symtab when it has one, else .dynsym; plus the functions
    only .eh_frame knows (a stripped libc's local memcpy variants, malloc internals), named by address, and the PLT."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ToolError(f"{path} is not a 64-bit little-endian ELF file", "profiles read arm64 libraries only")
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
    segments = []
    for i in range(phnum):
        p_type, p_flags, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            segments.append((p_offset, p_vaddr, p_filesz, p_flags))
    # (sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info, sh_addralign, sh_entsize)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4] if shstrndx < len(sections) else 0

    def section_name(s) -> str:
        return data[names_at + s[0]:data.index(b"\0", names_at + s[0])].decode("latin-1") if names_at else ""

    named = {section_name(s): s for s in sections}
    by_type = {s[1]: s for s in sections}
    table = by_type.get(2) or by_type.get(11)          # SHT_SYMTAB, else SHT_DYNSYM
    found: dict[int, tuple[int, str]] = {}
    if table is not None:
        strtab = sections[table[6]]
        strings = data[strtab[4]:strtab[4] + strtab[5]]
        for at in range(table[4], table[4] + table[5], 24):
            st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, at)
            if st_info & 0xF not in (2, 10) or st_shndx == 0 or st_value == 0:   # STT_FUNC, STT_GNU_IFUNC
                continue
            name = strings[st_name:strings.index(b"\0", st_name)].decode("utf-8", "replace")
            if st_value not in found or (st_size, not name.startswith("_")) > (found[st_value][0], True):
                found[st_value] = (st_size, name)
    if ".plt" in named:
        plt = named[".plt"]
        found.setdefault(plt[3], (plt[5], "(PLT stubs)"))
    if ".eh_frame" in named:
        frame = named[".eh_frame"]
        for start, size in _fde_ranges(data[frame[4]:frame[4] + frame[5]], frame[3]):
            if start and start not in found:
                found[start] = (size, f"(local function {start:#x})")
    starts = sorted(found)
    ends = []
    for i, start in enumerate(starts):
        size = found[start][0]
        nxt = starts[i + 1] if i + 1 < len(starts) else start + 4
        ends.append(min(start + size, nxt) if size else nxt)
    return Symbols(tuple(starts), tuple(ends), tuple(found[s][1] for s in starts), tuple(segments))


def _fde_ranges(frame: bytes, address: int) -> list[tuple[int, int]]:
    """(pc_begin, pc_range) of every FDE in an .eh_frame section loaded at `address`."""
    def uleb(at: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = frame[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, at

    def pointer(at: int, encoding: int) -> tuple[int, int]:
        fmt = {0x00: "<Q", 0x03: "<I", 0x04: "<Q", 0x0B: "<i", 0x0C: "<q", 0x02: "<H", 0x0A: "<h"}[encoding & 0x0F]
        value, = struct.unpack_from(fmt, frame, at)
        if encoding & 0x70 == 0x10:                      # pc-relative
            value += address + at
        return value & 0xFFFFFFFFFFFFFFFF, at + struct.calcsize(fmt)

    encodings: dict[int, int] = {}
    out, at = [], 0
    try:
        while at + 8 <= len(frame):
            length, = struct.unpack_from("<I", frame, at)
            if length == 0 or length == 0xFFFFFFFF:
                break
            id_at = at + 4
            cie_id, = struct.unpack_from("<I", frame, id_at)
            if cie_id == 0:
                end = frame.index(b"\0", id_at + 5)
                augmentation = frame[id_at + 5:end].decode("latin-1")
                p = end + 1
                _, p = uleb(p)                           # code alignment
                _, p = uleb(p)                           # data alignment (sleb; only skipped)
                p = p + 1 if frame[id_at + 4] == 1 else uleb(p)[1]   # return register
                encoding = 0x00
                if augmentation.startswith("z"):
                    _, p = uleb(p)
                    for char in augmentation[1:]:
                        if char == "R":
                            encoding = frame[p]
                            p += 1
                        elif char == "P":
                            _, p = pointer(p + 1, frame[p])
                        elif char == "L":
                            p += 1
                encodings[at] = encoding
            else:
                encoding = encodings.get(id_at - cie_id, 0x1B)
                begin, p = pointer(id_at + 4, encoding)
                size, _ = pointer(p, encoding & 0x0F)
                out.append((begin, size))
            at = id_at + length
    except (struct.error, IndexError, KeyError, ValueError):
        pass                                             # a malformed tail: keep what was read
    return out


def demangle(names: Sequence[str], *, parameters: bool = False) -> dict[str, str]:
    """C++ names demangled by c++filt (binutils), without parameter lists unless `parameters`; names as they are
    without it."""
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return {n: n for n in names}
    done = subprocess.run([tool] + ([] if parameters else ["-p"]), input="\n".join(names) + "\n",
                          capture_output=True, text=True, timeout=120, check=False)
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != len(names):
        return {n: n for n in names}
    return {n: (d if parameters else _tidy(d)) for n, d in zip(names, lines)}


def _tidy(name: str) -> str:
    """`void paddle::lite::arm::math::gemm_prepack_int8<signed char> [clone ._omp_fn.0]` without the return type."""
    name = re.sub(r"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> ?>", "std::string",
                  name)
    name = name.replace("std::char_traits<char>, std::allocator<char>", "...")
    name = re.sub(r"^(?:void|int|float|bool|long|unsigned|char|signed char|double) (?=[\w:]+[<:])", "", name)
    return name.replace(" [clone ", " [").strip()


# ----------------------------------------------------------------- attribution

@dataclass(frozen=True)
class Mapping_:
    start: int
    end: int
    library: str
    bias: int
    symbols: Symbols


def load_maps(code_maps: Iterable[Mapping], resolved: Mapping[str, int] | None = None,
              read=read_symbols) -> list[Mapping_]:
    """The runner's `code_maps` with each file's symbols and load bias (files read once); `resolved` (the runner's
    record: memcpy & co. -> the address their implementation runs at) names those local functions."""
    cache: dict[str, Symbols | None] = {}
    out = []
    for entry in code_maps:
        path = str(entry.get("path", ""))
        if path not in cache:
            try:
                cache[path] = read(Path(path))
            except (OSError, ToolError, struct.error, ValueError):
                cache[path] = None
        symbols = cache[path]
        start, end, offset = int(entry["start"]), int(entry["end"]), int(entry["offset"])
        bias = symbols.bias(start, offset, end) if symbols is not None else None
        symbols = symbols if symbols is not None else Symbols((), (), (), ())
        bias = bias if bias is not None else start - offset
        for name, address in (resolved or {}).items():
            if start <= int(address) < end and (int(address) - bias) in symbols.starts:
                at = symbols.starts.index(int(address) - bias)
                if symbols.names[at].startswith("(local function"):
                    symbols = dataclasses.replace(symbols, names=symbols.names[:at] + (f"{name} (resolved)",)
                                                  + symbols.names[at + 1:])
        out.append(Mapping_(start, end, os.path.basename(path), bias, symbols))
    return sorted(out, key=lambda m: m.start)


def attribute(blocks: Iterable[tuple[int, str, int]], maps: Sequence[Mapping_], total: int | None) -> dict:
    """Instructions per (library, mangled function): {"total", "simd_fp", "load_store", "branch", "other",
    "dot_product"}; addresses outside every mapping or symbol go to "(no symbol)" of their library. Refuses a profile
    whose attributed instructions do not add up to `total` (the region's count)."""
    starts = [m.start for m in maps]
    per: dict[tuple[str, str], Counter] = {}

    def where(pc: int) -> tuple[str, str]:
        at = bisect.bisect_right(starts, pc) - 1
        if at < 0 or pc >= maps[at].end:
            return "(unmapped)", "(unmapped)"
        m = maps[at]
        return m.library, m.symbols.lookup(pc - m.bias) or "(no symbol)"

    letters = {"s": ("simd_fp",), "d": ("simd_fp", "dot_product"), "l": ("load_store",), "b": ("branch",),
               "o": ("other",)}
    for pc, classes, runs in blocks:
        first, last = where(pc), where(pc + 4 * (len(classes) - 1))
        if first == last:
            spans = [(first, classes)]
        else:                                       # a block that runs over a function's end: per instruction
            spans = [(where(pc + 4 * i), c) for i, c in enumerate(classes)]
        for key, letters_here in spans:
            bucket = per.setdefault(key, Counter())
            for letter, n in Counter(letters_here).items():
                for cls in letters[letter]:
                    bucket[cls] += n * runs
    found = {}
    for key, c in per.items():
        counts = {k: int(c.get(k, 0)) for k in ("simd_fp", "load_store", "branch", "other", "dot_product")}
        counts["total"] = counts["simd_fp"] + counts["load_store"] + counts["branch"] + counts["other"]
        found[key] = counts
    attributed = sum(c["total"] for c in found.values())
    if total is not None and attributed != total:
        raise ToolError(f"the profile attributes {attributed:,} instructions, the region counted {total:,}",
                        "rebuild native/ and its plugin (stale build?)")
    return found


def summarize(functions: Mapping[tuple[str, str], Mapping[str, int]], names: Mapping[str, str] | None = None,
              signatures: Mapping[str, str] | None = None) -> dict:
    """Per function and per op kind: instructions, share, class shares; INT8 vs float vs conversions. `names`: the
    shown (demangled) name of each raw one; `signatures`: with parameter types, which tell a precision the name
    does not (im2col_packb_3x3s1p1(signed char const*, ...) packs INT8 data)."""
    names, signatures = names or {}, signatures or {}
    total = sum(c["total"] for c in functions.values())
    rows = []
    for (library, raw), c in functions.items():
        name = names.get(raw, raw)
        kind = kind_of(library, name)
        signature = signatures.get(raw, name)
        if kind == "fp32_gemm" and INT8_PATTERN.search(signature.lower()):
            kind = "int8_gemm"
        rows.append({"library": library, "function": name, "kind": kind,
                     "precision": precision_of(kind, signature),
                     **{k: c[k] for k in ("total", "simd_fp", "load_store", "branch", "other", "dot_product")}})
    rows.sort(key=lambda r: (-r["total"], r["library"], r["function"]))
    for r in rows:
        r["share"] = r["total"] / total if total else 0.0
    kinds: dict[str, Counter] = {}
    for r in rows:
        bucket = kinds.setdefault(r["kind"], Counter())
        for k in ("total", "simd_fp", "dot_product"):
            bucket[k] += r[k]
        bucket["functions"] += 1
    kind_rows = [{"kind": k, "label": KIND_LABELS[k], "total": int(c["total"]),
                  "share": c["total"] / total if total else 0.0, "simd_fp": int(c["simd_fp"]),
                  "dot_product": int(c["dot_product"]), "functions": int(c["functions"])}
                 for k, c in sorted(kinds.items(), key=lambda kv: (-kv[1]["total"], kv[0]))]
    by_precision = {p: sum(r["total"] for r in rows if r["precision"] == p) for p in PRECISIONS}
    return {"total": total, "kinds": kind_rows, "functions": rows,
            "by_precision": {p: {"total": n, "share": n / total if total else 0.0} for p, n in by_precision.items()},
            "int8_adds": {"what": "quantize/dequantize/calib between INT8 and float segments",
                          "total": by_precision["conversion"],
                          "share": by_precision["conversion"] / total if total else 0.0}}


def launch_points(path: Path, symbols: Symbols | None = None) -> tuple[int, tuple[int, ...]]:
    """File addresses of KernelBase::Launch's entry and of the instruction after each `bl` to it (where each call
    returns), found by decoding every word of the library's executable segments as a branch. A `b` to Launch (a tail
    call) would return past the points, so it is refused."""
    symbols = symbols or read_symbols(path)
    entries = [start for start, name in zip(symbols.starts, symbols.names) if name == LAUNCH]
    if len(entries) != 1:
        raise ToolError(f"{Path(path).name} has {len(entries)} symbols {LAUNCH} (KernelBase::Launch)",
                        "profile per op with Lite's unstripped v2.13 library (EDGEKIT_LITE_ARM_SYMBOLS)")
    entry = entries[0]
    data = Path(path).read_bytes()
    returns, tail_calls = [], 0
    for p_offset, p_vaddr, p_filesz, p_flags in symbols.segments:
        if not p_flags & 1:                                        # PF_X
            continue
        words = np.frombuffer(data, dtype="<u4", count=p_filesz // 4, offset=p_offset)
        opcode = words >> 26
        offset = (words & 0x03FFFFFF).astype(np.int64)
        offset = np.where(offset & 0x02000000, offset - (1 << 26), offset) * 4
        at = p_vaddr + 4 * np.arange(len(words), dtype=np.int64)
        hits = at + offset == entry
        returns += [int(a) + 4 for a in at[hits & (opcode == 0x25)]]   # BL
        tail_calls += int(np.count_nonzero(hits & (opcode == 0x05)))  # B
    if tail_calls or not returns:
        raise ToolError(f"{Path(path).name}: KernelBase::Launch has {len(returns)} calls and {tail_calls} tail calls",
                        "a per-op profile needs a library whose Launch is called with bl only (Lite v2.13's)")
    return entry, tuple(sorted(returns))


def per_op(profile, maps: Sequence[Mapping_], ops: Sequence, names: Mapping[str, str],
           signatures: Mapping[str, str], total: int) -> dict:
    """The profile's op split (lite/icount.OpSegments) attributed to functions and named after the program's ops:
    {"ops": [one row per op run, in order], "tail": the instructions after the last op, "named": whether the ops
    that ran are the program's (their count equals the program's non-feed/fetch ops)}. The rows and the tail add up
    to `total`."""
    split = profile.ops
    running = [op for op in ops if op.runs]
    named = split.ops == len(running)
    rows, tail = [], None
    by_segment: dict[int, list[tuple[int, str, int]]] = {}
    for segment, block, runs in split.runs:
        by_segment.setdefault(segment, []).append((profile.blocks[block][0], profile.blocks[block][1], runs))
    for segment in range(split.ops + 1):
        functions = attribute(by_segment.get(segment, ()), maps, None)
        summary = summarize(functions, names, signatures)
        row = {"total": summary["total"], "share": summary["total"] / total if total else 0.0,
               "by_precision": {p: summary["by_precision"][p]["total"] for p in PRECISIONS},
               "functions": [{"function": f["function"], "library": f["library"], "kind": f["kind"],
                              "total": f["total"]} for f in summary["functions"][:OP_FUNCTIONS]]}
        if segment == split.ops:
            tail = row
            continue
        op = running[segment] if named else None
        rows.append({"op": segment, "index": op.index if op else None, "type": op.type if op else None,
                     "output": op.output if op else None, "kernel": op.kernel if op else None, **row})
    if sum(r["total"] for r in rows) + tail["total"] != total:
        raise ToolError(f"the per-op profile attributes {sum(r['total'] for r in rows) + tail['total']:,} "
                        f"instructions, the region counted {total:,}", "rebuild native/ and its plugin (stale build?)")
    return {"ops": rows, "tail": tail, "named": named, "program_ops": len(running)}


# ----------------------------------------------------------------- measuring

def symbols_runtime(root: Path | None, environ: Mapping[str, str] | None = None) -> Path:
    """The unstripped Lite runtime to profile with: EDGEKIT_LITE_ARM_SYMBOLS, else `symbols/` inside the runtime
    folder, else the runtime itself when its library keeps a symbol table."""
    from edgekit.lite import native

    environ = os.environ if environ is None else environ
    candidates = ([Path(environ[SYMBOLS_ENV])] if environ.get(SYMBOLS_ENV) else []) + (
        [root / "symbols", root] if root is not None else [])
    for candidate in candidates:
        try:
            runtime = native.find_runtime(candidate, "aarch64")
        except ConfigError:
            continue
        if read_symbols(runtime.library).names and _has_symtab(runtime.library):
            return candidate
    raise EmulationUnavailable(
        "a profile needs Lite's arm64 runtime with its symbol table (the shipped library is stripped)"
        + (f"; none in {', '.join(str(c) for c in candidates)}" if candidates else ""),
        f"set {SYMBOLS_ENV} to an unstripped build of the same tag (e.g. EDGEKIT_LITE_ARM's symbols/ folder)")


def _lite_maps(record: Mapping) -> list[tuple[int, int, int]]:
    """(start, end, offset) of each mapping of Lite's library in a runner record."""
    return sorted((int(m["start"]), int(m["end"]), int(m["offset"])) for m in record.get("code_maps") or ()
                  if os.path.basename(str(m.get("path", ""))) == LITE_LIBRARY)


def _boundaries(lite_maps: Sequence[tuple[int, int, int]], library: Path) -> tuple[int, tuple[int, ...]]:
    """Guest addresses of KernelBase::Launch and of its call sites' return points, for the plugin."""
    symbols = read_symbols(library)
    biases = {b for b in (symbols.bias(start, offset, end) for start, end, offset in lite_maps) if b is not None}
    if len(biases) != 1:
        raise ToolError(f"the runner's record maps {LITE_LIBRARY} {len(lite_maps)} times with {len(biases)} load "
                        f"biases", "rebuild native/ (a runner that records code_maps)")
    bias = biases.pop()
    entry, returns = launch_points(library, symbols)
    return bias + entry, tuple(bias + r for r in returns)


def _has_symtab(library: Path) -> bool:
    data = library.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    return any(struct.unpack_from("<I", data, shoff + i * shentsize + 4)[0] == 2 for i in range(shnum))


def measure(emulator, nb_file: Path, sample: Mapping[str, np.ndarray], *, cpu: str = "default",
            cache_folder: Path | None = None) -> dict:
    """Profile one inference of `nb_file` on one kernel path: the first timed run after one warm-up (the figure
    costs.measure records), attributed to functions and op kinds. `emulator` must run the unstripped runtime."""
    from edgekit.core import atomic
    from edgekit.model.artifacts import sha256_file
    from edgekit.verify.emulator import native_cache
    from edgekit.lite import icount, native

    plugin = icount.build_plugin(native_cache())
    key = hashlib.sha256(json.dumps({
        "schema": SCHEMA, "nb": sha256_file(nb_file), "sample": sample_digest(sample), "runtime": emulator.runtime.sha256,
        "runner": emulator.build.key, "plugin": icount.plugin_key()[0], "cpu": cpu,
        "kinds": KINDS}, sort_keys=True).encode()).hexdigest()
    cached = cache_folder / f"{key}.profile.json" if cache_folder is not None else None
    if cached is not None and cached.is_file():
        try:
            return dict(json.loads(cached.read_text(encoding="utf-8")), cached=True)
        except (OSError, ValueError):
            pass
    from edgekit.lite.nbfile import program_ops

    ops = program_ops(Path(nb_file))
    with icount.canonical_paths(emulator.build, emulator.runtime, nb_file) as (build, runtime, nb, work):
        # a first run finds where the guest's loader puts Lite's library (qemu-user places it the same way each run:
        # the second run's record must agree), so the plugin can be told where Launch and its returns are
        first = native.run_runner(build, runtime, nb, sample, threads=1, cpu_profile=cpu, timeout=emulator.timeout,
                                  workdir=work / "where", icount_plugin=plugin)
        lite_maps = _lite_maps(first.record)
        boundaries = _boundaries(lite_maps, emulator.runtime.library)
        result = native.run_runner(build, runtime, nb, sample, threads=1, warmup=1, repeat=1, cpu_profile=cpu,
                                   timeout=emulator.timeout, workdir=work, icount_plugin=plugin,
                                   profile_region=2,   # region 0 the pass over the one sample, 1 the warm-up
                                   op_boundaries=boundaries)
    if _lite_maps(result.record) != lite_maps:
        raise ToolError(f"qemu loaded {LITE_LIBRARY} elsewhere in the profiled run than in the run that located it",
                        "rerun; the per-op split needs qemu-user's usual fixed placement (no guest ASLR)")
    counts = result.counts
    region = counts.timed[0]
    maps = load_maps(result.record.get("code_maps") or (), result.record.get("resolved") or {})
    if not any(m.library == LITE_LIBRARY and m.symbols.names for m in maps):
        raise ToolError(f"the runner's record maps no {LITE_LIBRARY} with symbols",
                        "rebuild native/ (a runner that records code_maps) and profile with the unstripped runtime")
    functions = attribute(counts.profile.blocks, maps, region["total"])
    raw = sorted({f for _, f in functions})
    names, signatures = demangle(raw), demangle(raw, parameters=True)
    if counts.profile.ops is None:
        raise ToolError("the counting plugin did not split the profile by op", "rebuild native/plugin (stale build?)")
    found = {"schema": SCHEMA, "unit": "guest instructions, one inference (timed run 0 after one warm-up)",
             "cpu_profile": cpu, "kernel_path": (result.record.get("cpu") or {}).get("int8_kernel_path"),
             "runtime": str(emulator.runtime.library), "runtime_sha256": emulator.runtime.sha256,
             "counted": region, **summarize(functions, names, signatures),
             "per_op": per_op(counts.profile, maps, ops, names, signatures, region["total"])}
    if cached is not None:
        atomic.write_json(cached, found)
    return dict(found, cached=False)


def table(found: Mapping, *, top: int = TOP_FUNCTIONS, top_ops: int = TOP_OPS) -> list[str]:
    """The profile as text: op kinds, INT8 vs float, the top functions (the rest summed in one row), then the
    largest ops of the program (op_table)."""
    total = found["total"]
    head = (f"profile of {found.get('model', '?')} {found.get('precision', '')} on the {found['cpu_profile']} path "
            f"({found.get('kernel_path') or '?'} INT8 kernels): {total:,} instructions per inference")
    lines = [head]
    if found.get("recorded_total"):
        lines.append(f"  (the bundle records {found['recorded_total']:,} with the stripped runtime: "
                     f"{total / found['recorded_total'] - 1:+.2%}; the symbol build's code layout differs)")
    lines += ["", f"{'op kind':<34} {'instructions':>14} {'share':>7} {'simd/fp':>8} {'dot':>6} {'funcs':>6}"]
    for k in found["kinds"]:
        lines.append(f"{k['label'][:34]:<34} {k['total']:>14,} {k['share']:>7.2%} "
                     f"{k['simd_fp'] / k['total'] if k['total'] else 0:>8.1%} "
                     f"{k['dot_product'] / k['total'] if k['total'] else 0:>6.1%} {k['functions']:>6}")
    lines.append(f"{'total':<34} {sum(k['total'] for k in found['kinds']):>14,} {1:>7.2%}")
    p = found["by_precision"]
    lines += ["", "by precision: " + ", ".join(f"{name} {p[name]['total']:,} ({p[name]['share']:.1%})"
                                               for name in PRECISIONS),
              f"work INT8 adds (conversions between INT8 and float segments): {found['int8_adds']['total']:,} "
              f"({found['int8_adds']['share']:.1%})", ""]
    lines.append(f"{'function':<64} {'kind':<11} {'instructions':>13} {'share':>7} {'simd/fp':>7}")
    rows = found["functions"]
    for r in rows[:top]:
        name = f"{r['function']}" + ("" if r["library"] == LITE_LIBRARY else f" ({r['library']})")
        lines.append(f"{name[:64]:<64} {r['kind'][:11]:<11} {r['total']:>13,} {r['share']:>7.2%} "
                     f"{r['simd_fp'] / r['total'] if r['total'] else 0:>7.1%}")
    rest = rows[top:]
    if rest:
        n = sum(r["total"] for r in rest)
        lines.append(f"{f'({len(rest)} more functions)':<64} {'':<11} {n:>13,} {n / total if total else 0:>7.2%}")
    if found.get("per_op"):
        lines += [""] + op_table(found["per_op"], total, top=top_ops)
    return lines


def _kernel_precision(kernel: str | None) -> str:
    """INT8, FP32, Any... from opt's `op/alias/target/precision/layout` (lite/nbfile.PRECISION_NAMES)."""
    from edgekit.lite.nbfile import PRECISION_NAMES

    parts = (kernel or "").split("/")
    return PRECISION_NAMES.get(int(parts[3]), "?") if len(parts) == 5 and parts[3].isdigit() else ""


def op_table(split: Mapping, total: int, *, top: int = TOP_OPS) -> list[str]:
    """Per op of the program, in the order Lite ran them: the op's instructions (from the end of the previous op's
    kernel to the end of its own) and its largest functions; the largest `top` ops, the rest in one row, then the
    tail after the last op, so the rows add up to the total."""
    ops = split["ops"]
    head = f"per op of the program ({len(ops)} ops ran"
    head += (", as the .nb's program lists them)" if split["named"] else
             f"; the .nb's program has {split['program_ops']} that run, so they are not named)")
    lines = [head, f"{'#':>4} {'op':<22} {'kernel':<6} {'output':<28} {'instructions':>13} {'share':>7}  "
                   f"top functions (share of op)"]
    shown = {id(r) for r in sorted(ops, key=lambda r: -r["total"])[:top]}

    def functions(row: Mapping) -> str:
        return "; ".join(f"{_NAMESPACES.sub('', f['function'])[:44]} "
                         f"{f['total'] / row['total'] if row['total'] else 0:.0%}" for f in row["functions"])

    for r in ops:
        if id(r) not in shown:
            continue
        name = r["type"] or "?"
        lines.append(f"{r['index'] if r['index'] is not None else r['op']:>4} {name[:22]:<22} "
                     f"{_kernel_precision(r['kernel']):<6} {(r['output'] or '')[:28]:<28} {r['total']:>13,} "
                     f"{r['share']:>7.2%}  {functions(r)}")
    rest = [r for r in ops if id(r) not in shown]
    if rest:
        n = sum(r["total"] for r in rest)
        lines.append(f"{'':>4} {f'({len(rest)} more ops)':<58} {n:>13,} {n / total if total else 0:>7.2%}")
    tail = split["tail"]
    lines.append(f"{'':>4} {'(after the last op)':<58} {tail['total']:>13,} {tail['share']:>7.2%}  {functions(tail)}")
    lines.append(f"{'':>4} {'total':<58} {sum(r['total'] for r in ops) + tail['total']:>13,} {1:>7.2%}")
    return lines


def compare_table(result: Mapping, *, top: int = 15) -> list[str]:
    """Op kinds side by side (one column per bundle and path, instructions and share), then each profile's table."""
    profiles = result["profiles"]
    heads = [f"{p.get('model', '?')} {p.get('precision', '')} {p['cpu_profile']}" for p in profiles]
    kinds = {}
    for p in profiles:
        for k in p["kinds"]:
            kinds[k["kind"]] = kinds.get(k["kind"], 0) + k["total"]
    width = max(22, *(len(h) for h in heads)) if heads else 22
    lines = ["instructions per inference by op kind (share of each profile's total)",
             f"{'op kind':<34} " + " ".join(f"{h[:width]:>{width}}" for h in heads)]
    for kind in sorted(kinds, key=lambda k: -kinds[k]):
        cells = []
        for p in profiles:
            row = next((k for k in p["kinds"] if k["kind"] == kind), None)
            cells.append(f"{row['total']:,} ({row['share']:.1%})" if row else "0")
        lines.append(f"{KIND_LABELS[kind][:34]:<34} " + " ".join(f"{c:>{width}}" for c in cells))
    lines.append(f"{'total':<34} " + " ".join(f"{p['total']:>{width},}" for p in profiles))
    base = profiles[0]["total"] if profiles else 0
    lines.append(f"{'vs first':<34} " + " ".join(f"{p['total'] / base if base else 0:>{width}.3f}" for p in profiles))
    lines.append(f"{'INT8 conversions':<34} " + " ".join(
        f"{p['int8_adds']['total']:,} ({p['int8_adds']['share']:.1%})".rjust(width) for p in profiles))
    for p in profiles:
        lines += [""] + table(p, top=top, top_ops=top)
    return lines
