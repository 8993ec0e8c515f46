"""edgekit.model.data: preprocessing spec validation and arithmetic, image folders, tensor files."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.model.data import load_images, load_samples, load_tensors, read_labels
from edgekit.core.errors import DataError


def solid(bgr, h=2, w=2) -> np.ndarray:
    image = np.zeros((h, w, 3), np.uint8)
    image[:, :] = bgr
    return image


# --- PreprocessSpec validation --------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, fragment", [
    ({"color": "hsv"}, "preprocess.color is 'hsv'"),
    ({"layout": "CHW"}, "preprocess.layout is 'CHW'"),
    ({"interpolation": "cubic"}, "preprocess.interpolation is 'cubic'"),
    ({"mean": (0.1, 0.2)}, "preprocess.mean has 2 values for 3 channel(s)"),
    ({"color": "gray", "std": (1.0, 1.0, 1.0)}, "preprocess.std has 3 values for 1 channel(s)"),
    ({"std": (1.0, 0.0, 1.0)}, "preprocess.std contains 0"),
])
def test_spec_validation(kwargs, fragment):
    with pytest.raises(DataError) as info:
        PreprocessSpec(**kwargs)
    assert fragment in info.value.message
    assert info.value.exit_code == 4


def test_spec_accepts_one_or_per_channel_values():
    assert PreprocessSpec(mean=(0.5,), std=(0.25, 0.5, 1.0)).channels == 3
    assert PreprocessSpec(color="gray", mean=(0.5,), std=(0.5,)).channels == 1


def test_from_mapping_converts_and_rejects_unknown_keys():
    spec = PreprocessSpec.from_mapping({"color": "bgr", "resize": [4, 6], "crop": [2, 2], "mean": [1, 2, 3], "std": [2]})
    assert spec.resize == (4, 6) and spec.crop == (2, 2)
    assert spec.mean == (1.0, 2.0, 3.0) and spec.std == (2.0,)
    with pytest.raises(DataError, match="unknown preprocess key.*colour, size"):
        PreprocessSpec.from_mapping({"colour": "rgb", "size": 3})


def test_to_json_records_the_order():
    record = PreprocessSpec(color="gray").to_json()
    assert record["order"] == ["decode", "color", "resize", "crop", "scale", "normalize", "layout", "pad"]
    assert record["color"] == "gray" and record["layout"] == "NCHW" and record["resize_mode"] == "stretch"


def test_fit_height_keeps_the_aspect_ratio_and_pads_on_the_right():
    spec = PreprocessSpec(color="rgb", resize=(4, 12), resize_mode="fit_height", scale=1.0, mean=(1.0,), pad_value=-7.0)
    line = np.full((2, 3, 3), 5, np.uint8)            # aspect 1.5 -> 6 columns at height 4
    out = spec.apply(line)
    assert out.shape == (3, 4, 12)
    assert (out[:, :, :6] == 4.0).all() and (out[:, :, 6:] == -7.0).all()
    wide = spec.apply(np.zeros((2, 40, 3), np.uint8))  # wider than 12 at height 4: squeezed to 12, no padding
    assert wide.shape == (3, 4, 12) and (wide == -1.0).all()


def test_dynamic_width_follows_the_line_in_steps_between_the_width_and_max_width():
    spec = PreprocessSpec(color="rgb", resize=(4, 12), resize_mode="fit_height", scale=1.0, mean=(1.0,), pad_value=-7.0,
                          width_mode="dynamic", max_width=40, width_step=8)
    narrow = spec.apply(np.full((2, 3, 3), 5, np.uint8))          # 6 columns: padded to the width, 12
    assert narrow.shape == (3, 4, 12) and (narrow[:, :, :6] == 4.0).all() and (narrow[:, :, 6:] == -7.0).all()
    wide = spec.apply(np.full((2, 10, 3), 5, np.uint8))           # 20 columns, its own width: the tensor 24 (3 x 8)
    assert wide.shape == (3, 4, 24) and (wide[:, :, :20] == 4.0).all() and (wide[:, :, 20:] == -7.0).all()
    widest = spec.apply(np.zeros((2, 100, 3), np.uint8))          # 200 columns: squeezed to max_width, no padding
    assert widest.shape == (3, 4, 40) and (widest == -1.0).all()
    fixed = PreprocessSpec(color="rgb", resize=(4, 12), resize_mode="fit_height", scale=1.0, mean=(1.0,), pad_value=-7.0)
    assert np.array_equal(narrow, fixed.apply(np.full((2, 3, 3), 5, np.uint8)))
    assert spec.geometry(2, 10).resized_width == 20 and spec.tensor_width(20) == 24


def test_dynamic_width_resizes_a_long_line_as_paddleocr_does():
    """PaddleOCR's resize_norm_img: ratio = w / h; a line wider than the base width gets int(H * ratio) columns (its
    tensor's width), not ceil. A PP-OCRv5 page line of 28 x 456 pixels: 781 columns (ceil gave 782, and the
    recogniser read "office" as "ofice", bench/bench_ocrv5_system.py)."""
    spec = PreprocessSpec(resize=(48, 320), resize_mode="fit_height", width_mode="dynamic", max_width=3200)
    assert spec.line_width(28, 456) == 781 and spec.geometry(28, 456).resized_width == 781
    assert spec.apply(np.zeros((28, 456, 3), np.uint8)).shape == (3, 48, 800)      # 781 columns padded to 800
    assert spec.line_width(31, 479) == 741                                         # 741.68: truncated
    assert spec.line_width(30, 100) == 160                                         # fits in 320: ceil, as before
    assert spec.line_width(28, 185) == 318                                         # 317.14 -> ceil 318 <= 320
    assert spec.line_width(10, 67) == 321                                          # 321.6 -> int, 321 > 320
    assert spec.line_width(1, 1000) == 3200                                        # at most max_width
    fixed = PreprocessSpec(resize=(48, 320), resize_mode="fit_height")
    assert fixed.line_width(28, 185) == 318 and fixed.line_width(28, 456) == 320   # fixed width: unchanged


def test_dynamic_width_round_trips_and_fixed_files_carry_no_width_keys():
    spec = PreprocessSpec(resize=(48, 320), resize_mode="fit_height", width_mode="dynamic", max_width=1280)
    record = spec.to_json()
    assert (record["width_mode"], record["max_width"], record["width_step"]) == ("dynamic", 1280, 32)
    assert PreprocessSpec.from_mapping({k: v for k, v in record.items() if k != "order"}) == spec
    assert "width_mode" not in PreprocessSpec(resize=(48, 320), resize_mode="fit_height").to_json()


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(resize=(4, 8), resize_mode="fit_height", width_mode="wide"), "width_mode is 'wide'"),
    (dict(resize=(4, 8), resize_mode="fit_height", width_mode="dynamic"), "dynamic needs resize_mode fit_height and max_width"),
    (dict(resize=(4, 8), resize_mode="fit_height", width_mode="dynamic", max_width=6), "max_width >= resize"),
    (dict(resize=(4, 8), width_mode="dynamic", max_width=16), "dynamic needs resize_mode fit_height"),
    (dict(resize=(4, 8), resize_mode="fit_height", max_width=16), "max_width is given with width_mode fixed"),
    (dict(resize=(4, 8), resize_mode="fit_height", width_mode="dynamic", max_width=16, width_step=0), "width_step is 0"),
    (dict(resize=(4, 8), resize_mode="fit_height", width_mode="dynamic", max_width=10 ** 6), "max_width"),
])
def test_width_mode_checks(kwargs, fragment):
    with pytest.raises(DataError, match=fragment):
        PreprocessSpec(**kwargs)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(resize_mode="fit"), "resize_mode is 'fit'"),
    (dict(resize_mode="fit_height"), "fit_height needs resize"),
    (dict(resize_mode="fit_height", resize=(4, 8), crop=(2, 2)), "fit_height needs resize"),
])
def test_resize_mode_checks(kwargs, fragment):
    with pytest.raises(DataError, match=fragment):
        PreprocessSpec(**kwargs)


# --- apply: colour --------------------------------------------------------------------------------

def test_blue_bgr_pixel_lands_in_channel_2_for_rgb_and_0_for_bgr():
    blue = solid((255, 0, 0))
    rgb = PreprocessSpec(color="rgb").apply(blue)
    bgr = PreprocessSpec(color="bgr").apply(blue)
    assert rgb.shape == bgr.shape == (3, 2, 2)
    assert rgb.dtype == np.float32
    np.testing.assert_array_equal(rgb[:, 0, 0], [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(bgr[:, 0, 0], [1.0, 0.0, 0.0])


def test_gray_from_bgr_uses_luma_weights():
    spec = PreprocessSpec(color="gray", scale=1.0)
    assert spec.apply(solid((255, 0, 0))).shape == (1, 2, 2)
    assert spec.apply(solid((255, 0, 0)))[0, 0, 0] == 29.0     # 0.114 * 255
    assert spec.apply(solid((0, 0, 255)))[0, 1, 1] == 76.0     # 0.299 * 255


def test_gray_image_input():
    gray = np.full((3, 2), 100, np.uint8)
    assert PreprocessSpec(color="gray", scale=1.0).apply(gray).shape == (1, 3, 2)
    as_rgb = PreprocessSpec(color="rgb", scale=1.0).apply(gray)
    assert as_rgb.shape == (3, 3, 2)
    assert set(np.unique(as_rgb)) == {100.0}


# --- apply: geometry ------------------------------------------------------------------------------

def test_centre_crop_without_resize():
    image = np.arange(48, dtype=np.uint8).reshape(6, 8)
    out = PreprocessSpec(color="gray", crop=(2, 4), scale=1.0).apply(image)
    np.testing.assert_array_equal(out[0], [[18, 19, 20, 21], [26, 27, 28, 29]])


def test_resize_then_centre_crop():
    image = np.arange(48, dtype=np.uint8).reshape(6, 8)
    spec = PreprocessSpec(color="gray", resize=(12, 16), crop=(4, 4), interpolation="nearest", scale=1.0)
    out = spec.apply(image)
    assert out.shape == (1, 4, 4)
    # 2x nearest upscale, then rows 4..7 / cols 6..9 of the 12x16 image = source rows 2,3 / cols 3,4
    np.testing.assert_array_equal(out[0], [[19, 19, 20, 20], [19, 19, 20, 20], [27, 27, 28, 28], [27, 27, 28, 28]])


def test_resize_takes_height_then_width():
    out = PreprocessSpec(color="rgb", resize=(5, 7)).apply(solid((1, 2, 3), h=10, w=3))
    assert out.shape == (3, 5, 7)


def test_crop_larger_than_image():
    with pytest.raises(DataError, match="crop 4x4 is larger than the resized image 3x3"):
        PreprocessSpec(resize=(3, 3), crop=(4, 4)).apply(solid((0, 0, 0), 8, 8))


# --- apply: arithmetic and layout -------------------------------------------------------------------

def test_scale_mean_std_bgr():
    spec = PreprocessSpec(color="bgr", scale=0.5, mean=(1.0, 2.0, 3.0), std=(2.0, 4.0, 5.0))
    out = spec.apply(solid((10, 20, 30)))
    np.testing.assert_allclose(out[:, 1, 0], [2.0, 2.0, 2.4], rtol=1e-6)   # (10*.5-1)/2, (20*.5-2)/4, (30*.5-3)/5


def test_scale_mean_std_rgb_reorders_before_normalising():
    spec = PreprocessSpec(color="rgb", scale=0.5, mean=(1.0, 2.0, 3.0), std=(2.0, 4.0, 5.0))
    out = spec.apply(solid((10, 20, 30)))
    np.testing.assert_allclose(out[:, 0, 1], [7.0, 2.0, 0.4], rtol=1e-6)   # R=30, G=20, B=10


def test_default_scale_and_single_mean_std():
    out = PreprocessSpec(color="gray", mean=(0.5,), std=(0.5,)).apply(np.array([[0, 255]], np.uint8))
    np.testing.assert_allclose(out[0, 0], [-1.0, 1.0], rtol=1e-6)


def test_nhwc_is_the_transpose_of_nchw():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (4, 5, 3), dtype=np.uint8)
    nchw = PreprocessSpec(layout="NCHW").apply(image)
    nhwc = PreprocessSpec(layout="NHWC").apply(image)
    assert nchw.shape == (3, 4, 5) and nhwc.shape == (4, 5, 3)
    np.testing.assert_array_equal(nhwc.transpose(2, 0, 1), nchw)
    assert nhwc.flags["C_CONTIGUOUS"] and nchw.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(nhwc[1, 2], image[1, 2, ::-1] / 255.0, rtol=1e-6)


# --- image folders --------------------------------------------------------------------------------

def write_png(path: Path, image: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), image)


GRAY = PreprocessSpec(color="gray", scale=1.0)


def test_load_images_with_class_folders_and_labels(tmp_path):
    write_png(tmp_path / "cat" / "a.png", np.full((4, 4), 10, np.uint8))
    write_png(tmp_path / "cat" / "b.png", np.full((4, 4), 20, np.uint8))
    write_png(tmp_path / "dog" / "c.png", np.full((4, 4), 30, np.uint8))
    samples = load_images(tmp_path, GRAY, "image", ["dog", "cat"])
    assert len(samples) == 3
    assert samples.inputs["image"].shape == (3, 1, 4, 4)
    np.testing.assert_array_equal(samples.inputs["image"][:, 0, 0, 0], [10, 20, 30])
    np.testing.assert_array_equal(samples.labels, [1, 1, 0])
    assert samples.labels.dtype == np.int64
    assert samples.files == ("cat/a.png", "cat/b.png", "dog/c.png")
    assert samples.source == str(tmp_path)
    head = samples.head(2)
    assert len(head) == 2 and head.files == ("cat/a.png", "cat/b.png")
    np.testing.assert_array_equal(head.labels, [1, 1])


def test_load_images_without_labels_and_bgra(tmp_path):
    write_png(tmp_path / "x.png", np.dstack([solid((255, 0, 0), 3, 3), np.full((3, 3), 128, np.uint8)]))
    samples = load_images(tmp_path, PreprocessSpec(color="rgb"), "image")
    assert samples.labels is None
    assert samples.inputs["image"].shape == (1, 3, 3, 3)
    np.testing.assert_array_equal(samples.inputs["image"][0, :, 1, 1], [0.0, 0.0, 1.0])


def test_load_images_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_images(tmp_path / "missing", GRAY, "image")
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "notes.txt").write_text("no images")
    with pytest.raises(DataError, match="holds no images"):
        load_images(empty, GRAY, "image")


def test_load_images_undecodable_file(tmp_path):
    write_png(tmp_path / "good.png", np.zeros((2, 2), np.uint8))
    (tmp_path / "z_broken.png").write_bytes(b"this is not a png")
    with pytest.raises(DataError, match="cannot decode image .*z_broken.png"):
        load_images(tmp_path, GRAY, "image")


def test_load_images_16_bit_rejected(tmp_path):
    write_png(tmp_path / "deep.png", np.full((2, 2), 40000, np.uint16))
    with pytest.raises(DataError, match="uint16, not 8-bit"):
        load_images(tmp_path, GRAY, "image")


def test_load_images_class_not_in_labels(tmp_path):
    write_png(tmp_path / "cat" / "a.png", np.zeros((2, 2), np.uint8))
    write_png(tmp_path / "horse" / "b.png", np.zeros((2, 2), np.uint8))
    with pytest.raises(DataError, match="class folder 'horse'"):
        load_images(tmp_path, GRAY, "image", ["cat", "dog"])


def test_load_images_of_different_sizes_without_resize(tmp_path):
    write_png(tmp_path / "a.png", np.zeros((2, 2), np.uint8))
    write_png(tmp_path / "b.png", np.zeros((3, 3), np.uint8))
    with pytest.raises(DataError, match="different shapes"):
        load_images(tmp_path, GRAY, "image")
    resized = load_images(tmp_path, PreprocessSpec(color="gray", resize=(4, 4)), "image")
    assert resized.inputs["image"].shape == (2, 1, 4, 4)


def test_load_images_of_lines_at_their_own_width_pads_them_to_the_widest(tmp_path):
    """A dynamic-width spec (PP-OCRv5 rec read from its inference.yml) on a folder of lines: one line wider than
    resize[1] made the INT8 build stop ("give tensors of different shapes", bench_ocrv5 calibration lines)."""
    write_png(tmp_path / "a.png", np.full((8, 8), 255, np.uint8))      # 4 columns at height 4: tensor 12, padded
    write_png(tmp_path / "b.png", np.full((8, 40), 255, np.uint8))     # 20 columns: its tensor 24 wide
    spec = PreprocessSpec(color="gray", resize=(4, 12), resize_mode="fit_height", scale=1.0, pad_value=-7.0,
                          width_mode="dynamic", max_width=40, width_step=8)
    x = load_images(tmp_path, spec, "image").inputs["image"]
    assert x.shape == (2, 1, 4, 24)
    assert (x[0, :, :, :4] == 255.0).all() and (x[0, :, :, 4:] == -7.0).all()
    assert (x[1, :, :, :20] == 255.0).all() and (x[1, :, :, 20:] == -7.0).all()
    nhwc = PreprocessSpec(**{**spec.__dict__, "layout": "NHWC"})
    assert load_images(tmp_path, nhwc, "image").inputs["image"].shape == (2, 4, 24, 1)


def test_read_labels(tmp_path):
    (tmp_path / "labels.txt").write_text("cat\n\n dog \n", encoding="utf-8")
    assert read_labels(tmp_path / "labels.txt") == ["cat", "dog"]
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(DataError, match="is empty"):
        read_labels(tmp_path / "empty.txt")
    with pytest.raises(DataError, match="cannot read labels file"):
        read_labels(tmp_path / "missing.txt")


# --- tensor files ---------------------------------------------------------------------------------

def test_load_tensors_npy(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.float64).reshape(3, 2))
    samples = load_tensors(tmp_path / "x.npy", ["image"])
    assert samples.inputs["image"].dtype == np.float64     # kept: the pipeline casts to the feed's dtype
    np.testing.assert_array_equal(samples.inputs["image"], [[0, 1], [2, 3], [4, 5]])
    assert samples.labels is None and len(samples) == 3
    with pytest.raises(DataError, match="holds one array but the model has 2 inputs"):
        load_tensors(tmp_path / "x.npy", ["a", "b"])


def test_load_tensors_npz_with_labels(tmp_path):
    a, b = np.ones((4, 2), np.float32), np.zeros((4, 3), np.int64)
    np.savez(tmp_path / "d.npz", a=a, b=b, labels=np.array([0, 1, 2, 3], np.int32))
    samples = load_tensors(tmp_path / "d.npz", ["a", "b"])
    assert set(samples.inputs) == {"a", "b"}
    assert samples.inputs["b"].dtype == np.int64
    np.testing.assert_array_equal(samples.labels, [0, 1, 2, 3])
    assert samples.labels.dtype == np.int64


def test_load_tensors_positional_array_is_taken_for_the_single_input(tmp_path):
    np.savez(tmp_path / "d.npz", np.full((2, 3), 7.0, np.float32), labels=np.array([1, 0]))
    samples = load_tensors(tmp_path / "d.npz", ["image"])
    np.testing.assert_array_equal(samples.inputs["image"], np.full((2, 3), 7.0))
    np.testing.assert_array_equal(samples.labels, [1, 0])


def test_load_tensors_wrongly_named_single_array_is_an_error(tmp_path):
    np.savez(tmp_path / "d.npz", whatever=np.full((2, 3), 7.0, np.float32))
    with pytest.raises(DataError, match=r"no array for input\(s\) image \(it has whatever\)"):
        load_tensors(tmp_path / "d.npz", ["image"])


def test_load_tensors_rejects_string_labels_and_object_arrays(tmp_path):
    np.savez(tmp_path / "s.npz", image=np.ones((2, 3), np.float32), labels=np.array(["a", "b"]))
    with pytest.raises(DataError, match="labels in .* are <U1"):
        load_tensors(tmp_path / "s.npz", ["image"])
    np.savez(tmp_path / "o.npz", image=np.array([object(), object()], dtype=object))
    with pytest.raises(DataError, match="cannot read arrays"):
        load_tensors(tmp_path / "o.npz", ["image"])


def test_a_text_file_is_not_data(tmp_path):
    (tmp_path / "calib.txt").write_text("x")
    with pytest.raises(DataError, match="neither an image folder nor a .npy/.npz"):
        load_samples(tmp_path / "calib.txt", ["image"], PreprocessSpec(), None)


@pytest.mark.parametrize("raw, needle", [({"resize": [0, 0]}, "preprocess.resize"), ({"scale": "x"}, "preprocess.scale")])
def test_preprocess_sizes_and_scale_are_checked(raw, needle):
    with pytest.raises(DataError, match=needle):
        PreprocessSpec.from_mapping(raw)


def test_load_tensors_missing_input_name(tmp_path):
    np.savez(tmp_path / "d.npz", a=np.ones((2, 2)), c=np.ones((2, 2)))
    with pytest.raises(DataError, match=r"no array for input\(s\) b \(it has a, c\)"):
        load_tensors(tmp_path / "d.npz", ["a", "b"])


@pytest.mark.parametrize("arrays", [
    {"a": np.ones((3, 2)), "labels": np.array([0, 1])},
    {"a": np.ones((3, 2)), "b": np.ones((2, 2))},
], ids=["labels", "inputs"])
def test_load_tensors_mismatched_counts(tmp_path, arrays):
    np.savez(tmp_path / "d.npz", **arrays)
    names = [k for k in arrays if k != "labels"]
    with pytest.raises(DataError, match="different sample counts"):
        load_tensors(tmp_path / "d.npz", names)


def test_load_tensors_unreadable(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"not numpy at all")
    with pytest.raises(DataError, match="cannot read tensors"):
        load_tensors(tmp_path / "junk.npz", ["x"])


# --- load_samples ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_load_samples_rejects_non_finite(tmp_path, bad):
    x = np.zeros((2, 3), np.float32)
    x[1, 2] = bad
    np.save(tmp_path / "x.npy", x)
    with pytest.raises(DataError, match="input 'x' .* contains NaN or Inf"):
        load_samples(tmp_path / "x.npy", ["x"], None, None)


def test_load_samples_tensor_and_folder_paths(tmp_path):
    np.save(tmp_path / "x.npy", np.full((2, 3), 0.5, np.float32))
    assert len(load_samples(tmp_path / "x.npy", ["x"], None, None)) == 2
    with pytest.raises(DataError, match="does not exist"):
        load_samples(tmp_path / "missing.npz", ["x"], None, None)
    np.save(tmp_path / "none.npy", np.zeros((0, 3), np.float32))
    with pytest.raises(DataError, match="holds no samples"):
        load_samples(tmp_path / "none.npy", ["x"], None, None)

    folder = tmp_path / "imgs"
    write_png(folder / "0" / "a.png", np.full((2, 2), 51, np.uint8))
    samples = load_samples(folder, ["x"], PreprocessSpec(color="gray"), ["0"])
    np.testing.assert_allclose(samples.inputs["x"], np.full((1, 1, 2, 2), 0.2), rtol=1e-6)
    np.testing.assert_array_equal(samples.labels, [0])
    with pytest.raises(DataError, match="no preprocessing is configured"):
        load_samples(folder, ["x"], None, None)
    with pytest.raises(DataError, match="single-input models only"):
        load_samples(folder, ["x", "y"], PreprocessSpec(color="gray"), None)


def test_samples_spread_picks_evenly_spaced_samples():
    from edgekit.model.data import Samples

    samples = Samples({"x": np.arange(10, dtype=np.float32)[:, None]}, np.arange(10)[::-1],
                      tuple(f"f{i}.png" for i in range(10)), "src")
    picked = samples.spread(4)
    np.testing.assert_array_equal(picked.inputs["x"][:, 0], [0, 3, 6, 9])
    np.testing.assert_array_equal(picked.labels, [9, 6, 3, 0])
    assert picked.files == ("f0.png", "f3.png", "f6.png", "f9.png")
    assert samples.spread(10) is samples
    assert len(Samples({"x": np.zeros((5, 1))}).spread(2)) == 2
