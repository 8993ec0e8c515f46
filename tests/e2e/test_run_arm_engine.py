"""`edgekit run --engine arm`: the INT8 model.nb itself under qemu (EDGEKIT_LITE_ARM), named in the result.

Skips without a runtime and fails with EDGEKIT_REQUIRE_EMULATION=1 (the `lite_arm` fixture's policy, as tier C).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from bundles import manifest

from edgekit.lite import native

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def int8_bundle(tmp_path_factory, cli):
    out = tmp_path_factory.mktemp("engines-int8")
    cli("build", "--target", "arm64", "--quant", "int8", "--out", out, "--no-emulation", "--quiet")
    return out / "digits" / "arm64-int8"


def test_run_on_the_arm_engine_gives_model_nbs_own_class(lite_arm, int8_bundle, cli, monkeypatch):
    from edgekit.verify.emulator import native_cache
    from edgekit.consumers.predict import BundleModel

    images = manifest(int8_bundle)["golden"]["images"]
    image, fp32_result = int8_bundle / images["files"][0], images["results"][0]   # results: the FP32 reference's
    monkeypatch.setenv("EDGEKIT_LITE_ARM", str(lite_arm))
    shown = json.loads(cli("run", int8_bundle, image).output)                      # the default for INT8 + runtime
    assert shown["engine"] == {"kind": "arm", "model": "model.nb", "precision": "int8", "target": "arm64",
                               "emulated": True, "cpu": "default", "abi": "aarch64"}
    # the same preprocessed tensor on the same model.nb through the tier-C runner directly
    tensor = np.load(int8_bundle / images["input"])[:1]
    runtime = native.find_runtime(lite_arm, "aarch64")
    twin_model = BundleModel.load(int8_bundle)
    direct = native.run_runner(native.build("aarch64", runtime, native_cache()), runtime, int8_bundle / "model.nb",
                               {twin_model.feed: tensor})
    (want,) = twin_model.task.postprocess(direct.outputs)
    assert {k: shown[k] for k in ("class", "label", "score")} == want
    print(f"ARM int8 {want}, FP32 reference {fp32_result}")
    assert shown["class"] == fp32_result["class"]                                  # digits: INT8 top-1 97 %

    twin = json.loads(cli("run", int8_bundle, image, "--engine", "twin").output)
    assert twin["engine"]["kind"] == "twin" and twin["engine"]["model"] == "host/model_x86.nb"
    assert "int8 model.nb itself was not run" in twin["engine"]["note"]
    assert twin["class"] == fp32_result["class"] and abs(twin["score"] - fp32_result["score"]) <= 1e-4
