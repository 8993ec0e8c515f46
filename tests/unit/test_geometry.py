"""PaddleDetection's geometry inputs: which feeds are bound (export/geometry.py) and what the data feeds them."""

import numpy as np
import pytest

from edgekit.contracts.settings import InputSpec
from edgekit.model.data import Samples, geometry_values, with_geometry
from edgekit.core.errors import ConversionError
from edgekit.model.evalset import synthetic
from edgekit.export.geometry import bound_feeds, check_fed

IMAGE = InputSpec("image", (-1, 3, 96, 128))


def test_only_paddledetections_inputs_beside_one_image_are_bound():
    assert bound_feeds([IMAGE]) == []
    feeds = [InputSpec("im_shape", (-1, 2)), IMAGE, InputSpec("scale_factor", (-1, 2))]
    assert bound_feeds(feeds) == ["im_shape", "scale_factor"]
    # another signature is not PaddleDetection's: the model keeps its inputs, fed from the data
    assert bound_feeds([IMAGE, InputSpec("scale_factor", (-1, 3))]) == []
    assert bound_feeds([IMAGE, InputSpec("depth", (-1, 1, 96, 128)), InputSpec("scale_factor", (-1, 2))]) == []


def test_an_onnx_imports_geometry_inputs_are_known_by_their_onnx_names():
    """X2Paddle names the feed of ONNX input `im_shape` `x2paddle_im_shape`: the same rule binds it, and data holds
    the same values for it."""
    from edgekit.export.onnx_import import FEED_PREFIX
    from edgekit.model.data import geometry_name

    image = InputSpec(FEED_PREFIX + "image", (1, 3, 96, 128))
    feeds = [image, InputSpec(FEED_PREFIX + "im_shape", (1, 2)), InputSpec(FEED_PREFIX + "scale_factor", (1, 2))]
    assert bound_feeds(feeds) == ["x2paddle_im_shape", "x2paddle_scale_factor"]
    assert geometry_name("x2paddle_scale_factor") == "scale_factor" and geometry_name("x2paddle_image") is None
    assert geometry_values("x2paddle_im_shape", (96, 128)).tolist() == [96.0, 128.0]
    assert synthetic(feeds, 2).inputs["x2paddle_im_shape"].tolist() == [[96.0, 128.0]] * 2


def test_the_fed_values_must_be_the_tensors_own_in_its_layout():
    nchw = {"image": np.zeros((2, 3, 96, 128), np.float32), "im_shape": np.float32([[96, 128]] * 2),
            "scale_factor": np.ones((2, 2), np.float32)}
    assert check_fed(["im_shape", "scale_factor"], nchw, "image", "NCHW", "evaluation")["im_shape"].tolist() == [96, 128]
    with pytest.raises(ConversionError, match=r"the calibration data feeds im_shape values other than \[3.0, 96.0\] "
                                              r"\(the NHWC tensor's own geometry\)"):
        check_fed(["im_shape"], nchw, "image", "NHWC", "calibration")      # NCHW values are not NHWC's
    wrong = dict(nchw, scale_factor=np.float32([[1, 1], [0.5, 0.5]]))
    with pytest.raises(ConversionError, match="feeds scale_factor values other than"):
        check_fed(["scale_factor"], wrong, "image", "NCHW", "evaluation")


def test_synthetic_data_feeds_the_geometry_the_image_would():
    feeds = [InputSpec("image", (-1, 3, 32, 48)), InputSpec("im_shape", (-1, 2)), InputSpec("scale_factor", (-1, 2))]
    fed = synthetic(feeds, 3).inputs
    assert (fed["im_shape"] == [32, 48]).all() and (fed["scale_factor"] == 1).all() and fed["image"].std() > 0.5


def test_the_data_feeds_the_tensors_own_size_and_scale_one():
    assert geometry_values("im_shape", (96, 128)).tolist() == [96.0, 128.0]
    assert geometry_values("scale_factor", (96, 128)).tolist() == [1.0, 1.0]
    nchw = Samples({"image": np.zeros((3, 3, 96, 128), np.float32)})
    fed = with_geometry(nchw, ["image", "im_shape", "scale_factor"], "image", "NCHW").inputs
    assert fed["im_shape"].shape == (3, 2) and fed["im_shape"].dtype == np.float32
    assert (fed["im_shape"] == [96, 128]).all() and (fed["scale_factor"] == 1).all()
    nhwc = Samples({"image": np.zeros((2, 96, 128, 3), np.float32)})
    assert (with_geometry(nhwc, ["image", "im_shape"], "image", "NHWC").inputs["im_shape"] == [96, 128]).all()
    assert with_geometry(nchw, ["image"], "image", "NCHW") is nchw
    assert set(with_geometry(nchw, ["image", "scale_factor"], "image", "NCHW").without(["scale_factor"]).inputs) == {
        "image"}
