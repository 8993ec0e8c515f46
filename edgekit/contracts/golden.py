"""The golden index (golden/golden.json, the same entry as manifest.json's `golden`): the golden vectors and images
the device suite and the apps' self-tests replay, and the tolerances a device must meet on them."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from edgekit.contracts.files import (COUNT, DTYPE, GOLDEN_INDEX, NUMBER, PATH, POSITIVE, REBUILD, STRING, Json, Nullable,
                                     TensorDecl, write_json)
from edgekit.core.errors import BundleError

GOLDEN_TENSOR = {"name": STRING, "file": PATH, "shape": [COUNT], "dtype": DTYPE}
# a dynamic-width bundle's golden vectors at another tensor width (preprocess width_mode = "dynamic")
GOLDEN_GROUP = {"width": POSITIVE, "inputs": [GOLDEN_TENSOR], "outputs": [GOLDEN_TENSOR], "count": COUNT}
# reduced-precision detection / segmentation bundles: the floors of their golden results (a task's `golden_key`)
FLOORS = {"detections": {"min_recall": NUMBER, "min_precision": NUMBER, "min_iou": NUMBER, "score_threshold": NUMBER},
          "masks": {"min_agreement": NUMBER}}
GOLDEN = {"inputs": [GOLDEN_TENSOR], "outputs": [GOLDEN_TENSOR], "count": COUNT, "labels?": PATH,
          "widths?": [GOLDEN_GROUP],
          "tolerances": {"min_cosine": NUMBER, "max_abs?": Nullable(NUMBER),
                         **{f"{key}?": spec for key, spec in FLOORS.items()}}}


def write_golden_index(folder: Path, entry: Mapping[str, Json]) -> None:
    """golden/golden.json: the golden vectors and images the device suite and the apps' self-tests replay (the
    manifest's `golden` holds the same entry)."""
    write_json(folder / GOLDEN_INDEX, dict(entry), ascii_only=False)


@dataclass(frozen=True)
class GoldenTensor:
    """One golden .npy of the bundle, as the index lists it."""

    name: str
    file: str                  # relative to the bundle
    shape: tuple[int, ...]
    dtype: str

    @classmethod
    def of(cls, entry: Mapping[str, Json]) -> "GoldenTensor":
        return cls(entry["name"], entry["file"], tuple(entry["shape"]), entry["dtype"])


@dataclass(frozen=True)
class GoldenTolerances:
    """What a device replaying the golden vectors must meet: a cosine floor per output, a max abs ceiling (FP32),
    and for reduced-precision detection / segmentation bundles the floors of their golden results."""

    min_cosine: float
    max_abs: float | None
    floors: Mapping[str, Mapping[str, Json]]      # a task's golden_key ("detections", "masks") -> its floors

    def floor(self, key: str | None) -> Mapping[str, Json] | None:
        return self.floors.get(key) if key else None


@dataclass(frozen=True)
class GoldenGroup:
    """One set of golden vectors: the main one (`width` None: the evaluation tensors' own shape) or one of a
    dynamic-width bundle's `golden.widths`, whose inputs differ from the main ones only in axis `axis` (= width)."""

    width: int | None
    axis: int | None
    count: int
    inputs: tuple[GoldenTensor, ...]
    outputs: tuple[GoldenTensor, ...]

    @property
    def label(self) -> str:
        """What a replay's lines add for this group ("" for the main one)."""
        return "" if self.width is None else f" at width {self.width}"

    def expect(self, declared: Sequence[TensorDecl]) -> tuple[TensorDecl, ...]:
        """The model's declared inputs with this group's width axis free (-1): what a runner must accept for it."""
        if self.axis is None:
            return tuple(declared)
        return tuple(TensorDecl(d.name, d.shape[:self.axis] + (-1,) + d.shape[self.axis + 1:], d.dtype)
                     for d in declared)


@dataclass(frozen=True)
class Golden:
    """manifest.json's `golden`, checked against the model it belongs to: the main group, the groups at other
    widths (a dynamic-width bundle), the labels file and the tolerances."""

    groups: tuple[GoldenGroup, ...]            # the main group first
    labels: str | None
    tolerances: GoldenTolerances

    @property
    def main(self) -> GoldenGroup:
        return self.groups[0]

    @property
    def widths(self) -> tuple[GoldenGroup, ...]:
        """A dynamic-width bundle's groups at other widths (empty for a fixed-width bundle)."""
        return self.groups[1:]

    @classmethod
    def of(cls, golden: Mapping[str, Json], inputs: Sequence[TensorDecl], outputs: Sequence[str],
           file: Path) -> "Golden":
        """From an entry that conforms to GOLDEN: golden vectors that fit the model's `inputs` and `outputs`, a
        BundleError (one line) for the first thing that does not."""
        declared = {d.name: d for d in inputs}
        names = [g["name"] for g in golden["inputs"]]
        if len(declared) != len(inputs) or sorted(names) != sorted(declared):
            raise BundleError(f"{file}: golden inputs {names} are not the model's inputs {list(declared)}", REBUILD)
        for g in golden["inputs"]:
            want = declared[g["name"]]
            fits = len(g["shape"]) == len(want.shape) > 0 and g["shape"][0] == golden["count"] and all(
                w in (-1, d) for w, d in zip(want.shape[1:], g["shape"][1:]))
            if g["dtype"] != want.dtype or not fits:
                raise BundleError(f"{file}: golden input {g['name']!r} is {g['dtype']} {g['shape']} for "
                                  f"{golden['count']} samples; the model takes {want.dtype} {list(want.shape)} "
                                  "(-1 = any)", REBUILD)
        found = [o["name"] for o in golden["outputs"]]
        if found != list(outputs):
            raise BundleError(f"{file}: golden outputs {found} are not the model's outputs {list(outputs)}", REBUILD)
        widths = [g["width"] for g in golden.get("widths", [])]
        if len(set(widths)) != len(widths):
            raise BundleError(f"{file}: golden.widths lists width {widths} more than once", REBUILD)
        main = GoldenGroup(None, None, golden["count"], tuple(GoldenTensor.of(t) for t in golden["inputs"]),
                           tuple(GoldenTensor.of(t) for t in golden["outputs"]))
        groups = (main,) + tuple(
            GoldenGroup(g["width"], width_axis(g, golden, outputs, file), g["count"],
                        tuple(GoldenTensor.of(t) for t in g["inputs"]), tuple(GoldenTensor.of(t) for t in g["outputs"]))
            for g in golden.get("widths", []))
        pushed = [t.file.rsplit("/", 1)[-1] for g in groups for t in g.inputs]
        if len(set(pushed)) != len(pushed):       # the device suite pushes every golden input into one folder
            raise BundleError(f"{file}: golden input files {pushed} share a file name", REBUILD)
        tolerances = golden["tolerances"]
        floors = {key: copy.deepcopy(tolerances[key]) for key in FLOORS if key in tolerances}
        return cls(groups, golden.get("labels"),
                   GoldenTolerances(tolerances["min_cosine"], tolerances.get("max_abs"), floors))


def width_axis(group: Mapping[str, Json], golden: Mapping[str, Json], outputs: Sequence[str], file: Path) -> int:
    """The axis where a `golden.widths` group's inputs hold its width: each input is the main golden input's shape
    but for the sample count and that one axis, of the model's dtype. A BundleError (one line) otherwise."""
    where = f"{file}: golden group at width {group['width']}"
    names = [g["name"] for g in group["inputs"]]
    main = {g["name"]: g for g in golden["inputs"]}
    if sorted(names) != sorted(main) or len(set(names)) != len(names):
        raise BundleError(f"{where}: inputs {names} are not the model's inputs {sorted(main)}", REBUILD)
    if [o["name"] for o in group["outputs"]] != list(outputs):
        raise BundleError(f"{where}: outputs {[o['name'] for o in group['outputs']]} are not the model's outputs "
                          f"{list(outputs)}", REBUILD)
    axes = set()
    for g in group["inputs"]:
        want = main[g["name"]]["shape"]
        other = [a for a in range(1, len(want)) if len(g["shape"]) == len(want) and g["shape"][a] != want[a]]
        if (g["dtype"] != main[g["name"]]["dtype"] or len(g["shape"]) != len(want) or g["shape"][0] != group["count"]
                or group["count"] == 0 or len(other) != 1 or g["shape"][other[0]] != group["width"]):
            raise BundleError(f"{where}: input {g['name']!r} is {g['dtype']} {g['shape']} for {group['count']} samples; "
                              f"it must be the golden input's {main[g['name']]['dtype']} {want} with one axis "
                              f"{group['width']} wide", REBUILD)
        axes.add(other[0])
    if len(axes) != 1:
        raise BundleError(f"{where}: its inputs hold the width in different axes {sorted(axes)}", REBUILD)
    return axes.pop()
