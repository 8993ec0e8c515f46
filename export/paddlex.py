"""PaddleX / PaddleOCR 3.x model folders: `inference.yml` -> edgekit's `[preprocess]` and `[task]` tables.

A PaddleX model folder (`inference.json` + `inference.pdiparams` + `inference.yml`) says how
images become the model's input and how its outputs are read. Four exporters write the
file, each in its own dialect:

    paddleocr   PreProcess.transform_ops [{Op: {args}}], PostProcess {name: DBPostProcess | CTCLabelDecode | ...}
    paddleclas  PreProcess.transform_ops [{Op: {args}}], PostProcess {Topk: {topk, label_list}}
    paddledet   Preprocess [{type: Op, args}], label_list, NMS, draw_threshold
    paddleseg   Deploy {transforms [{type: Op, args}], input_shape, output_op}

`read_model_yml` turns one into a `ModelDescription` holding the tables an edgekit.toml would
hold (config.py takes them unchanged); `check_against_program` refuses a file that contradicts
the program's image input and fills the sizes the file leaves to the program; `merge_tables`
lays edgekit.toml's tables over the file's. An entry that changes what the model is fed and
that edgekit cannot reproduce is refused, naming it; a setting that only PaddleX's own
post-processing (or serving) uses becomes a note.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Mapping, Sequence

from edgekit.core import limits
from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.core.errors import EdgekitError, InputModelError
from edgekit.model.data import GEOMETRY_FEEDS as GEOMETRY_INPUTS
from edgekit.tasks import TaskKind, make_task
from edgekit.tasks.ocr import token_problem

if TYPE_CHECKING:                                   # pragma: no cover
    from edgekit.contracts.settings import InputSpec

YML_NAME = "inference.yml"
HINT_MANUAL = ("edgekit cannot reproduce it: write [preprocess] and [task] in edgekit.toml by hand "
               "(they override inference.yml)")
HINT_EXPORT = "export the model again with PaddleX / PaddleOCR 3.x, or write [preprocess] and [task] in edgekit.toml"
OCR_SCALE, OCR_MEAN, OCR_STD = 1.0 / 255.0, [0.5], [0.5]     # RecResizeImg / ClsResizeImg normalise this way
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CTC_DEFAULT = list("0123456789abcdefghijklmnopqrstuvwxyz")  # PaddleX's CTCLabelDecode without character_dict


@dataclass(frozen=True)
class ModelDescription:
    """What one inference.yml says, in edgekit's terms. The tables are plain dicts shaped like edgekit.toml's."""

    source: Path
    sha256: str                          # of the yml's bytes, for the manifest
    dialect: str                         # paddleocr, paddleclas, paddledet or paddleseg
    model_name: str                      # Global.model_name ("" when absent)
    paddlex_task: str                    # PaddleX's module: text_detection, text_recognition, textline_orientation, ...
    kind: TaskKind | None                # edgekit's task kind; None when edgekit has none for the model
    preprocess: dict                     # a [preprocess] table ({} when edgekit.toml gives it)
    task: dict                           # a [task] table with kind ({} when there is no edgekit task)
    labels: tuple[str, ...]              # class names, or the CTC dictionary without blank and space
    input_name: str | None               # the image input's name, when the yml names it (Hpi shapes)
    input_shape: tuple[int, ...] | None  # the image input in the preprocess layout, -1 where the yml leaves it open
    notes: tuple[str, ...]               # settings edgekit ignores or approximates, one line each
    typical_shape: tuple[int, ...] | None = None   # Hpi's "opt" shape (batch -1): a size to fix a dynamic program at
    default_size: tuple[int, int] | None = None    # (height, width) for a program whose H and W are open: DetResizeForTest's
    default_size_from: str = ""                    # what gave default_size, in words

    def to_json(self) -> dict:
        return {"source": str(self.source), "sha256": self.sha256, "dialect": self.dialect,
                "model_name": self.model_name, "paddlex_task": self.paddlex_task,
                "kind": self.kind.value if self.kind else None, "preprocess": self.preprocess, "task": self.task,
                "labels": list(self.labels), "input_name": self.input_name,
                "input_shape": list(self.input_shape) if self.input_shape else None, "notes": list(self.notes),
                "typical_shape": list(self.typical_shape) if self.typical_shape else None,
                "default_size": list(self.default_size) if self.default_size else None,
                "default_size_from": self.default_size_from or None}


class _Refusal(Exception):
    """A problem inside the file; read_model_yml prefixes the path and raises InputModelError."""

    def __init__(self, message: str, hint: str = HINT_MANUAL) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def find_model_yml(model: Path) -> Path | None:
    """The inference.yml of a model folder, or beside a model file (inference.json, model.onnx, ...)."""
    model = Path(model)
    candidate = model / YML_NAME if model.is_dir() else model.with_name(YML_NAME)
    if candidate.is_symlink():
        limits.plain_file(candidate, InputModelError)
    return candidate if candidate.is_file() else None


def read_model_yml(path: Path, *, overridden: Collection[str] = ()) -> ModelDescription:
    """The description in `path`. `overridden` names the tables ("preprocess", "task") edgekit.toml gives:
    problems in those parts of the file become notes instead of errors, and their tables stay empty."""
    path = Path(path)
    data = _read_bytes(path)
    try:
        raw = _parse(data)
        return _describe(path, hashlib.sha256(data).hexdigest(), raw, frozenset(overridden))
    except _Refusal as exc:
        raise InputModelError(f"{path}: {exc.message}", exc.hint) from None


# --- reading the file safely ------------------------------------------------------------------------

def _read_bytes(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        limits.check(InputModelError, f"{path} in bytes", size, "MAX_YML_BYTES",
                     "an inference.yml is a few hundred KB at most: check that this is the model's file")
        return path.read_bytes()
    except OSError as exc:
        raise InputModelError(f"cannot read {path}: {exc.strerror}", "check the path") from exc


def _yaml():
    import yaml

    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse(data: bytes) -> Mapping:
    """yaml.safe_load, after the event stream shows the depth and the alias-expanded size are bounded."""
    yaml, loader = _yaml()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _Refusal(f"is not UTF-8 text (byte {exc.start})", HINT_EXPORT) from None
    try:
        _check_events(yaml.parse(text, Loader=loader), yaml.events)
        raw = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _Refusal(f"is not valid YAML: {problem}{where}", HINT_EXPORT) from None
    if not isinstance(raw, Mapping):
        raise _Refusal(f"holds a {type(raw).__name__}, not a mapping of sections", HINT_EXPORT)
    return raw


def _check_events(events, kinds) -> None:
    sizes: dict[str, int] = {}                     # anchor -> nodes it expands to
    stack: list[list] = [[None, 0]]                # open collections: [anchor, nodes so far]
    for event in events:
        if isinstance(event, (kinds.MappingStartEvent, kinds.SequenceStartEvent)):
            stack.append([event.anchor, 1])
            if len(stack) - 1 > limits.MAX_YML_DEPTH:
                raise _Refusal(f"nests deeper than the limit MAX_YML_DEPTH = {limits.MAX_YML_DEPTH}", HINT_EXPORT)
            continue
        if isinstance(event, (kinds.MappingEndEvent, kinds.SequenceEndEvent)):
            anchor, count = stack.pop()
        elif isinstance(event, kinds.ScalarEvent):
            anchor, count = event.anchor, 1
        elif isinstance(event, kinds.AliasEvent):
            anchor, count = None, sizes.get(event.anchor, 1)
        else:
            continue
        if anchor is not None:
            sizes[anchor] = count
        stack[-1][1] += count
        if stack[-1][1] > limits.MAX_YML_NODES:
            raise _Refusal(f"expands to more than MAX_YML_NODES = {limits.MAX_YML_NODES:,} values (aliases included)",
                           HINT_EXPORT)


# --- values -------------------------------------------------------------------------------------------

def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Refusal(f"{where} is {value!r}, not a number")
    try:
        finite = math.isfinite(value)    # YAML's .inf / .nan, or an int beyond a double: no setting means that
    except OverflowError:
        finite = False
    if not finite:
        raise _Refusal(f"{where} is {value!r}, not a finite number")
    return float(value)


# a decimal number, each character consumed by one path only (no backtracking: linear time on any text)
_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _scale(value: Any, where: str) -> float:
    """A number, or the fraction PaddleOCR writes as a string ("1./255.") and evaluates: read here without eval."""
    if isinstance(value, str):
        # split and strip, then one unambiguous pattern a part: linear in the text (issue 32: nested \s* went cubic)
        parts = [part.strip() for part in value.split("/", 1)]
        try:
            if not all(_DECIMAL.fullmatch(part) for part in parts):
                raise ValueError(value)
            top = float(parts[0])
            value = top / float(parts[1]) if len(parts) == 2 else top
        except (ValueError, ZeroDivisionError, OverflowError):
            shown = value if len(value) <= 40 else value[:37] + "..."
            raise _Refusal(f"{where} is {shown!r}, not a number or a fraction like 1./255.") from None
    value = _number(value, where)
    if not value > 0:
        raise _Refusal(f"{where} is {value:g}, not a positive number")
    return value


def _floats(value: Any, where: str) -> list[float]:
    values = value if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise _Refusal(f"{where} is empty")
    return [_number(v, where) for v in values]


def _ints(value: Any, where: str, count: int) -> list[int]:
    if not isinstance(value, (list, tuple)) or len(value) != count or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        raise _Refusal(f"{where} is {value!r}, not {count} positive integers")
    return list(value)


def _size(value: Any, where: str, order: str) -> tuple[int, int]:
    """(height, width) from an int or a pair given in `order` ("wh" or "hw")."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value, value
    a, b = _ints(value, where, 2)
    return (b, a) if order == "wh" else (a, b)


def _names(value: Any, where: str) -> list[str]:
    """Class names: strings, or numbers YAML read from unquoted names like 90."""
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        raise _Refusal(f"{where} is not a list of names")
    return [v if isinstance(v, str) else str(v) for v in value]


def _args(entry: Any, where: str) -> Mapping:
    if entry is None:
        return {}
    if not isinstance(entry, Mapping):
        raise _Refusal(f"{where} is {entry!r}, not a mapping of settings")
    return entry


def _known(args: Mapping, where: str, used: Collection[str]) -> None:
    unknown = sorted(str(k) for k in args if k not in used)
    if unknown:
        raise _Refusal(f"{where} has setting(s) edgekit does not know: {', '.join(unknown)}")


# --- preprocessing ----------------------------------------------------------------------------------

INTERPOLATIONS = {"nearest": "nearest", "linear": "linear", "bilinear": "linear", "area": "area"}
CV2_INTERPOLATIONS = {0: "nearest", 1: "linear", 2: "cubic", 3: "area", 4: "lanczos4"}
TRAINING_ONLY = ("KeepKeys",)                     # and every *LabelEncode: they build training targets


class _Builder:
    """The preprocessing an op list describes, accumulated op by op; one per read."""

    def __init__(self, color: str = "rgb", layout: str = "NHWC") -> None:
        self.color, self.layout = color, layout
        self.resize: tuple[int, int] | None = None
        self.crop: tuple[int, int] | None = None
        self.mode, self.interpolation = "stretch", "linear"
        self.scale, self.mean, self.std = 1.0, [0.0], [1.0]
        self.size = (-1, -1)                      # the (height, width) the yml fixes for the model's input
        self.channels = -1                        # from an op's image_shape
        self.default_size: tuple[int, int] | None = None   # DetResizeForTest's page size, for a program with open H/W
        self.default_from = ""
        self.widen, self.widen_from = False, ""  # RecResizeImg: PaddleX makes a line's tensor as wide as the line
        self.max_width: int | None = None         # ... and so does edgekit (width_mode dynamic) up to this width
        self.notes: list[str] = []

    def interp(self, name: Any, where: str) -> None:
        found = CV2_INTERPOLATIONS.get(name) if isinstance(name, int) else INTERPOLATIONS.get(str(name).lower())
        if found in INTERPOLATIONS.values():
            self.interpolation = found
        else:
            self.interpolation = "linear"
            shown = f"{name} ({found})" if isinstance(name, int) and found else str(name)
            self.notes.append(f"{where} {shown}: edgekit resizes with linear interpolation (pixels differ slightly)")

    def line(self, args: Mapping, where: str, widen: bool) -> None:
        """RecResizeImg / ClsResizeImg: height fixed, aspect kept, padded right; normalised (x/255 - 0.5)/0.5."""
        channels, height, width = _ints(args.get("image_shape"), f"{where}.image_shape", 3)
        if channels not in (1, 3) or (channels == 1) != (self.color == "gray"):
            raise _Refusal(f"{where}.image_shape has {channels} channel(s) but the image is read as {self.color}")
        self.channels, self.resize = channels, (height, width)
        self.mode = "fit_height" if args.get("padding", True) else "stretch"
        self.scale, self.mean, self.std, self.layout = OCR_SCALE, OCR_MEAN, OCR_STD, "NCHW"
        self.size = (height, -1 if widen and self.mode == "fit_height" else width)
        self.widen = widen and self.mode == "fit_height"
        if self.widen:
            self.widen_from = f"{where}.image_shape {[channels, height, width]}"

    def widen_up_to(self, widest: int | None) -> None:
        """RecResizeImg: PaddleX sizes each line's tensor by the line (at least image_shape's width); edgekit's
        width_mode dynamic does the same up to the widest input the yml states (Hpi's max shape), else squeezes."""
        if not self.widen:
            return
        height, width = self.resize
        if widest is not None and widest > width:
            self.max_width = widest
            self.notes.append(f"{self.widen_from}: PaddleX widens the input for lines longer than {width / height:.3g}:1; "
                              f"edgekit too (width_mode dynamic), up to Hpi's widest input {widest}")
        else:
            self.notes.append(f"{self.widen_from}: PaddleX widens the input for lines longer than {width / height:.3g}:1; "
                              f"edgekit's input is {width} wide (longer lines are squeezed; no Hpi max width stated)")

    def table(self) -> dict:
        table: dict[str, Any] = {"color": self.color}
        if self.resize is not None:
            table["resize"] = list(self.resize)
            if self.mode in ("fit_height", "letterbox"):
                table.update(resize_mode=self.mode, pad_value=0.0)
                if self.max_width is not None:
                    table.update(width_mode="dynamic", max_width=self.max_width)
        if self.crop is not None:
            table["crop"] = list(self.crop)
        table.update(interpolation=self.interpolation, scale=self.scale, mean=list(self.mean), std=list(self.std),
                     layout=self.layout)
        return table


def _decode_image(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("img_mode", "channel_first", "to_rgb", "ignore_orientation"))
    if args.get("channel_first"):
        raise _Refusal(f"{where}.channel_first is true (PaddleX refuses it too)", HINT_EXPORT)
    mode = args.get("img_mode", "RGB" if args.get("to_rgb", True) else "BGR")
    if str(mode).lower() not in ("rgb", "bgr", "gray"):
        raise _Refusal(f"{where}.img_mode is {mode!r}, not RGB, BGR or GRAY")
    b.color = str(mode).lower()


def _normalize_image(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("scale", "mean", "std", "order", "channel_num", "output_fp16"))
    if args.get("channel_num", 3) != 3 or args.get("output_fp16"):
        setting = "output_fp16" if args.get("output_fp16") else f"channel_num {args.get('channel_num')}"
        raise _Refusal(f"{where}.{setting}: edgekit feeds 3-channel float32 images")
    b.scale = _scale(args.get("scale", 1.0 / 255.0), f"{where}.scale")
    b.mean = _floats(args.get("mean", IMAGENET_MEAN), f"{where}.mean")
    b.std = _floats(args.get("std", IMAGENET_STD), f"{where}.std")


def _to_chw(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ())
    b.layout = "NCHW"


DET_STRIDE = 32
# how PaddleOCR's DetResizeForTest sizes a page for each limit type (ppocr/data/imaug/operators.py)
# DetResizeForTest's `resize_long: N` key (PaddleOCR's resize type 2) and its `limit_type` values (type 0)
DET_RESIZE_LONG = "scales each page so its long side is {side}, then rounds each side up to a multiple of 128"
DET_LIMITS = {
    "resize_long": "scales each page so its long side is {side}, each side then rounded to a multiple of 32",
    "max": "scales a page down until its long side is at most {side} (never up), each side then rounded to a "
           "multiple of 32",
    "min": "scales a page up until its short side is at least {side} (never down), each side then rounded to a "
           "multiple of 32",
}


def _det_resize_for_test(b: _Builder, args: Mapping, where: str) -> None:
    """A page size that follows the page (resize_long, limit_side_len) becomes a fixed square the page is
    letterboxed into: its long side fills the square, its aspect ratio is kept, the rest is padded with the
    normalised mean (0). The geometry maps the boxes back (edgekit ocr, the app core)."""
    _known(args, where, ("image_shape", "keep_ratio", "limit_side_len", "limit_type", "resize_long", "max_side_limit"))
    if "image_shape" in args:
        height, width = _ints(args["image_shape"], f"{where}.image_shape", 2)
        b.resize = (height, width)
        if not args.get("keep_ratio"):
            b.size = (height, width)
            return
        # PaddleX: height fixed, width by the page's aspect ratio rounded up to a multiple of 32; a fixed input
        # keeps the aspect ratio only as a letterbox (the page's pixels scaled alike in x and y, the rest padded)
        b.size, b.mode = (height, -1), "letterbox"
        b.default_size, b.default_from = (height, width), f"inference.yml's {where} (image_shape {[height, width]})"
        b.notes.append(f"{where} (image_shape {[height, width]}, keep_ratio): PaddleX scales each page to height "
                       f"{height} and its width by the aspect ratio (rounded up to a multiple of 32); edgekit "
                       "letterboxes each page into the model's fixed input: the aspect ratio is kept, the rest is padded")
        return
    said = ", ".join(f"{k} {args[k]}" for k in ("limit_side_len", "limit_type", "resize_long") if k in args)
    side_key = "resize_long" if "resize_long" in args else "limit_side_len" if "limit_side_len" in args else None
    if side_key is None:
        b.notes.append(f"{where} (PaddleX defaults: limit_side_len 736, limit_type min): PaddleX sizes each page by "
                       "its own aspect ratio; edgekit feeds pages at the program's input size")
        return
    side = args[side_key]
    if not isinstance(side, int) or isinstance(side, bool) or side <= 0:
        raise _Refusal(f"{where}.{side_key} is {side!r}, not a positive integer")
    limit = None if side_key == "resize_long" else str(args.get("limit_type", "min"))
    if limit is not None and limit not in DET_LIMITS:
        raise _Refusal(f"{where}.limit_type is {limit!r}, not one of {', '.join(DET_LIMITS)} (PaddleOCR refuses it too)",
                       HINT_EXPORT)
    # DB's feature pyramid needs sides divisible by 32
    size = max(DET_STRIDE, (side + DET_STRIDE - 1) // DET_STRIDE * DET_STRIDE)
    b.default_size = (size, size)
    b.default_from = f"inference.yml's {where} ({said}{', rounded up to a multiple of 32' if size != side else ''})"
    b.resize, b.mode = (size, size), "letterbox"
    b.notes.append(f"{where} ({said}): PaddleX {(DET_LIMITS.get(limit) or DET_RESIZE_LONG).format(side=side)}; edgekit letterboxes each page "
                   f"into the model's fixed input ({size}x{size} unless the program or --input fixes another): the "
                   "long side fills it, the aspect ratio is kept, the rest is padded")


def _rec_resize(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("image_shape", "padding", "eval_mode", "character_dict_path", "infer_mode"))
    b.line(args, where, widen=True)


def _cls_resize(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("image_shape",))
    b.line(args, where, widen=False)


def _resize_image(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("size", "resize_short", "interpolation", "backend", "return_numpy"))
    if "size" in args:
        b.resize = b.size = _size(args["size"], f"{where}.size", "wh")
    elif "resize_short" in args:
        short = _size(args["resize_short"], f"{where}.resize_short", "hw")[0]
        b.resize, b.size = (short, short), (-1, -1)
        b.notes.append(f"{where}.resize_short {short}: PaddleX keeps the aspect ratio; edgekit stretches to "
                       f"{short}x{short} before the crop (non-square images are distorted)")
    else:
        raise _Refusal(f"{where} has neither size nor resize_short")
    if args.get("interpolation") is not None:
        b.interp(args["interpolation"], f"{where}.interpolation")
    if str(args.get("backend", "cv2")).lower() != "cv2":
        b.notes.append(f"{where}.backend {args['backend']}: edgekit resizes with OpenCV (pixels differ slightly)")


def _crop_image(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("size",))
    b.crop = b.size = _size(args.get("size", 224), f"{where}.size", "wh")


def _det_resize(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("target_size", "keep_ratio", "interp"))
    b.resize = _size(args.get("target_size"), f"{where}.target_size", "hw")
    b.size = (-1, -1) if args.get("keep_ratio") else b.resize
    if args.get("keep_ratio"):
        b.notes.append(f"{where}.keep_ratio: PaddleX keeps the aspect ratio; edgekit stretches to {list(b.resize)}")
    b.interp(args.get("interp", 2), f"{where}.interp")


def _det_normalize(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("mean", "std", "is_scale", "norm_type"))
    b.scale = 1.0 / 255.0 if args.get("is_scale", True) else 1.0
    if str(args.get("norm_type") or "mean_std") == "mean_std":
        b.mean = _floats(args.get("mean", IMAGENET_MEAN), f"{where}.mean")
        b.std = _floats(args.get("std", IMAGENET_STD), f"{where}.std")


def _pad_stride(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("stride",))
    b.notes.append(f"{where}.stride {args.get('stride', 32)}: edgekit pads nothing; the fixed input size must be a "
                   "multiple of it")


def _seg_normalize(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("mean", "std"))
    b.scale = 1.0 / 255.0
    b.mean = _floats(args.get("mean", [0.5, 0.5, 0.5]), f"{where}.mean")
    b.std = _floats(args.get("std", [0.5, 0.5, 0.5]), f"{where}.std")


def _seg_resize(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("target_size", "keep_ratio", "size_divisor", "interp"))
    b.resize = _size(args.get("target_size", [512, 512]), f"{where}.target_size", "wh")
    b.size = (-1, -1) if args.get("keep_ratio") or args.get("size_divisor") else b.resize
    if b.size == (-1, -1):
        b.notes.append(f"{where}: PaddleX keeps the aspect ratio; edgekit stretches to {list(b.resize)}")
    b.interp(args.get("interp", "LINEAR"), f"{where}.interp")


def _seg_resize_by_side(b: _Builder, args: Mapping, where: str) -> None:
    _known(args, where, ("long_size", "short_size", "interp"))
    b.notes.append(f"{where}: PaddleX resizes keeping the aspect ratio; edgekit stretches to the model's fixed input size")


# each dialect's ops: name -> handler(builder, args, where)
TRANSFORM_OPS = {"DecodeImage": _decode_image, "NormalizeImage": _normalize_image, "ToCHWImage": _to_chw,
                 "DetResizeForTest": _det_resize_for_test, "RecResizeImg": _rec_resize, "ClsResizeImg": _cls_resize,
                 "ResizeImage": _resize_image, "CropImage": _crop_image}
DET_OPS = {"Resize": _det_resize, "NormalizeImage": _det_normalize, "Permute": _to_chw, "PadStride": _pad_stride}
SEG_OPS = {"Normalize": _seg_normalize, "Resize": _seg_resize, "ResizeByLong": _seg_resize_by_side,
           "ResizeByShort": _seg_resize_by_side}


def _ops(entries: Any, where: str, keyed_by_type: bool) -> list[tuple[str, Mapping, str]]:
    """(op name, settings, where) per entry: `[{Op: {args}}]` or, keyed by type, `[{type: Op, args...}]`."""
    if not isinstance(entries, list):
        raise _Refusal(f"{where} is not a list of operations", HINT_EXPORT)
    found = []
    for i, entry in enumerate(entries):
        at = f"{where}[{i}]"
        if keyed_by_type:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("type"), str):
                raise _Refusal(f"{at} is not a mapping with a type", HINT_EXPORT)
            found.append((entry["type"], {k: v for k, v in entry.items() if k != "type"}, f"{at} {entry['type']}"))
        else:
            if not isinstance(entry, Mapping) or len(entry) != 1 or not isinstance(next(iter(entry)), str):
                raise _Refusal(f"{at} is not a single-key mapping {{Op: settings}}", HINT_EXPORT)
            name, args = next(iter(entry.items()))
            found.append((name, _args(args, f"{at} {name}"), f"{at} {name}"))
    return found


def _preprocess(raw: Mapping, dialect: str) -> _Builder:
    if dialect == "paddledet":
        entries, where, table, b = raw.get("Preprocess"), "Preprocess", DET_OPS, _Builder()
    elif dialect == "paddleseg":
        deploy = _args(raw.get("Deploy"), "Deploy")
        entries, where, table, b = deploy.get("transforms") or [], "Deploy.transforms", SEG_OPS, _Builder(layout="NCHW")
    else:
        section = _args(raw.get("PreProcess"), "PreProcess")
        entries, where, table, b = section.get("transform_ops"), "PreProcess.transform_ops", TRANSFORM_OPS, _Builder()
    for name, args, at in _ops(entries, where, keyed_by_type=dialect in ("paddledet", "paddleseg")):
        if name in TRAINING_ONLY or name.endswith("LabelEncode"):
            continue
        if name not in table:
            raise _Refusal(f"{at}: edgekit does not know this preprocessing operation, so it cannot feed the model "
                           "the way PaddleX does", HINT_MANUAL)
        table[name](b, args, at)
    return b


# --- tasks ---------------------------------------------------------------------------------------------

DB_DEFAULTS = {"thresh": 0.3, "box_thresh": 0.6, "unclip_ratio": 2.0}      # PaddleX's TextDetPredictor
DB_PADDLEX_ONLY = {"max_candidates": 1000, "use_dilation": False, "score_mode": "fast", "box_type": "quad"}
OTHER_POSTPROCESS = {"SLALabelDecode": "table_structure_recognition", "LaTeXOCRDecode": "formula_recognition",
                     "UniMERNetDecode": "formula_recognition", "MultiLabelThreshOutput": "multilabel_classification"}
TEXTLINE_NAMES = ("textline_ori",)
DOC_ORIENTATION_NAMES = ("doc_ori",)


def _db(args: Mapping, where: str, notes: list[str]) -> tuple[dict, list[str]]:
    task: dict[str, Any] = {"kind": TaskKind.ocr_det.value}
    for key, default in DB_DEFAULTS.items():
        task[key] = _number(args.get(key, default), f"{where}.{key}")
    for key, value in args.items():
        if key in DB_DEFAULTS:
            continue
        if DB_PADDLEX_ONLY.get(key, object()) != value:
            notes.append(f"{where}.{key} {value}: edgekit's DB post-process does not use it "
                         "(PaddleOCR's quad boxes, score_mode fast, no dilation, max_candidates 1000)")
    return task, []


def _ctc(args: Mapping, where: str, notes: list[str]) -> tuple[dict, list[str]]:
    characters = args.get("character_dict")
    if characters is None:
        characters = CTC_DEFAULT
        notes.append(f"{where} has no character_dict: PaddleX and edgekit decode with 0-9 a-z")
    if not isinstance(characters, list) or not characters:
        raise _Refusal(f"{where}.character_dict is not a list of tokens", HINT_EXPORT)
    for i, c in enumerate(characters):
        problem = token_problem(c)
        if problem:
            raise _Refusal(f"{where}.character_dict[{i}] is {c!r}: {problem} (quote entries YAML reads as "
                           "numbers or booleans)", HINT_EXPORT)
    space = args.get("use_space_char", True)          # PaddleX always appends the space class
    if not isinstance(space, bool):
        raise _Refusal(f"{where}.use_space_char is {space!r}, not true or false", HINT_EXPORT)
    for key in sorted(set(map(str, args)) - {"name", "character_dict", "use_space_char"}):
        notes.append(f"{where}.{key}: edgekit's CTC decoding does not use it")
    return {"kind": TaskKind.ocr_rec.value, "dictionary": list(characters), "use_space_char": space}, list(characters)


def _degrees(labels: list[str], where: str, notes: list[str]) -> list[str]:
    """Direction labels as edgekit's ocr pipeline reads them ("0", "180"): 0_degree -> 0."""
    found = [re.fullmatch(r"(\d+)(?:_?deg(?:ree)?s?)?", label) for label in labels]
    if all(found):
        degrees = [m.group(1) for m in found]
        if degrees != labels:
            notes.append(f"{where} labels {labels} written as {degrees} (edgekit's ocr pipeline rotates on '180')")
        return degrees
    notes.append(f"{where} labels {labels} are not directions: edgekit's ocr pipeline rotates only on label '180'")
    return labels


def _cls(args: Mapping, where: str, notes: list[str]) -> tuple[dict, list[str]]:
    labels = _degrees(_names(args.get("label_list", ["0", "180"]), f"{where}.label_list"), where, notes)
    if len(labels) < 2:
        raise _Refusal(f"{where}.label_list has {len(labels)} label(s); a direction classifier needs two", HINT_EXPORT)
    return {"kind": TaskKind.ocr_cls.value, "labels": labels}, labels


def _topk(args: Mapping, where: str, notes: list[str]) -> tuple[dict, list[str]]:
    labels = _names(args.get("label_list") or [], f"{where}.label_list")
    if args.get("topk", 1) not in (1, None):
        notes.append(f"{where}.topk {args['topk']}: edgekit reports the top-1 class")
    if args.get("class_id_map_file"):
        notes.append(f"{where}.class_id_map_file is a path on the exporting machine: ignored")
    return ({"kind": TaskKind.classification.value, "labels": labels} if labels
            else {"kind": TaskKind.classification.value}), labels


# PostProcess name -> (PaddleX module, reader of its settings)
POSTPROCESS = {"DBPostProcess": ("text_detection", _db), "CTCLabelDecode": ("text_recognition", _ctc),
               "ClsPostProcess": ("textline_orientation", _cls), "Topk": ("image_classification", _topk)}


def _postprocess(raw: Mapping, model_name: str, notes: list[str]) -> tuple[str, dict, list[str]]:
    """(PaddleX task, [task] table, labels) of a PreProcess/PostProcess file."""
    post = _args(raw.get("PostProcess"), "PostProcess")
    if "name" in post:                                   # paddleocr: {name: Op, settings...}
        steps = [(str(post["name"]), {k: v for k, v in post.items() if k != "name"}, "PostProcess")]
    else:                                                # paddleclas: {Op: settings, ...}
        steps = [(str(k), _args(v, f"PostProcess.{k}"), f"PostProcess.{k}") for k, v in post.items()]
    for name, args, where in steps:
        if name in POSTPROCESS:
            paddlex_task, reader = POSTPROCESS[name]
            if name == "Topk" and (any(n in model_name for n in TEXTLINE_NAMES) or _is_direction_pair(args)):
                return "textline_orientation", *_cls(args, where, notes)
            if name == "Topk" and any(n in model_name for n in DOC_ORIENTATION_NAMES):
                paddlex_task = "doc_img_orientation_classification"
            return (paddlex_task, *reader(args, where, notes))
        notes.append(f"{where} {name}: edgekit has no task for it; the bundle gets no task.json and parity compares "
                     "raw outputs")
        return OTHER_POSTPROCESS.get(name, "unknown"), {}, []
    notes.append("PostProcess is empty: edgekit has no task for the model; parity compares raw outputs")
    return "unknown", {}, []


def _is_direction_pair(args: Mapping) -> bool:
    labels = args.get("label_list")
    return isinstance(labels, list) and [str(v).split("_")[0] for v in labels] == ["0", "180"]


# --- the whole file ----------------------------------------------------------------------------------

KNOWN_SECTIONS = {
    "paddleocr": {"Global", "Hpi", "PreProcess", "PostProcess"},
    "paddleclas": {"Global", "Hpi", "PreProcess", "PostProcess"},
    "paddledet": {"Global", "Hpi", "Preprocess", "label_list", "mode", "draw_threshold", "metric", "use_dynamic_shape",
                  "arch", "min_subgraph_size", "NMS", "fpn_stride", "mask", "export_onnx", "export_eb", "tracker"},
    "paddleseg": {"Global", "Hpi", "Deploy"},
}


def _dialect(raw: Mapping) -> str:
    if "Deploy" in raw:
        return "paddleseg"
    if "Preprocess" in raw:
        return "paddledet"
    if "PreProcess" in raw:
        post = raw.get("PostProcess")
        return "paddleocr" if isinstance(post, Mapping) and "name" in post else "paddleclas"
    raise _Refusal("is not a PaddleX inference.yml: it has no PreProcess, Preprocess or Deploy section", HINT_EXPORT)


def _describe(path: Path, sha256: str, raw: Mapping, overridden: frozenset) -> ModelDescription:
    dialect = _dialect(raw)
    notes = [f"top-level {k!r} ignored" for k in sorted(map(str, raw)) if k not in KNOWN_SECTIONS[dialect]]
    model_name = str(_args(raw.get("Global"), "Global").get("model_name") or "")

    preprocess, declared = {}, None
    if "preprocess" in overridden:
        notes.append("preprocessing from edgekit.toml: inference.yml's is not read")
    else:
        built = _preprocess(raw, dialect)
        built.widen_up_to(_widest_width(raw, dialect, built.layout))
        preprocess = built.table()
        _validate_preprocess(preprocess)
        notes += built.notes
        channels = built.channels if built.channels != -1 else (1 if built.color == "gray" else 3)
        height, width = built.size
        declared = (-1, channels, height, width) if built.layout == "NCHW" else (-1, height, width, channels)

    input_name, stated, typical = _stated_shape(raw, dialect, notes)
    input_shape = _combine(declared, stated)

    labels: list[str] = []
    if dialect == "paddledet" and "task" not in overridden:
        paddlex_task = "layout_detection" if "layout" in model_name.lower() else "object_detection"
        labels = _names(raw.get("label_list") or [], "label_list")
        task = _detection_task(raw, labels, notes)
        _validate_task(task)
        kind = TaskKind.detection
    elif dialect == "paddleseg" and "task" not in overridden:
        paddlex_task, task, kind = "semantic_segmentation", {"kind": "segmentation"}, TaskKind.segmentation
        output_op = _args(raw.get("Deploy"), "Deploy").get("output_op")
        notes.append("segmentation: the class of a pixel is the argmax of the program's scores, or the class map "
                     "it gives" + (f" (Deploy.output_op {output_op} is inside the program)" if output_op else ""))
    elif dialect in ("paddledet", "paddleseg"):
        paddlex_task = ("semantic_segmentation" if dialect == "paddleseg" else
                        "layout_detection" if "layout" in model_name.lower() else "object_detection")
        task, kind = {}, TaskKind.detection if dialect == "paddledet" else TaskKind.segmentation
        if dialect == "paddledet":
            labels = _names(raw.get("label_list") or [], "label_list")
        notes.append("task from edgekit.toml: inference.yml's post-processing is not used")
    elif "task" in overridden:                  # what PaddleX would run, for the record; its problems do not matter
        try:
            paddlex_task, yml_task, _ = _postprocess(raw, model_name, [])
        except _Refusal:
            paddlex_task, yml_task = "unknown", {}
        task, kind = {}, TaskKind(yml_task["kind"]) if yml_task.get("kind") else None
        notes.append("task from edgekit.toml: inference.yml's PostProcess is not used")
    else:
        paddlex_task, task, labels = _postprocess(raw, model_name, notes)
        _validate_task(task)
        kind = TaskKind(task["kind"]) if task.get("kind") else None
    default = (built.default_size, built.default_from) if "preprocess" not in overridden else (None, "")
    return ModelDescription(path, sha256, dialect, model_name, paddlex_task, kind, preprocess, task, tuple(labels),
                            input_name, input_shape, tuple(notes), typical, *default)


def default_input(desc: ModelDescription, feeds: Sequence["InputSpec"],
                  given: Collection[str] = ()) -> tuple["InputSpec", str] | None:
    """The image input at the size inference.yml's resize gives (DetResizeForTest), when the program leaves both
    H and W open and the user named no shape for it (`given`: input names of --input / [model] inputs); with
    a sentence saying what was chosen. None when nothing is to be chosen."""
    from edgekit.contracts.settings import InputSpec

    if desc.default_size is None or not feeds:
        return None
    feed = _image_feed(desc, feeds)
    if feed.name in given or len(feed.shape) != 4:
        return None
    axes = (2, 3) if desc.preprocess.get("layout", "NCHW") == "NCHW" else (1, 2)
    if any(feed.shape[a] != -1 for a in axes):
        return None
    shape = list(feed.shape)
    (shape[axes[0]], shape[axes[1]]) = desc.default_size
    spec = InputSpec(feed.name, tuple(shape), feed.dtype)
    fitted = "letterboxed into" if desc.preprocess.get("resize_mode") == "letterbox" else "stretched to"
    said = (f"input {feed.name!r} has open height and width {list(feed.shape)}: built at {desc.default_size[0]}x"
            f"{desc.default_size[1]} from {desc.default_size_from}; pages are {fitted} it (give --input "
            f"{feed.name}:{'x'.join(str(d) for d in shape)} with other sizes to choose)")
    return spec, said


def _detection_task(raw: Mapping, labels: Sequence[str], notes: list[str]) -> dict:
    """A PaddleDetection export's task: its NMS rows (`MultiClassNMS` is inside the program; the build keeps or
    cuts it, lite/nms.py), its score threshold and cap, `draw_threshold` as the F1 threshold, label_list."""
    task: dict = {"kind": "detection", "head": "nms"}
    if labels:
        task["labels"] = list(labels)
    nms = _args(raw.get("NMS"), "NMS")
    if nms.get("score_threshold") is not None:
        task["score_threshold"] = _number(nms["score_threshold"], "NMS.score_threshold")
    if nms.get("keep_top_k") is not None and _number(nms["keep_top_k"], "NMS.keep_top_k") > 0:
        task["max_detections"] = int(_number(nms["keep_top_k"], "NMS.keep_top_k"))
    if raw.get("draw_threshold") is not None:
        task["f1_threshold"] = _number(raw["draw_threshold"], "draw_threshold")
    name = nms.get("name")
    if name not in (None, "MultiClassNMS", "MatrixNMS"):
        notes.append(f"NMS.name {name}: edgekit knows multiclass_nms3 and matrix_nms in the program")
    notes.append("detection: the program's NMS rows (head nms; the build keeps the op when Lite runs it on ARM, "
                 "else cuts it for task.json's NMS); PaddleDetection's im_shape and scale_factor inputs, when the "
                 "program has them, are bound into the graph")
    return task


def _validate_preprocess(table: dict) -> None:
    try:
        PreprocessSpec.from_mapping(table)
    except EdgekitError as exc:
        raise _Refusal(f"its preprocessing gives an unusable edgekit preprocess ({exc.message})", HINT_MANUAL) from None


def _validate_task(table: dict) -> None:
    if table:
        try:
            make_task(table["kind"], {k: v for k, v in table.items() if k != "kind"})
        except EdgekitError as exc:
            raise _Refusal(f"its post-processing gives an unusable edgekit task ({exc.message})", HINT_EXPORT) from None


def _stated_shape(raw: Mapping, dialect: str, notes: list[str]) -> tuple[str | None, tuple | None, tuple | None]:
    """(name, shape, opt shape) of the image input the file states outright: Deploy.input_shape, or Hpi's
    [min, opt, max] shapes per input (a dimension is fixed when all three agree)."""
    deploy = _args(raw.get("Deploy"), "Deploy") if dialect == "paddleseg" else {}
    if deploy.get("input_shape") is not None:
        shape = deploy["input_shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            raise _Refusal(f"Deploy.input_shape is {shape!r}, not a list of integers", HINT_EXPORT)
        return None, tuple([-1] + [d if d > 0 else -1 for d in shape[1:]]) if shape else None, None
    backends = _args(raw.get("Hpi"), "Hpi").get("backend_configs")
    for backend in (backends.values() if isinstance(backends, Mapping) else ()):
        shapes = (backend.get("trt_dynamic_shapes") or backend.get("dynamic_shapes")) if isinstance(backend, Mapping) else None
        if not isinstance(shapes, Mapping) or not shapes:
            continue
        # the image input: PaddleX writes a detector's inputs sorted by name, so im_shape ([N, 2]) comes first
        name, ranges = next(((n, r) for n, r in shapes.items() if n not in GEOMETRY_INPUTS), next(iter(shapes.items())))
        if (isinstance(ranges, list) and ranges and all(isinstance(r, list) and len(r) == len(ranges[0]) for r in ranges)
                and all(isinstance(d, int) and not isinstance(d, bool) for r in ranges for d in r)):
            fixed = (-1,) + tuple(col[0] if len(set(col)) == 1 else -1 for col in list(zip(*ranges))[1:])
            return str(name), fixed, (-1,) + tuple(ranges[len(ranges) // 2][1:])
        notes.append(f"Hpi dynamic shapes of {name!r} are malformed: ignored")
        return None, None, None
    return None, None, None


def _widest_width(raw: Mapping, dialect: str, layout: str) -> int | None:
    """The width of the widest image input the file states (the last of Hpi's [min, opt, max] shapes), if any."""
    name, fixed, _ = _stated_shape(raw, dialect, [])     # None unless Hpi's ranges are well formed
    if fixed is None or len(fixed) != 4 or dialect == "paddleseg":
        return None
    backends = _args(raw.get("Hpi"), "Hpi").get("backend_configs")
    for backend in backends.values():
        shapes = (backend.get("trt_dynamic_shapes") or backend.get("dynamic_shapes")) if isinstance(backend, Mapping) else None
        if isinstance(shapes, Mapping) and name in shapes:      # the image input's, as _stated_shape chose it
            width = shapes[name][-1][3 if layout == "NCHW" else 2]
            return width if width > 0 else None
    return None


def _combine(declared: tuple[int, ...] | None, stated: tuple[int, ...] | None) -> tuple[int, ...] | None:
    if declared is None or stated is None:
        return declared or stated
    if len(declared) != len(stated) or any(a != -1 and b != -1 and a != b for a, b in zip(declared, stated)):
        raise _Refusal(f"contradicts itself: its preprocessing makes inputs {list(declared)} but it states the input "
                       f"shape {list(stated)}", HINT_EXPORT)
    return tuple(a if a != -1 else b for a, b in zip(declared, stated))


# --- against the program, and under edgekit.toml ---------------------------------------------------

def _image_feed(desc: ModelDescription, feeds: Sequence["InputSpec"]) -> "InputSpec":
    """The feed the yml's preprocessing fills: the one it names, the only one, else image / x / the first 4-D one."""
    by_name = {f.name: f for f in feeds}
    if desc.input_name in by_name:
        return by_name[desc.input_name]
    if len(feeds) == 1:
        return feeds[0]
    named = [by_name[n] for n in ("image", "x") if n in by_name] + [f for f in feeds if len(f.shape) == 4]
    return named[0] if named else feeds[0]


def check_against_program(desc: ModelDescription, feeds: Sequence["InputSpec"]) -> ModelDescription:
    """`desc` checked against the program's inputs (the shapes the build uses, [model].inputs applied):
    InputModelError when they contradict; a size the yml leaves open and the program fixes is filled in."""
    if not feeds:
        raise InputModelError(f"{desc.source} describes an image input but the program has no inputs",
                              "check that the program and inference.yml belong together")
    feed = _image_feed(desc, feeds)
    shape = tuple(int(d) for d in feed.shape)
    fix = "use the inference.yml exported with this program, or delete it and write [preprocess] and [task] in edgekit.toml"
    declared = desc.input_shape
    if declared is None:
        return desc
    if len(shape) != len(declared):
        raise InputModelError(f"{desc.source} describes a {len(declared)}-D image input {list(declared)}, but the "
                              f"program's input {feed.name!r} is {list(shape)}", fix)
    nchw = desc.preprocess.get("layout", "NCHW") == "NCHW"
    axes = {1: "channels", 2: "height", 3: "width"} if nchw else {1: "height", 2: "width", 3: "channels"}
    for axis, what in axes.items():
        if declared[axis] != -1 and shape[axis] != -1 and declared[axis] != shape[axis]:
            raise InputModelError(f"{desc.source} says the input has {what} {declared[axis]} ({list(declared)}), but the "
                                  f"program's input {feed.name!r} has {shape[axis]} ({list(shape)})", fix)
    merged = tuple(d if d != -1 else s for d, s in zip(declared, shape))
    pre, notes = dict(desc.preprocess), list(desc.notes)
    if desc.input_name and desc.input_name != feed.name:
        notes.append(f"inference.yml names the image input {desc.input_name!r}; the program's is {feed.name!r}")
    height, width = (shape[2], shape[3]) if nchw else (shape[1], shape[2])
    if pre and height > 0 and width > 0 and "crop" not in pre:
        resize = pre.get("resize")
        if pre.get("resize_mode") == "fit_height" and resize and (resize[1] != width or "max_width" in pre):
            pre["resize"] = [resize[0], width]
            if pre.pop("max_width", None) is not None:
                pre.pop("width_mode", None)
            notes.append(f"lines are padded to the program's fixed width {width}"
                         + (f", not inference.yml's {resize[1]}" if resize[1] != width else ""))
        elif pre.get("resize_mode", "stretch") in ("stretch", "letterbox") and resize != [height, width]:
            pre["resize"] = [height, width]
            notes.append(f"images are {'letterboxed into' if pre.get('resize_mode') == 'letterbox' else 'stretched to'} "
                         f"the program's input size {height}x{width}")
    return replace(desc, preprocess=pre, input_shape=merged, input_name=feed.name, notes=tuple(notes))


def merge_tables(desc: ModelDescription, preprocess: Mapping | None = None,
                 task: Mapping | None = None) -> tuple[dict, dict]:
    """The [preprocess] and [task] tables the build uses: the yml's, overridden key by key by edgekit.toml's.
    A toml [task] of another kind replaces the yml's task whole (none of its options apply)."""
    merged_pre = {**desc.preprocess, **dict(preprocess or {})}
    if merged_pre.get("width_mode") != "dynamic" or merged_pre.get("resize_mode") != "fit_height":
        merged_pre.pop("max_width", None)           # the yml's widest line, meaningless once the toml fixes the width
    task = dict(task or {})
    if task.get("kind") not in (None, desc.task.get("kind")):
        return merged_pre, task
    return merged_pre, {**desc.task, **task}
