"""A dynamic-width bundle's golden vectors at another tensor width (issue 23): `golden.widths` in the manifest and
golden.json, read through edgekit.contracts.golden (GoldenGroup); a group that does not fit the main golden inputs is refused in one
line before anything reads it. The padding is PreprocessSpec's own (tiers.wide_feeds)."""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest
from typer.testing import CliRunner
from untrusted_bundles import make_bundle, rewrite_manifest

from edgekit.consumers import inspection
from edgekit.build.bundle import MANIFEST, write_golden, write_golden_width
from edgekit.cli import app
from edgekit.contracts.files import TensorDecl
from edgekit.contracts.manifest import Manifest
from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.core.errors import BundleError, EdgekitError
from edgekit.verify.tiers import wide_feeds

WIDE = np.full((2, 1, 8, 12), 0.5, np.float32)


def wide_bundle(tmp_path):
    """The fake bundle (golden x 2x1x8x8) with a group at width 12, written as the build writes it."""
    bundle = make_bundle(tmp_path)
    group = write_golden_width(bundle / "golden", 12, {"x": WIDE}, [np.ones((2, 2), np.float32)], ["y"])
    rewrite_manifest(bundle, lambda m: m["golden"].update(widths=[group]))
    return bundle


def test_a_group_is_read_with_its_width_axis_and_a_fixed_bundle_has_none(tmp_path):
    bundle = wide_bundle(tmp_path)
    checked = inspection.verified(bundle)
    main, wide = inspection.golden_groups(checked)
    assert (main.width, main.label, wide.width, wide.axis, wide.count, wide.label) == (None, "", 12, 3, 2, " at width 12")
    assert [o.file for o in wide.inputs + wide.outputs] == ["golden/w12_input_0.npy", "golden/w12_output_0.npy"]
    feeds, reference, names = inspection.golden_vectors(checked, wide)
    assert np.array_equal(feeds["x"], WIDE) and names == ["y"] and reference[0].shape == (2, 2)
    declared = (TensorDecl("x", (-1, 1, 8, 8), "float32"),)
    assert wide.expect(declared) == (TensorDecl("x", (-1, 1, 8, -1), "float32"),) and main.expect(declared) == declared
    # a fixed-width bundle: no widths key anywhere, one group
    plain = make_bundle(tmp_path / "plain")
    assert "widths" not in json.loads((plain / "golden" / "golden.json").read_text())
    assert len(inspection.golden_groups(inspection.verified(plain))) == 1


def test_write_golden_adds_no_key_for_a_fixed_width_bundle(tmp_path):
    entry = write_golden(tmp_path, {"x": np.zeros((2, 1, 8, 8), np.float32)}, [np.ones((2, 2), np.float32)], ["y"],
                         {"min_cosine": 0.99, "max_abs": None}, None)
    assert sorted(entry) == ["count", "inputs", "outputs", "tolerances"]


@pytest.mark.parametrize("edit, needle", [
    (lambda g: g.update(width=0), r"golden.widths\[0\].width is 0, expected a positive integer"),
    (lambda g: g.update(width=True), r"golden.widths\[0\].width is true"),
    (lambda g: g.pop("count"), r"golden.widths\[0\].count is missing"),
    (lambda g: g["inputs"][0].update(shape=[2, 1, 8, 10]), r"group at width 12: input 'x' is float32 \[2, 1, 8, 10\]"),
    (lambda g: g["inputs"][0].update(shape=[2, 1, 9, 12]), r"with one axis 12 wide"),
    (lambda g: g["inputs"][0].update(shape=[2, 1, 8]), r"input 'x' is float32 \[2, 1, 8\]"),
    (lambda g: g["inputs"][0].update(shape=[3, 1, 8, 12]), r"for 2 samples"),
    (lambda g: g.update(count=0), r"for 0 samples"),
    (lambda g: g["inputs"][0].update(dtype="int64"), r"input 'x' is int64"),
    (lambda g: g["inputs"][0].update(name="z"), r"inputs \['z'\] are not the model's inputs \['x'\]"),
    (lambda g: g["inputs"].append(copy.deepcopy(g["inputs"][0])), r"inputs \['x', 'x'\] are not"),
    (lambda g: g["outputs"][0].update(name="z"), r"outputs \['z'\] are not the model's outputs \['y'\]"),
    (lambda g: g.update(width=8, inputs=[dict(g["inputs"][0], shape=[2, 1, 8, 8])]), r"with one axis 8 wide"),
    (lambda g: g["inputs"][0].update(file="golden/w/input_0.npy"), r"golden input files \['input_0.npy', "
                                                                     r"'input_0.npy'\] share a file name"),
])
def test_a_group_that_does_not_fit_the_golden_inputs_is_refused_in_one_line(tmp_path, edit, needle):
    bundle = wide_bundle(tmp_path)
    rewrite_manifest(bundle, lambda m: edit(m["golden"]["widths"][0]))
    with pytest.raises(BundleError, match=needle) as info:
        inspection.replay_golden(bundle)              # refused before Paddle-Lite sees a tensor
    assert "\n" not in info.value.message


def test_the_same_width_twice_is_refused(tmp_path):
    bundle = wide_bundle(tmp_path)
    rewrite_manifest(bundle, lambda m: m["golden"]["widths"].append(copy.deepcopy(m["golden"]["widths"][0])))
    with pytest.raises(BundleError, match=r"golden.widths lists width \[12, 12\] more than once"):
        Manifest.read(bundle)


def test_a_group_file_that_holds_another_shape_is_refused_when_read(tmp_path):
    bundle = wide_bundle(tmp_path)
    np.save(bundle / "golden" / "w12_input_0.npy", np.zeros((2, 1, 8, 16), np.float32))
    rewrite_manifest(bundle, lambda m: None)
    checked = inspection.verified(bundle)
    with pytest.raises(BundleError, match=r"w12_input_0.npy is float32 \[2, 1, 8, 16\], but the manifest says float32 "
                                          r"\[2, 1, 8, 12\]"):
        inspection.golden_vectors(checked, inspection.golden_groups(checked)[1])


def test_parity_on_a_mismatched_group_is_one_error_line_and_no_traceback(tmp_path):
    bundle = wide_bundle(tmp_path)
    rewrite_manifest(bundle, lambda m: m["golden"]["widths"][0]["inputs"][0].update(shape=[2, 1, 8, 10]))
    result = CliRunner().invoke(app, ["parity", str(bundle)])
    assert result.exit_code == 10 and "Traceback" not in result.output, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "golden group at width 12: input 'x' is float32 [2, 1, 8, 10]" in errors[0], result.output


def test_seeded_mutations_of_a_group_give_a_typed_error_or_work(tmp_path, monkeypatch):
    """Like tests/unit/test_manifest_mutations.py, on the widths entry: never anything but an EdgekitError."""
    from test_manifest_mutations import mutate

    monkeypatch.setattr(inspection, "_host_runtime_version", lambda: None)
    bundle = wide_bundle(tmp_path)
    original = json.loads((bundle / MANIFEST).read_text())
    rng, outcomes = random.Random(23), {}
    for _ in range(300):
        manifest = copy.deepcopy(original)
        manifest["golden"]["widths"] = mutate(manifest["golden"]["widths"], rng.randrange)
        (bundle / MANIFEST).write_text(json.dumps(manifest))
        try:
            checked = inspection.verified(bundle)
            for group in inspection.golden_groups(checked):
                inspection.golden_vectors(checked, group)
            outcome = "ok"
        except EdgekitError as error:
            outcome = type(error).__name__
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("BundleError", 0) > 150, outcomes


def test_the_wide_padding_is_what_preprocess_spec_pads():
    """A line narrower than resize[1]: its 320-wide tensor padded to max_width by wide_feeds equals, bit for bit, the
    tensor PreprocessSpec makes for the same line when the tensor is max_width wide."""
    base = dict(color="rgb", resize=[48, 320], resize_mode="fit_height", pad_value=-0.25, scale=1 / 255,
                mean=[0.5], std=[0.5], layout="NCHW")
    dynamic = PreprocessSpec.from_mapping(dict(base, width_mode="dynamic", max_width=1280, width_step=32))
    wide = PreprocessSpec.from_mapping(dict(base, resize=[48, 1280]))
    line = np.random.default_rng(0).integers(0, 256, (30, 150, 3), dtype=np.uint8)
    narrow = dynamic.apply(line)
    assert narrow.shape == (3, 48, 320)
    padded = wide_feeds({"x": narrow[None]}, dynamic)["x"]
    assert padded.shape == (1, 3, 48, 1280) and np.array_equal(padded[0], wide.apply(line))


def test_the_device_suite_prepares_each_group_with_its_width_free_and_labels_its_checks(tmp_path):
    """preflight (no device, no process: the runtime is given) and checks.golden on a width group's outputs."""
    from dataclasses import replace

    from edgekit.device import checks
    from edgekit.device.preflight import Runtime, prepare

    bundle = wide_bundle(tmp_path)
    p = prepare(0, bundle, {"aarch64": Runtime("aarch64", None, None, "v2.13-rc")}, None, None, 0)
    assert p.error is None, p.error
    (w,) = p.wide
    assert (w.width, w.expect, list(w.feeds)) == (12, ("x:-1x1x8x-1:float32",), ["x"])
    assert w.feeds["x"] == bundle / "golden" / "w12_input_0.npy" and p.expect == ("x:-1x1x8x8:float32",)
    _, found = checks.golden(replace(p, reference=w.reference), [[np.ones((2, 2), np.float32)]], "qemu", " at width 12")
    assert [c.name for c in found] == ["golden at width 12 cosine [y]"] and found[0].status == "passed"
    _, found = checks.golden(replace(p, reference=w.reference), [[-np.ones((2, 2), np.float32)]], "qemu", " at width 12")
    assert found[0].status == "failed"
