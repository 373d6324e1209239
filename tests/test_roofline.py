"""The roofline model's arithmetic on synthetic counts, and how programs and loops are sampled."""

from __future__ import annotations

import random

import pytest

from evo.contracts.gpus import PROFILES, get_profile, profile_for_device
from fitness.latency.counts import BufferTraffic, KernelResources, LaunchCounts
from fitness.latency.roofline import DoesNotFit, estimate_launch, occupancy, speed_of_light
from fitness.latency.sampling import (
    LOOP_SAMPLES,
    draw_points,
    loop_plan,
    program_scales,
    programs,
    reuse_probes,
    sample_programs,
)

H100 = get_profile("h100")
MB = 1 << 20


PLAIN = KernelResources("k", 4, 32, 0, 0, 1)  # 32 registers, no spills, no shared memory, no pipelining


def streaming(programs_: int, total_bytes: float, *, warps: int = 4, rounds: float = 1.0) -> LaunchCounts:
    """A copy-like launch: every byte read once and written once, split evenly over the programs."""
    buf_in = BufferTraffic("x", int(total_bytes), requests=total_bytes, unique=total_bytes, span=total_bytes)
    buf_out = BufferTraffic("y", int(total_bytes), store_requests=total_bytes, store_unique=total_bytes,
                            store_span=total_bytes)
    per_program_elems = total_bytes / 4 / programs_
    return LaunchCounts(
        kernel="k", grid=(programs_, 1, 1), num_warps=warps, num_stages=3, buffers=(buf_in, buf_out),
        alu_flops=total_bytes / 4, warp_instructions=programs_ * 3 * per_program_elems / 32,
        rounds_dram_per_program=rounds, unique_bytes_per_program=total_bytes / programs_,
    )


def test_profiles_cite_sources_and_are_found_by_device_name():
    for p in PROFILES.values():
        assert p.sources and p.dram_achievable <= p.dram_peak
    h200 = get_profile("H200")
    assert h200.dram_achievable == 4.3e12 and h200.sms == 132 and h200.l2_bytes == 60 * MB
    assert profile_for_device("NVIDIA H200") is h200
    assert profile_for_device("NVIDIA A100-SXM4-80GB") is get_profile("a100")
    assert profile_for_device("Tesla T4") is None
    with pytest.raises(ValueError, match="known: a100, h100, h200"):
        get_profile("b200")


def test_occupancy_is_limited_by_the_scarcest_resource():
    assert occupancy(4, KernelResources("k", 4, 32, 0, 0, 1), H100) == (16, "warps")
    assert occupancy(1, KernelResources("k", 1, 16, 0, 0, 1), H100) == (32, "blocks")
    assert occupancy(8, KernelResources("k", 8, 128, 0, 0, 1), H100) == (2, "registers")
    assert occupancy(4, KernelResources("k", 4, 64, 0, 100 * 1024, 1), H100) == (2, "shared memory")
    with pytest.raises(DoesNotFit, match="shared memory"):
        occupancy(4, KernelResources("k", 4, 64, 0, 512 * 1024, 1), H100)


def test_a_grid_that_fills_the_sms_beats_one_that_uses_a_handful():
    total = 256 * MB
    few = estimate_launch(streaming(4, total, rounds=total / 4 / 4096), PLAIN, H100)
    many = estimate_launch(streaming(4096, total, rounds=total / 4096 / 4096), PLAIN, H100)
    assert many.seconds * 10 < few.seconds
    assert many.bound == "dram"


def test_spilling_is_slower_than_the_same_kernel_without_spills():
    counts = streaming(4096, 64 * MB, rounds=4)
    clean = estimate_launch(counts, KernelResources("k", 4, 128, 0, 1024, 1), H100)
    spilled = estimate_launch(counts, KernelResources("k", 4, 64, 512, 1024, 1), H100)
    assert spilled.programs_per_sm > clean.programs_per_sm  # fewer registers, yet slower
    assert spilled.seconds > 1.2 * clean.seconds


def test_the_estimate_is_at_least_its_largest_term_plus_launch_overhead():
    e = estimate_launch(streaming(8192, 512 * MB), PLAIN, H100)
    assert e.seconds >= max(e.terms.values()) + H100.launch_overhead_s
    assert e.terms["dram"] == pytest.approx(2 * 512 * MB / H100.dram_achievable)


def test_speed_of_light_uses_peak_rates():
    # 4096^3 fp16 matmul on an H100: 137 GFLOP at 989 TFLOP/s beats 96 MB at 3.35 TB/s
    sol = speed_of_light(2 * 4096**3, 3 * 4096**2 * 2, H100, "float16")
    assert sol == pytest.approx(2 * 4096**3 / 989.4e12)
    assert speed_of_light(None, 3 * 4 * (1 << 26), H100, "float32") == pytest.approx(3 * 4 * (1 << 26) / 3.35e12)
    assert speed_of_light(None, None, H100, "float32") is None
    # the bound a measurement is held to forgives what the L2 may still hold when the kernel ends
    assert speed_of_light(None, 128 * MB, H100, "float32", bound=True) == pytest.approx(78 * MB / 3.35e12)
    assert speed_of_light(None, 8 * MB, H100, "float32", bound=True) == 0.0


def test_sampled_programs_cover_every_corner_and_scale_to_the_grid():
    points = draw_points(random.Random(3), 6)
    for grid in [(1, 1, 1), (7, 1, 1), (5, 3, 1), (4, 4, 2), (1048576, 1, 1)]:
        samples = sample_programs(grid, points)
        corners = {(x, y, z) for x in {0, grid[0] - 1} for y in {0, grid[1] - 1} for z in {0, grid[2] - 1}}
        assert corners <= set(samples)
        assert sum(program_scales(samples, grid).values()) == pytest.approx(programs(grid))


def test_which_programs_are_sampled_depends_on_the_secret_seed_not_on_the_grid():
    grid = (4096, 1, 1)
    a = set(sample_programs(grid, draw_points(random.Random(1), 6)))
    b = set(sample_programs(grid, draw_points(random.Random(2), 6)))
    assert a != b and {(0, 0, 0), (4095, 0, 0)} <= a & b  # only the end programs, each its own stratum
    scales = program_scales(sorted(a), grid)
    assert scales[(0, 0, 0)] == 1 and scales[(4095, 0, 0)] == 1
    # an axis a later launch lacks is run in full: a combining launch reads every partial
    split = sample_programs((8, 4, 1), draw_points(random.Random(1), 2), full_axes=(1,))
    assert {p[1] for p in split} == {0, 1, 2, 3} and all(sum(q[0] == p[0] for q in split) == 4 for p in split)


def test_reuse_probes_stay_in_the_grid_and_within_the_resident_window():
    probes = reuse_probes((5, 0, 0), (10, 1, 1), 64)
    assert sorted(d for d, _ in probes) == [-4, -2, -1, 1, 2, 4]
    assert all(0 <= p[0] < 10 for _, p in probes)


def test_loops_run_in_full_up_to_a_bound_then_at_random_iterations_standing_for_all():
    assert loop_plan(100, 100, random.Random(0)) == [(i, 1.0) for i in range(100)]
    a, b = loop_plan(1000, 10, random.Random(0)), loop_plan(1000, 10, random.Random(1))
    assert a[0][0] == 0 and a[-1][0] == 999 and len(a) == 10
    assert [i for i, _ in a] != [i for i, _ in b]  # not the first iterations: unpredictable
    assert sum(w for _, w in a) == pytest.approx(1000)
    assert loop_plan(50, 10, None) == [(0, 50.0)]  # a reuse probe: addresses of the first iteration
    long = loop_plan(100_000, 1024, random.Random(0))  # a long loop costs LOOP_SAMPLES, not `full`
    assert len(long) == LOOP_SAMPLES + 2 and sum(w for _, w in long) == pytest.approx(100_000)
