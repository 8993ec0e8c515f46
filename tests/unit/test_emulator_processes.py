"""How many emulator processes tier C starts: cores, samples and the measured memory of one process."""

from __future__ import annotations

from edgekit.verify.shards import MEMORY_KEEP_FREE_MB, parallel_processes


def test_a_small_model_gets_every_core():
    assert parallel_processes(2, 100, 60_000, 20_000) == (2, "cores")


def test_fewer_samples_than_cores():
    assert parallel_processes(8, 3, 60_000, 20_000) == (3, "samples")


def test_a_large_model_is_limited_by_memory():
    # a 640x640 DB detector measured 5.6 GB RSS per emulator process: 20 GB available holds two of them with headroom
    jobs, limit = parallel_processes(8, 100, 5.6 * 1024 * 1024, 20_000)
    assert (jobs, limit) == (2, "memory")
    share = 5.6 * 1024 * 1.25 + 64
    assert jobs * share <= 20_000 - MEMORY_KEEP_FREE_MB < (jobs + 1) * share


def test_at_least_one_process_even_without_room():
    assert parallel_processes(4, 10, 8 * 1024 * 1024, 1_000) == (1, "memory")


def test_unknown_memory_falls_back_to_cores_and_says_so():
    assert parallel_processes(2, 10, None, 20_000) == (2, "cores (memory unknown)")
    assert parallel_processes(2, 10, 60_000, None) == (2, "cores (memory unknown)")
