"""edgekit.export.paddlex: PaddleX / PaddleOCR 3.x inference.yml -> [preprocess] and [task] tables (pure logic)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from edgekit.core import limits

from edgekit.build import config
from edgekit.contracts.settings import InputSpec, load_toml
from edgekit.contracts.preprocess import PreprocessSpec
from edgekit.core.errors import InputModelError
from edgekit.export import paddlex
from edgekit.export.paddlex import check_against_program, find_model_yml, merge_tables, read_model_yml
from edgekit.tasks import TaskKind, make_task

DATA = Path(__file__).resolve().parents[1] / "data" / "paddlex"
EXAMPLES = Path(config.__file__).parents[1] / "examples" / "ppocr"
IMAGENET = {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "scale": 1.0 / 255.0}
REC_DICTIONARY = (["\u3000", "一", "中", "文", "字", "识", "别"] + list("0123456789abcdefghijklmnopqrstuvwxyzABCXYZ")
                  + ["'", '"', ":", "#", "-", "&", "*", "!", "%", "@", "?", "|", ">", "[", "{", ",", ".", "/", "\\",
                     "～", "€"])


def sample(name: str) -> paddlex.ModelDescription:
    return read_model_yml(DATA / name / "inference.yml")


def write(tmp_path: Path, text: str, name: str = "inference.yml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refused(tmp_path: Path, text: str, **kwargs) -> str:
    with pytest.raises(InputModelError) as caught:
        read_model_yml(write(tmp_path, text), **kwargs)
    message = caught.value.message
    assert "\n" not in message and caught.value.hint, message     # one line, with what to do next
    return message


def spec_of(table: dict) -> PreprocessSpec:
    return PreprocessSpec.from_mapping(table)                      # what config.py does with a [preprocess] table


def ocr_yml(transform_ops: str, postprocess: str = "  name: DBPostProcess\n") -> str:
    return f"Global:\n  model_name: test\nPreProcess:\n  transform_ops:\n{transform_ops}PostProcess:\n{postprocess}"


# --- each sample file -> its tables ---------------------------------------------------------------

def test_text_detection_sample():
    desc = sample("PP-OCRv5_mobile_det")
    assert (desc.dialect, desc.model_name, desc.paddlex_task, desc.kind) == (
        "paddleocr", "PP-OCRv5_mobile_det", "text_detection", TaskKind.ocr_det)
    assert desc.preprocess == {"color": "bgr", "interpolation": "linear", "layout": "NCHW", "resize": [960, 960],
                               "resize_mode": "letterbox", "pad_value": 0.0, **IMAGENET}
    assert desc.default_size == (960, 960) and "DetResizeForTest (resize_long 960)" in desc.default_size_from
    assert desc.task == {"kind": "ocr_det", "thresh": 0.3, "box_thresh": 0.6, "unclip_ratio": 1.5}
    assert desc.input_name == "x" and desc.input_shape == (-1, 3, -1, -1)       # Hpi: H and W range 160..1280
    assert desc.typical_shape == (-1, 3, 640, 640)                              # Hpi's opt shape
    assert any("DetResizeForTest (resize_long 960): PaddleX scales each page so its long side is 960, then rounds "
               "each side up to a multiple of 128; edgekit letterboxes each page" in n for n in desc.notes)
    task = make_task(desc.task["kind"], {k: v for k, v in desc.task.items() if k != "kind"})
    assert (task.thresh, task.box_thresh, task.unclip_ratio) == (0.3, 0.6, 1.5)


def test_text_detection_pages_take_the_programs_fixed_size():
    desc = check_against_program(sample("PP-OCRv5_mobile_det"), [InputSpec("x", (-1, 3, 640, 960))])
    assert desc.preprocess["resize"] == [640, 960] and desc.input_shape == (-1, 3, 640, 960)
    assert spec_of(desc.preprocess).apply(np.zeros((100, 50, 3), np.uint8)).shape == (3, 640, 960)
    assert any("letterboxed into the program's input size 640x960" in n for n in desc.notes)


def test_det_resize_image_shape_with_keep_ratio_letterboxes(tmp_path):
    """DetResizeForTest image_shape [H, W] + keep_ratio: PaddleX scales a page to height H and its width by the
    aspect ratio; a fixed input keeps the ratio as a letterbox into H x W (stretching used to change the ratio).
    Without keep_ratio the page is stretched to H x W, as PaddleX does."""
    desc = read_model_yml(write(tmp_path, ocr_yml(
        "  - DetResizeForTest: {image_shape: [736, 1280], keep_ratio: true}\n  - ToCHWImage: null\n")))
    assert desc.preprocess["resize"] == [736, 1280] and desc.preprocess["resize_mode"] == "letterbox"
    assert desc.default_size == (736, 1280) and "image_shape [736, 1280]" in desc.default_size_from
    assert any("keep_ratio): PaddleX scales each page to height 736" in n and "edgekit letterboxes" in n
               for n in desc.notes), desc.notes
    g = spec_of(desc.preprocess).geometry(1300, 1000)            # a portrait page: height fills, width by ratio
    assert (g.resized_height, g.resized_width) == (736, 566)
    spec, said = paddlex.default_input(desc, [InputSpec("x", (-1, 3, -1, -1))])
    assert spec == InputSpec("x", (-1, 3, 736, 1280)) and "pages are letterboxed into it" in said
    plain = read_model_yml(write(tmp_path, ocr_yml(
        "  - DetResizeForTest: {image_shape: [736, 1280]}\n  - ToCHWImage: null\n")))
    assert plain.preprocess["resize"] == [736, 1280] and plain.preprocess.get("resize_mode", "stretch") == "stretch"


def test_text_detection_pages_keep_their_aspect_ratio():
    """PaddleOCR resizes a page for DB keeping its aspect ratio (DetResizeForTest resize_long): a 1300x1000 page
    fills the 960x960 input's height, 738 columns wide and centred, the border at the normalised mean (0)."""
    spec = spec_of(sample("PP-OCRv5_mobile_det").preprocess)
    page = np.full((1300, 1000, 3), 255, np.uint8)
    g = spec.geometry(1300, 1000)
    assert (g.resized_height, g.resized_width, g.top, g.left) == (960, 738, 0, 111)
    x = spec.apply(page)
    assert x.shape == (3, 960, 960) and np.all(x[:, :, :111] == 0) and np.all(x[:, :, 111 + 738:] == 0)
    assert np.allclose(x[:, :, 111:111 + 738], ((1.0 - np.array(IMAGENET["mean"])) / IMAGENET["std"])[:, None, None])
    assert g.point_to_image(111 + 369, 480) == (500.0, 650.0)          # the tensor's centre is the page's


def test_open_page_size_comes_from_det_resize_for_test(tmp_path):
    """PP-OCRv5_mobile_det's input is x: [-1, 3, -1, -1]: without --input, the build takes DetResizeForTest's size
    and says so; a user's --input, a fixed program or a yml without a size leave the choice alone."""
    desc = sample("PP-OCRv5_mobile_det")
    spec, said = paddlex.default_input(desc, [InputSpec("x", (-1, 3, -1, -1))])
    assert spec == InputSpec("x", (-1, 3, 960, 960))
    assert said.startswith("input 'x' has open height and width [-1, 3, -1, -1]: built at 960x960 from inference.yml's "
                           "PreProcess.transform_ops[2] DetResizeForTest (resize_long 960)")
    assert "pages are letterboxed into it" in said and "--input x:-1x3x960x960" in said
    assert paddlex.default_input(desc, [InputSpec("x", (-1, 3, -1, -1))], {"x"}) is None
    assert paddlex.default_input(desc, [InputSpec("x", (-1, 3, 640, -1))]) is None
    assert paddlex.default_input(desc, [InputSpec("x", (-1, 3, 640, 640))]) is None
    for args, side, words, paddlex_does in (
            ("{limit_side_len: 736, limit_type: min}", 736, "limit_side_len 736, limit_type min",
             "scales a page up until its short side is at least 736 (never down)"),
            ("{limit_side_len: 960, limit_type: max}", 960, "limit_side_len 960, limit_type max",
             "scales a page down until its long side is at most 960 (never up)"),
            ("{limit_side_len: 1000}", 1024, "limit_side_len 1000, rounded up to a multiple of 32",
             "scales a page up until its short side is at least 1000"),
            ("{limit_side_len: 960, limit_type: resize_long}", 960, "limit_side_len 960, limit_type resize_long",
             "scales each page so its long side is 960, each side then rounded to a multiple of 32")):
        desc = read_model_yml(write(tmp_path, ocr_yml(f"  - DetResizeForTest: {args}\n  - ToCHWImage: null\n")))
        assert desc.default_size == (side, side) and desc.preprocess["resize"] == [side, side]
        assert desc.preprocess["resize_mode"] == "letterbox" and words in desc.default_size_from
        assert any(paddlex_does in n and f"edgekit letterboxes each page into the model's fixed input ({side}x{side}"
                   in n for n in desc.notes), desc.notes
    plain = read_model_yml(write(tmp_path, ocr_yml("  - DetResizeForTest: null\n  - ToCHWImage: null\n")))
    assert plain.default_size is None and "resize" not in plain.preprocess
    assert paddlex.default_input(plain, [InputSpec("x", (-1, 3, -1, -1))]) is None


def test_text_recognition_sample_and_dictionary_convention():
    desc = sample("PP-OCRv5_mobile_rec")
    assert (desc.paddlex_task, desc.kind, desc.input_shape) == ("text_recognition", TaskKind.ocr_rec, (-1, 3, 48, -1))
    assert desc.typical_shape == (-1, 3, 48, 320)
    assert desc.preprocess == {"color": "bgr", "resize": [48, 320], "resize_mode": "fit_height", "pad_value": 0.0,
                               "width_mode": "dynamic", "max_width": 3200, "interpolation": "linear",
                               "scale": 1.0 / 255.0, "mean": [0.5], "std": [0.5], "layout": "NCHW"}
    assert desc.task == {"kind": "ocr_rec", "dictionary": REC_DICTIONARY, "use_space_char": True}
    assert list(desc.labels) == REC_DICTIONARY and len(REC_DICTIONARY) == 70
    task = make_task("ocr_rec", {k: v for k, v in desc.task.items() if k != "kind"})
    # PaddleX's CTCLabelDecode: ["blank"] + character_dict + [" "]; edgekit's ocr_rec: the same classes
    assert task.characters == ("",) + tuple(REC_DICTIONARY) + (" ",) and len(task.characters) == 72
    steps = [REC_DICTIONARY.index(c) + 1 for c in "aa"] + [0, REC_DICTIONARY.index("a") + 1, 71,
                                                          REC_DICTIONARY.index("中") + 1, REC_DICTIONARY.index("'") + 1]
    probs = np.eye(72, dtype=np.float32)[steps][None]
    assert task.postprocess([probs])[0]["text"] == "aa 中'"


def test_text_recognition_width_follows_the_program_height_must_match():
    desc = sample("PP-OCRv5_mobile_rec")
    wide = check_against_program(desc, [InputSpec("x", (-1, 3, 48, 480))])
    assert wide.preprocess["resize"] == [48, 480] and wide.input_shape == (-1, 3, 48, 480)
    assert spec_of(wide.preprocess).apply(np.zeros((20, 40, 3), np.uint8)).shape == (3, 48, 480)
    assert check_against_program(desc, [InputSpec("x", (-1, 3, 48, -1))]).preprocess["resize"] == [48, 320]
    assert "width_mode" not in wide.preprocess and "max_width" not in wide.preprocess   # a fixed program: fixed lines
    with pytest.raises(InputModelError, match=r"height 48 .* has 32") as caught:
        check_against_program(desc, [InputSpec("x", (-1, 3, 32, 320))])
    assert "inference.yml" in caught.value.hint
    with pytest.raises(InputModelError, match=r"channels 3 .* has 1 \(\[-1, 1, 48, 320\]\)"):
        check_against_program(desc, [InputSpec("x", (-1, 1, 48, 320))])
    with pytest.raises(InputModelError, match=r"4-D image input .* is \[-1, 320\]"):
        check_against_program(desc, [InputSpec("x", (-1, 320))])


def test_lines_are_as_wide_as_paddlex_makes_them():
    """PaddleX sizes a line's tensor by the line (at least RecResizeImg's 320); a page's lines run to 20:1 and more.
    Squeezed to 320, PP-OCRv5 rec read 29 of 48 page lines exactly instead of 48 ('over paid beforedaily shippedy';
    bench/bench_ocrv5_system.py). The yml's Hpi max shape bounds the width."""
    desc = check_against_program(sample("PP-OCRv5_mobile_rec"), [InputSpec("x", (-1, 3, 48, -1))])
    spec = spec_of(desc.preprocess)
    assert spec.dynamic_width and spec.max_width == 3200 and spec.resize == (48, 320)
    assert spec.apply(np.zeros((24, 480, 3), np.uint8)).shape == (3, 48, 960)      # 20:1 -> 960 wide, not squeezed
    assert spec.apply(np.zeros((24, 100, 3), np.uint8)).shape == (3, 48, 320)      # short lines padded to 320
    assert any("edgekit too (width_mode dynamic), up to Hpi's widest input 3200" in n for n in desc.notes)
    # edgekit.toml fixing the width drops the yml's max_width (a fixed spec with max_width is refused)
    pre, _ = merge_tables(desc, {"width_mode": "fixed"})
    assert "max_width" not in pre and not spec_of(pre).dynamic_width
    pre, _ = merge_tables(desc, {"max_width": 1280})
    assert spec_of(pre).max_width == 1280 and spec_of(pre).dynamic_width


def test_lines_without_a_stated_widest_input_stay_fixed(tmp_path):
    text = ocr_yml("  - RecResizeImg: {image_shape: [3, 48, 320]}\n", "  name: CTCLabelDecode\n  character_dict: [a]\n")
    desc = read_model_yml(write(tmp_path, text))
    assert "width_mode" not in desc.preprocess and desc.input_shape == (-1, 3, 48, -1)
    assert any("edgekit's input is 320 wide (longer lines are squeezed; no Hpi max width stated)" in n for n in desc.notes)
    hpi = ("Hpi:\n  backend_configs:\n    paddle_infer:\n      trt_dynamic_shapes:\n"
           "        x: [[1, 3, 48, 100], [1, 3, 48, 320], [8, 3, 48, 320]]\n")
    assert "width_mode" not in read_model_yml(write(tmp_path, hpi + text)).preprocess


def test_textline_orientation_sample():
    desc = sample("PP-LCNet_x1_0_textline_ori")
    assert (desc.dialect, desc.paddlex_task, desc.kind) == ("paddleclas", "textline_orientation", TaskKind.ocr_cls)
    assert desc.preprocess == {"color": "rgb", "resize": [80, 160], "interpolation": "linear", "layout": "NCHW",
                               **IMAGENET}
    assert desc.task == {"kind": "ocr_cls", "labels": ["0", "180"]} and desc.labels == ("0", "180")
    assert desc.input_shape == (-1, 3, 80, 160) and desc.typical_shape is None      # no Hpi section
    assert check_against_program(desc, [InputSpec("x", (-1, 3, -1, -1))]).preprocess == desc.preprocess
    with pytest.raises(InputModelError, match=r"height 80 .* has 48"):
        check_against_program(desc, [InputSpec("x", (-1, 3, 48, 192))])


def test_image_classification_sample():
    desc = sample("PP-LCNet_x1_0")
    assert (desc.paddlex_task, desc.kind, desc.input_shape) == ("image_classification", TaskKind.classification,
                                                                (-1, 3, 224, 224))
    assert desc.preprocess == {"color": "rgb", "resize": [256, 256], "crop": [224, 224], "interpolation": "linear",
                               "layout": "NCHW", **IMAGENET}
    names = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead"]
    assert desc.task == {"kind": "classification", "labels": names} and list(desc.labels) == names
    assert any("resize_short 256" in n for n in desc.notes) and any("topk 5" in n for n in desc.notes)
    checked = check_against_program(desc, [InputSpec("x", (-1, 3, -1, -1))])
    assert checked.preprocess == desc.preprocess and checked.input_shape == (-1, 3, 224, 224)
    assert spec_of(desc.preprocess).apply(np.zeros((300, 400, 3), np.uint8)).shape == (3, 224, 224)


def test_object_detection_sample_picks_the_image_feed():
    desc = sample("PicoDet-S")
    assert (desc.dialect, desc.paddlex_task, desc.kind) == ("paddledet", "object_detection", TaskKind.detection)
    assert desc.labels == ("person", "bicycle", "car", "motorcycle")
    assert desc.task == {"kind": "detection", "head": "nms", "labels": list(desc.labels), "score_threshold": 0.025,
                         "max_detections": 100, "f1_threshold": 0.5}
    assert desc.preprocess == {"color": "rgb", "resize": [320, 320], "interpolation": "linear", "layout": "NCHW",
                               **IMAGENET}
    assert any("interp 2 (cubic)" in n for n in desc.notes) and any("the program's NMS rows" in n for n in desc.notes)
    feeds = [InputSpec("im_shape", (-1, 2)), InputSpec("image", (-1, 3, 320, 320)), InputSpec("scale_factor", (-1, 2))]
    assert check_against_program(desc, feeds).input_name == "image"
    renamed = check_against_program(sample("PP-OCRv5_mobile_det"), [InputSpec("image", (-1, 3, 640, 640))])
    assert renamed.input_name == "image" and any("names the image input 'x'" in n for n in renamed.notes)
    with pytest.raises(InputModelError, match=r"'image' has 416"):
        check_against_program(desc, [feeds[0], InputSpec("image", (-1, 3, 416, 416)), feeds[2]])


PADDLEX3_DETECTOR_HPI = """Hpi:
  backend_configs:
    paddle_infer:
      trt_dynamic_shapes: &id001
        im_shape:
        - [1, 2]
        - [1, 2]
        - [1, 2]
        image:
        - [1, 3, 320, 320]
        - [1, 3, 320, 320]
        - [1, 3, 320, 320]
        scale_factor:
        - [1, 2]
        - [1, 2]
        - [1, 2]
    tensorrt:
      dynamic_shapes: *id001
"""


def test_a_paddlex3_detectors_hpi_shapes_name_the_image_not_im_shape(tmp_path):
    """PaddleX 3 writes a detector's Hpi shapes with the inputs sorted by name, im_shape ([N, 2]) first: the image
    input is the one they state, and the yml does not contradict its own Resize."""
    text = (DATA / "PicoDet-S" / "inference.yml").read_text(encoding="utf-8") + PADDLEX3_DETECTOR_HPI
    desc = read_model_yml(write(tmp_path, text))
    assert desc.input_name == "image" and desc.input_shape == (-1, 3, 320, 320)
    assert desc.typical_shape == (-1, 3, 320, 320)
    feeds = [InputSpec("image", (-1, 3, 320, 320)), InputSpec("im_shape", (-1, 2)), InputSpec("scale_factor", (-1, 2))]
    assert check_against_program(desc, feeds).input_name == "image"


def test_semantic_segmentation_sample():
    desc = sample("PP-LiteSeg-T")
    assert (desc.dialect, desc.paddlex_task, desc.kind, desc.input_shape) == (
        "paddleseg", "semantic_segmentation", TaskKind.segmentation, (-1, 3, -1, -1))
    assert desc.task == {"kind": "segmentation"}
    assert desc.preprocess == {"color": "rgb", "interpolation": "linear", "layout": "NCHW", "scale": 1.0 / 255.0,
                               "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}
    assert check_against_program(desc, [InputSpec("x", (-1, 3, 512, 1024))]).preprocess["resize"] == [512, 1024]


# --- the same as the hand-written example tomls --------------------------------------------------

def example_preprocess(name: str) -> PreprocessSpec:
    return spec_of(load_toml(EXAMPLES / name)["preprocess"])


def test_paddleocr_direction_classifier_equals_the_example_cls_toml(tmp_path):
    path = write(tmp_path, ocr_yml("  - DecodeImage: {channel_first: false, img_mode: RGB}\n"
                                   "  - ClsLabelEncode: null\n  - ClsResizeImg: {image_shape: [3, 48, 192]}\n"
                                   "  - KeepKeys: {keep_keys: [image, label]}\n",
                                   "  name: ClsPostProcess\n  label_list: ['0', '180']\n"))
    desc = read_model_yml(path)
    assert (desc.paddlex_task, desc.kind, desc.input_shape) == ("textline_orientation", TaskKind.ocr_cls,
                                                                (-1, 3, 48, 192))
    assert spec_of(desc.preprocess) == example_preprocess("cls.toml")
    assert desc.task == {"kind": "ocr_cls", "labels": ["0", "180"]}


def test_recognition_sample_equals_the_example_rec_toml_but_for_the_channel_order():
    desc = sample("PP-OCRv5_mobile_rec")
    # the rapidocr ONNX example is fed RGB; a PaddleX model says BGR (DecodeImage img_mode) and is fed BGR; the
    # example's lines are 320 wide at most, the yml's as wide as Hpi's max shape (3200)
    fixed = {k: v for k, v in desc.preprocess.items() if k not in ("width_mode", "max_width")}
    assert spec_of({**fixed, "color": "rgb"}) == example_preprocess("rec.toml")


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)              # a valid TOML basic string
    return "[" + ", ".join(toml_value(v) for v in value) + "]"


@pytest.mark.parametrize("name", ["PP-OCRv5_mobile_det", "PP-OCRv5_mobile_rec", "PP-LCNet_x1_0_textline_ori",
                                  "PP-LCNet_x1_0"])
def test_tables_resolve_through_config_as_a_toml(tmp_path, name):
    desc = sample(name)
    lines = ['[model]', 'model_file = "inference.json"', "[preprocess]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in desc.preprocess.items()]
    lines += ["[task]"] + [f"{k} = {toml_value(v)}" for k, v in desc.task.items()]
    cfg = config.resolve(write(tmp_path, "\n".join(lines) + "\n", "edgekit.toml"), {}, environ={})
    assert cfg.data.preprocess == spec_of(desc.preprocess)
    assert cfg.task.kind == desc.kind.value
    assert cfg.task.options == {k: v for k, v in desc.task.items() if k != "kind"}


# --- edgekit.toml over the yml ----------------------------------------------------------------------

def test_merge_tables_toml_wins_key_by_key():
    desc = sample("PP-OCRv5_mobile_det")
    pre, task = merge_tables(desc, {"color": "rgb", "resize": [320, 640]}, {"box_thresh": 0.5})
    assert pre == {**desc.preprocess, "color": "rgb", "resize": [320, 640]}
    assert task == {**desc.task, "box_thresh": 0.5}
    assert merge_tables(desc) == (desc.preprocess, desc.task) and merge_tables(desc)[0] is not desc.preprocess
    _, other = merge_tables(desc, None, {"kind": "classification", "labels": ["a", "b"]})
    assert other == {"kind": "classification", "labels": ["a", "b"]}       # another task: none of the DB options


def test_sections_edgekit_toml_gives_are_not_read(tmp_path):
    text = ocr_yml("  - GridMask: {ratio: 0.5}\n  - ToCHWImage: null\n")
    assert "GridMask" in refused(tmp_path, text)
    desc = read_model_yml(tmp_path / "inference.yml", overridden={"preprocess"})
    assert desc.preprocess == {} and desc.input_shape is None and desc.kind == TaskKind.ocr_det
    assert desc.task == {"kind": "ocr_det", "thresh": 0.3, "box_thresh": 0.6, "unclip_ratio": 2.0}
    assert any("preprocessing from edgekit.toml" in n for n in desc.notes)
    bad_dict = ocr_yml("  - ToCHWImage: null\n", "  name: CTCLabelDecode\n  character_dict: [7]\n")
    assert "character_dict[0]" in refused(tmp_path, bad_dict)
    desc = read_model_yml(tmp_path / "inference.yml", overridden={"task"})
    assert desc.task == {} and desc.kind is None and desc.preprocess["layout"] == "NCHW"
    rec = read_model_yml(DATA / "PP-OCRv5_mobile_rec" / "inference.yml", overridden={"task", "preprocess"})
    assert (rec.task, rec.preprocess, rec.kind, rec.input_shape) == ({}, {}, TaskKind.ocr_rec, (-1, 3, 48, -1))
    assert not any("RecResizeImg" in n for n in rec.notes)          # no notes about settings edgekit does not use


# --- what is refused, and what is only noted ---------------------------------------------------------

@pytest.mark.parametrize("ops, post, expected", [
    ("  - GridMask: {ratio: 0.5}\n", None, r"transform_ops\[0\] GridMask: edgekit does not know this preprocessing"),
    ("  - NormalizeImage: {scale: 1./255., shift: 2}\n", None, r"NormalizeImage has setting\(s\) .*: shift"),
    ("  - NormalizeImage: {channel_num: 4}\n", None, r"NormalizeImage.channel_num 4"),
    ("  - NormalizeImage: {scale: 1/0}\n", None, r"scale is '1/0', not a number or a fraction"),
    ("  - NormalizeImage: {scale: abc}\n", None, r"scale is 'abc'"),
    ("  - NormalizeImage: {mean: [0.5, x]}\n", None, r"NormalizeImage.mean is 'x', not a number"),
    ("  - DecodeImage: {channel_first: true, img_mode: BGR}\n", None, r"channel_first is true"),
    ("  - DecodeImage: {img_mode: HSV}\n", None, r"img_mode is 'HSV'"),
    ("  - DecodeImage: {img_mode: GRAY}\n  - RecResizeImg: {image_shape: [3, 48, 320]}\n", None,
     r"image_shape has 3 channel\(s\) but the image is read as gray"),
    ("  - RecResizeImg: {image_shape: [3, 48]}\n", None, r"image_shape is \[3, 48\], not 3 positive integers"),
    ("  - DetResizeForTest: {image_shape: [0, 640]}\n", None, r"image_shape is \[0, 640\]"),
    ("  - DetResizeForTest: {limit_side_len: 960, limit_type: long}\n", None,
     r"limit_type is 'long', not one of resize_long, max, min"),
    ("  - NormalizeImage: {mean: [0.5, 0.5]}\n", None, r"unusable edgekit preprocess \(preprocess.mean has 2 values"),
    ("  - ToCHWImage: null\n", "  name: CTCLabelDecode\n  character_dict: [a, 7]\n",
     r"character_dict\[1\] is 7: a int, not a string \(quote entries"),
    ("  - ToCHWImage: null\n", "  name: CTCLabelDecode\n  character_dict: [a, '']\n", r"character_dict\[1\] is '': empty"),
    ("  - ToCHWImage: null\n", "  name: CTCLabelDecode\n  character_dict: [a, \"b\\nc\"]\n",
     r"character_dict\[1\] is 'b\\nc': holds a line break"),
    ("  - ToCHWImage: null\n", "  name: DBPostProcess\n  thresh: high\n", r"PostProcess.thresh is 'high', not a number"),
    ("  - ToCHWImage: null\n", "  name: DBPostProcess\n  box_thresh: 3\n", r"unusable edgekit task .*box_thresh"),
    ("  - ToCHWImage: null\n", "  name: ClsPostProcess\n  label_list: ['0']\n", r"label_list has 1 label"),
    ("  - op_without_settings\n", None, r"transform_ops\[0\] is not a single-key mapping"),
])
def test_refused_entries_are_named(tmp_path, ops, post, expected):
    text = ocr_yml(ops, post) if post else ocr_yml(ops)
    assert re.search(expected, refused(tmp_path, text)), refused(tmp_path, text)


def test_a_yml_contradicting_itself_is_refused(tmp_path):
    hpi = ("Hpi:\n  backend_configs:\n    paddle_infer:\n      trt_dynamic_shapes:\n"
           "        x: [[1, 3, 32, 100], [1, 3, 32, 320], [8, 3, 32, 3200]]\n")
    text = hpi + ocr_yml("  - RecResizeImg: {image_shape: [3, 48, 320]}\n",
                         "  name: CTCLabelDecode\n  character_dict: [a, b]\n")
    assert "contradicts itself" in refused(tmp_path, text) and "[-1, 3, 32, -1]" in refused(tmp_path, text)


def test_postprocess_edgekit_has_no_task_for_is_a_note(tmp_path):
    desc = read_model_yml(write(tmp_path, ocr_yml("  - ToCHWImage: null\n", "  name: SLALabelDecode\n")))
    assert (desc.kind, desc.task, desc.paddlex_task) == (None, {}, "table_structure_recognition")
    assert any("SLALabelDecode: edgekit has no task" in n for n in desc.notes)


def test_db_settings_only_paddlex_uses_are_notes_and_defaults_are_paddlexs(tmp_path):
    post = "  name: DBPostProcess\n  max_candidates: 1000\n  use_dilation: true\n  box_type: poly\n"
    desc = read_model_yml(write(tmp_path, ocr_yml("  - ToCHWImage: null\n", post)))
    assert desc.task == {"kind": "ocr_det", "thresh": 0.3, "box_thresh": 0.6, "unclip_ratio": 2.0}
    assert [n.split(":")[0] for n in desc.notes if "DB" in n] == ["PostProcess.use_dilation True",
                                                                  "PostProcess.box_type poly"]


def test_training_only_ops_unknown_sections_and_label_variants(tmp_path):
    text = "Extra: 1\n" + ocr_yml("  - DetLabelEncode: null\n  - KeepKeys: {keep_keys: [image]}\n",
                                  "  Topk:\n    topk: 1\n    label_list: [0, 90, 180, 270]\n")
    desc = read_model_yml(write(tmp_path, text.replace("model_name: test", "model_name: PP-LCNet_x1_0_doc_ori")))
    assert desc.paddlex_task == "doc_img_orientation_classification" and desc.kind == TaskKind.classification
    assert desc.labels == ("0", "90", "180", "270") and "top-level 'Extra' ignored" in desc.notes
    assert desc.preprocess["layout"] == "NHWC" and desc.input_shape == (-1, -1, -1, 3)


def test_scale_strings_are_read_without_eval():
    assert paddlex._scale("1./255.", "s") == pytest.approx(1 / 255)
    assert paddlex._scale("1.0 / 255.0", "s") == pytest.approx(1 / 255)
    assert paddlex._scale("0.5", "s") == 0.5 and paddlex._scale(2, "s") == 2.0
    for bad in ("__import__('os')", "1/255/3", "", True, -1):
        with pytest.raises(paddlex._Refusal):
            paddlex._scale(bad, "s")


# --- malformed and hostile files -----------------------------------------------------------------------

def test_malformed_files_are_one_line_errors(tmp_path):
    assert "not valid YAML" in refused(tmp_path, "PreProcess: [a, b\n") and "line" in refused(tmp_path, "a: [b\n")
    assert "holds a list, not a mapping" in refused(tmp_path, "- a\n- b\n")
    assert "no PreProcess, Preprocess or Deploy" in refused(tmp_path, "Global: {model_name: x}\n")
    assert "not a list of operations" in refused(tmp_path, "PreProcess: {transform_ops: 3}\nPostProcess: {}\n")
    (tmp_path / "inference.yml").write_bytes(b"Global:\n  model_name: \xff\xfe\n")
    with pytest.raises(InputModelError, match="not UTF-8"):
        read_model_yml(tmp_path / "inference.yml")
    with pytest.raises(InputModelError, match="cannot read"):
        read_model_yml(tmp_path / "missing.yml")


def test_huge_deep_and_exploding_files_are_refused_before_loading(tmp_path, monkeypatch):
    deep = "a: " + "[" * (limits.MAX_YML_DEPTH + 2) + "]" * (limits.MAX_YML_DEPTH + 2) + "\n"
    assert "MAX_YML_DEPTH" in refused(tmp_path, deep)
    laughs = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]    # 10^9 values
    assert "MAX_YML_NODES" in refused(tmp_path, "\n".join(laughs) + "\n")
    monkeypatch.setattr(limits, "MAX_YML_BYTES", 100)
    assert "MAX_YML_BYTES" in refused(tmp_path, "Global: {model_name: " + "x" * 200 + "}\n")


def test_find_model_yml_and_json_record(tmp_path):
    folder = tmp_path / "PP-OCRv5_mobile_det"
    folder.mkdir()
    assert find_model_yml(folder) is None
    (folder / "inference.yml").write_text((DATA / "PP-OCRv5_mobile_det" / "inference.yml").read_text("utf-8"), "utf-8")
    assert find_model_yml(folder) == folder / "inference.yml" == find_model_yml(folder / "inference.json")
    first, again = read_model_yml(folder / "inference.yml"), read_model_yml(folder / "inference.yml")
    assert first == again and first.sha256 == sample("PP-OCRv5_mobile_det").sha256
    record = json.loads(json.dumps(first.to_json()))
    assert record["kind"] == "ocr_det" and record["input_shape"] == [-1, 3, -1, -1]


def test_a_detection_yml_whose_task_edgekit_toml_gives_keeps_only_the_labels():
    desc = read_model_yml(DATA / "PicoDet-S" / "inference.yml", overridden={"task"})
    assert desc.task == {} and desc.kind == TaskKind.detection and desc.labels[0] == "person"
    assert any("task from edgekit.toml" in n for n in desc.notes)


def test_a_detection_yml_without_a_cap_leaves_max_detections_to_the_task(tmp_path):
    text = (DATA / "PicoDet-S" / "inference.yml").read_text().replace("keep_top_k: 100", "keep_top_k: -1")
    desc = read_model_yml(write(tmp_path, text))
    assert "max_detections" not in desc.task and desc.task["score_threshold"] == 0.025
