"""Matrix files and cell keys (pure logic, no build): what re-keys a cell and what does not."""

import pytest

from edgekit.matrix import cells as matrix
from edgekit.core.errors import ConfigError

TOOLS = {"paddlepaddle": "2.6.2", "paddlelite": "2.13rc0"}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.png").write_bytes(b"image a")
    (tmp_path / "w.pdparams").write_bytes(b"weights")
    (tmp_path / "model.toml").write_text('[model]\nname = "m"\nfactory = "edgekit.examples.digits.model:create"\n'
                                         'weights = "w.pdparams"\n[data]\ncalibration = "data"\n')
    (tmp_path / "m.toml").write_text('targets = ["arm64", "armv7"]\nprecisions = ["fp32", "int8"]\n'
                                     '[[model]]\nname = "m"\nconfig = "model.toml"\nargs = ["--no-emulation"]\n'
                                     '[[model]]\nname = "only"\nmodel = "x.pdmodel"\nprecisions = ["int8"]\n'
                                     '[[setting]]\nname = "default"\n[[setting]]\nname = "nofold"\nargs = ["--no-fold"]\n')
    return tmp_path


def _key(cell, tools=TOOLS, source="src", env=None):
    return matrix.cell_key(cell, matrix.cell_inputs(cell), tools, source, env or {})


def test_cells_are_the_product_in_order(project):
    m = matrix.load(project / "m.toml")
    ids = [c.id for c in m.cells]
    assert ids[:4] == ["m/arm64-fp32", "nofold/m/arm64-fp32", "m/arm64-int8", "nofold/m/arm64-int8"]
    assert "only/armv7-int8" in ids and "only/arm64-fp32" not in ids
    assert len(ids) == 4 * 2 + 2 * 2
    cell = m.cells[1]
    assert cell.bundle_dir(project / "out") == project / "out" / "bundles" / "nofold" / "m" / "arm64-fp32"
    flags = cell.flags()
    assert flags[:3] == ["build", "--target", "arm64"] and flags[-2:] == ["--no-emulation", "--no-fold"]
    assert "--out" not in flags      # the same flags, so the same manifests, whichever executor runs the cell


def test_keys_follow_the_content_of_every_input(project):
    cell = matrix.load(project / "m.toml").cells[0]
    base = _key(cell)
    assert _key(cell) == base                                  # stable
    inputs = matrix.cell_inputs(cell)
    assert str(project / "data") in inputs and str(project / "w.pdparams") in inputs   # named by the config
    assert "factory:edgekit.examples.digits.model:create" in inputs
    (project / "data" / "a.png").write_bytes(b"image A")       # the calibration data changed
    changed = _key(cell)
    assert changed != base
    (project / "data" / "a.png").write_bytes(b"image a")
    assert _key(cell) == base                                  # content, not modification times
    assert _key(cell, tools=dict(TOOLS, paddlelite="2.14")) != base
    assert _key(cell, source="other") != base
    assert _key(cell, env={"EDGEKIT_LITE_ARM": "/opt/lite"}) != base
    other = matrix.load(project / "m.toml").cells[1]           # the same model with another setting
    assert _key(other) != base


def test_only_build_settings_of_the_environment_count():
    env = {"EDGEKIT_LITE_ARM": "/x", "EDGEKIT_OUT": "/elsewhere", "HOME": "/root", "EDGEKIT_CPU": "a55"}
    assert matrix.build_environment(env) == {"EDGEKIT_LITE_ARM": "/x", "EDGEKIT_CPU": "a55"}


def test_folder_digests_see_names_and_content(tmp_path):
    (tmp_path / "a").write_bytes(b"1")
    first = matrix.digest_path(tmp_path)
    (tmp_path / "b").write_bytes(b"1")
    assert matrix.digest_path(tmp_path) != first
    assert matrix.digest_path(tmp_path / "a") == matrix.digest_path(tmp_path / "b")


@pytest.mark.parametrize("text, says", [
    ('targets = ["arm64"]\n', "lists no models"),
    ('targets = ["riscv"]\n[[model]]\nname = "m"\n', "target 'riscv'"),
    ('precisions = ["int4"]\n[[model]]\nname = "m"\n', "precision 'int4'"),
    ('[[model]]\nname = "m"\n[[model]]\nname = "m"\n', "appears twice"),
    ('[[model]]\nname = "m"\nflags = ["x"]\n', "unknown key"),
    ('[[model]]\nname = "a b"\n', "name 'a b' is not usable as a folder name"),
    ('[[model]]\nname = "m"\nargs = "--no-fold"\n', "not a list of strings"),
    ('colour = 1\n[[model]]\nname = "m"\n', "unknown key"),
    ('timeout = -1\n[[model]]\nname = "m"\n', "timeout"),
])
def test_bad_matrix_files_are_refused_in_one_line(tmp_path, text, says):
    (tmp_path / "m.toml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        matrix.load(tmp_path / "m.toml")
    assert says in caught.value.message and "\n" not in caught.value.message and caught.value.hint


def test_markdown_table_has_a_column_per_tier():
    rows = [{"cell": "m/arm64-int8", "status": "built", "nb_bytes": 2048, "metric": "top1", "seconds": 3.0,
             "accuracy": {"fp32 reference": 96.94, "int8 simulated": 97.22}},
            {"cell": "bad/arm64-fp32", "status": "failed", "error": "model file x is not a valid | program", "seconds": 1.0}]
    md = matrix.markdown(rows).splitlines()
    assert md[0] == "| cell | status | .nb KiB | metric | fp32 reference | int8 simulated | build s | error |"
    assert md[2] == "| m/arm64-int8 | built | 2.0 | top1 | 96.94 | 97.22 | 3.0 |  |"
    assert md[3].endswith("| 1.0 | model file x is not a valid / program |")
