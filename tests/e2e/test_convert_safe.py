"""Every conversion of a build goes through `lite.convert_safe` (lite/safe.py), so opt's ARM crash on
`flatten_contiguous_range` gets its retry wherever a program is converted, not in the target stage alone.

The INT8 build of the public PP-OCRv5 mobile rec lost its FP32 instruction count twice (the search's cost step and
tier C's FP32 reference: `paddle_lite_opt (arm, fp32) died from SIGSEGV`), because only the target stage retried.
MobileNetV2 (x0.25, 32x32) has the same crash and exports in seconds."""

from __future__ import annotations

import types

import numpy as np
import pytest

from edgekit.contracts.settings import InputSpec
from edgekit.core.errors import ConversionError

pytestmark = pytest.mark.e2e

SAMPLES = {"x": np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)}


@pytest.fixture(scope="module")
def mobilenet_v2(tmp_path_factory):
    import paddle

    from edgekit.export.dygraph import export_layer

    paddle.disable_static()          # a layer's parameters are made in dynamic mode (an earlier test may leave static on)
    paddle.seed(0)
    layer = paddle.vision.models.mobilenet_v2(scale=0.25, num_classes=10)
    return export_layer(layer, [InputSpec("x", (-1, 3, 32, 32), "float32")], tmp_path_factory.mktemp("mbv2"),
                        SAMPLES, "mobilenet_v2")


def test_opt_for_arm_crashes_on_this_flatten_without_the_retry(mobilenet_v2, tmp_path):
    """The premise: the rewrites opt always needs, then opt, and no retry: opt dies."""
    from edgekit.lite import convert
    from edgekit.lite.rewrite import lite_safe

    safe, _ = lite_safe(mobilenet_v2, tmp_path / "safe", SAMPLES, x86=False)
    assert "flatten_contiguous_range" in safe.op_types
    with pytest.raises(ConversionError, match="SIGSEGV"):
        convert(safe, "arm", tmp_path / "m.nb", timeout=300, target="arm64", precision="fp32")


def test_the_search_cost_counter_converts_with_the_retry(mobilenet_v2, tmp_path):
    """The cost step's conversion (and so its FP32 count) is the target stage's, retry included."""
    from edgekit.verify.search_cost import EmulatedCost

    emulator = types.SimpleNamespace(abi="aarch64", cpu="default")    # convert() runs opt only
    coster = EmulatedCost(emulator, None, "arm64", tmp_path / "cost", SAMPLES, {"x": SAMPLES["x"][:1]},
                          tmp_path / "counts", 300)
    nb = coster.convert(mobilenet_v2, "fp32")
    assert nb.is_file() and nb.stat().st_size > 100_000


def test_convert_safe_records_the_flatten_rewrite_it_retried_with(mobilenet_v2, tmp_path):
    from edgekit import lite

    found = lite.convert_safe(mobilenet_v2, "arm", tmp_path / "m.nb", tmp_path / "work", SAMPLES, timeout=300,
                              target="arm64", precision="fp32")
    assert found.nb_file.is_file()
    assert [r["rewrite"] for r in found.rewrites][-1] == "flatten_contiguous_range -> reshape2"
    assert all(r["max_abs"] <= 1e-5 for r in found.rewrites if "max_abs" in r)
