"""Calibration data checks: each warning fires on the data it is for, with its numbers, and only there."""

import numpy as np
import pytest

from edgekit.quantize.datacheck import check_calibration


def _data(n, shift=0.0, scale=1.0, seed=0):
    return {"x": (np.random.default_rng(seed).standard_normal((n, 3, 8, 8)) * scale + shift).astype(np.float32)}


def test_representative_data_gives_no_warning():
    assert check_calibration(_data(64), _data(200, seed=1), used=64) == []


def test_too_few_samples():
    (warning,) = check_calibration(_data(8), _data(200, seed=1), used=8)
    assert "uses 8 samples (< 32)" in warning


def test_identical_samples():
    same = {"x": np.repeat(_data(1)["x"], 64, axis=0)}
    found = check_calibration(same, None, used=64)
    assert any("nearly identical" in w for w in found) and any("only 1 of 64 samples are distinct" in w for w in found)


def test_shifted_and_rescaled_calibration_data():
    found = check_calibration(_data(64, shift=2.0), _data(200, seed=1), used=64)
    assert any("channel" in w and "evaluation std apart" in w for w in found)
    found = check_calibration(_data(64, scale=1 / 255), _data(200, seed=1), used=64)
    assert any("ratio 0.00" in w for w in found)


def _pair(batches):
    return batches.batch_size, batches.batch_nums


def test_calibration_batches_keep_the_sample_budget_for_fixed_batch_programs():
    from edgekit.contracts.settings import QuantConfig
    from edgekit.core.errors import DataError
    from edgekit.quantize.ptq import calibration_batches

    cfg = QuantConfig(batch_size=16, batch_nums=8)                       # a budget of 128 samples
    assert _pair(calibration_batches(500, cfg)) == (16, 8)
    assert _pair(calibration_batches(500, cfg, fixed_batch=1)) == (1, 128)      # batch 1 fixed: 128 batches, not 8
    assert _pair(calibration_batches(100, cfg)) == (16, 6)                      # whole batches of what there is
    assert _pair(calibration_batches(100, cfg, fixed_batch=3)) == (3, 33)
    with pytest.raises(DataError, match="at least 16"):
        calibration_batches(12, cfg)
    with pytest.raises(DataError, match="at least 8"):
        calibration_batches(7, cfg, fixed_batch=1)


GB = 1 << 30


def test_calibration_batch_is_lowered_to_what_a_quarter_of_the_available_memory_holds():
    """PP-OCRv5 det at 960x960: ~1.17 GB a sample (folded program), batch 16 was killed on a 24 GB host."""
    from edgekit.contracts.settings import QuantConfig
    from edgekit.quantize.ptq import calibration_batches

    cfg = QuantConfig(batch_size=16, batch_nums=8)
    found = calibration_batches(16, cfg, sample_bytes=int(1.17 * GB), memory_bytes=int(19.7 * GB))
    assert _pair(found) == (4, 4) and found.samples == 16 and found.lowered      # 4.9 GB usable: 4 fit
    assert "batches of 4, not 16" in found.reason() and "1.17 GiB" in found.reason() and "19.70 GiB" in found.reason()
    assert found.to_json()["lowered_for_memory"] is True and found.to_json()["asked"] == 16
    roomy = calibration_batches(500, cfg, sample_bytes=50 << 20, memory_bytes=19 * GB)
    assert _pair(roomy) == (16, 8) and not roomy.lowered and roomy.reason() == ""
    # the same 128 samples as batch 16 would use, in more batches: 9 fit but only divisors of 128 keep them
    assert _pair(calibration_batches(500, cfg, sample_bytes=1 * GB, memory_bytes=36 * GB)) == (8, 16)
    assert _pair(calibration_batches(500, cfg, sample_bytes=40 * GB, memory_bytes=18 * GB)) == (1, 128)   # never below 1
    assert _pair(calibration_batches(500, cfg, sample_bytes=40 * GB, memory_bytes=None)) == (16, 8)   # unknown memory
    # a fixed-batch program keeps its batch whatever the memory
    assert _pair(calibration_batches(500, cfg, fixed_batch=4, sample_bytes=40 * GB, memory_bytes=GB)) == (4, 32)


def test_calibration_batch_follows_the_host_not_what_other_jobs_hold(monkeypatch, caplog):
    """The batch changes thresholds and the cache keys: sized against MemAvailable, a PP-OCRv5 rec rebuild beside
    other jobs calibrated in other batches and missed every cached score. MemTotal gives one answer per machine."""
    from types import SimpleNamespace

    from edgekit.contracts.settings import QuantConfig
    from edgekit.core import executors
    from edgekit.quantize import ptq

    monkeypatch.setattr(ptq, "calibration_sample_bytes", lambda *args, **kwargs: int(0.54 * GB))
    monkeypatch.setattr(executors, "total_memory_mb", lambda: 23 * 1024)
    model, samples, cfg = SimpleNamespace(fixed_batch=None), list(range(100)), QuantConfig(batch_size=16, batch_nums=4)
    seen = []
    for free_gb in (22, 12, 3):                    # idle, beside CI, beside two other builds
        monkeypatch.setattr(executors, "available_memory_mb", lambda free_gb=free_gb: free_gb * 1024)
        with caplog.at_level("WARNING", logger="edgekit.quantize.ptq"):
            caplog.clear()
            found = ptq.plan_batches(model, samples, cfg)
        seen.append((_pair(found), found.memory_bytes, bool(caplog.records)))
    assert seen == [((8, 8), 23 * GB, False), ((8, 8), 23 * GB, True), ((8, 8), 23 * GB, True)]
    assert "free now" in caplog.records[0].getMessage()


def test_fitting_batch_reads_memavailable(monkeypatch):
    from edgekit.core import executors, memory

    monkeypatch.setattr(executors, "available_memory_mb", lambda: 8192)
    assert memory.available_bytes() == 8 * GB
    assert memory.fitting_batch(32, 50 << 20, memory.available_bytes()) == 32      # 1.6 GB of the 2 GB usable
    assert memory.fitting_batch(32, 100 << 20, 8 * GB) == 20                # 2 GB / 100 MB
    assert memory.fitting_batch(32, 100 << 20, 8 * GB, divides=32) == 16
    assert memory.fitting_batch(1, 200 << 20, 1) == 1
    monkeypatch.setattr(executors, "available_memory_mb", lambda: None)
    assert memory.available_bytes() is None


def test_the_memory_calibration_sizes_against_is_a_container_limit_when_smaller(tmp_path, monkeypatch):
    """Inside a container MemTotal is the whole host's: a 64 GiB host running an 8 GiB container must size the
    calibration batch against 8 GiB (cgroup v2's memory.max, or v1's limit_in_bytes)."""
    from edgekit.core import executors

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       67108864 kB\nMemAvailable:   60000000 kB\n")
    monkeypatch.setattr(executors, "MEMINFO", str(meminfo))
    v2, v1 = tmp_path / "memory.max", tmp_path / "limit_in_bytes"
    monkeypatch.setattr(executors, "CGROUP_LIMITS", (str(v2), str(v1)))
    assert executors.total_memory_mb() == 64 * 1024                 # neither file: the host's
    v1.write_text(str(8 << 30) + "\n")
    assert executors.total_memory_mb() == 8 * 1024                  # cgroup v1
    v2.write_text("max\n")
    assert executors.total_memory_mb() == 64 * 1024                 # v2 without a limit
    v2.write_text(str(96 << 30))
    assert executors.total_memory_mb() == 64 * 1024                 # a limit above the host changes nothing
    v2.write_text(str(4 << 30))
    assert executors.total_memory_mb() == 4 * 1024
