"""PaddleDetection's geometry inputs: which feeds are bound (export/geometry.py) and what the data feeds them."""

import numpy as np
import pytest

from edgekit.config import InputSpec
from edgekit.data import Samples, geometry_values, with_geometry
from edgekit.errors import ConversionError
from edgekit.export.geometry import bound_feeds

IMAGE = InputSpec("image", (-1, 3, 96, 128))


def test_only_paddledetections_inputs_beside_one_image_are_bound():
    assert bound_feeds([IMAGE]) == []
    feeds = [InputSpec("im_shape", (-1, 2)), IMAGE, InputSpec("scale_factor", (-1, 2))]
    assert bound_feeds(feeds) == ["im_shape", "scale_factor"]
    with pytest.raises(ConversionError, match=r"input 'scale_factor' is float32 \[-1, 3\]; PaddleDetection's"):
        bound_feeds([IMAGE, InputSpec("scale_factor", (-1, 3))])
    with pytest.raises(ConversionError, match="can be bound only beside one image input"):
        bound_feeds([IMAGE, InputSpec("depth", (-1, 1, 96, 128)), InputSpec("scale_factor", (-1, 2))])


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
