"""Strata of a grid by the path the program id decides (`fitness.latency.paths`)."""

from __future__ import annotations

import ast
import random

import numpy as np
import pytest

from fitness.latency.paths import MAX_STRATA, path_labels, stratified, with_strata
from fitness.latency.sampling import program_scales

KERNEL = """
@triton.jit
def _k(x_ptr, n_rows, n_cols, repeat, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    col = tl.program_id(1)
    x = tl.load(x_ptr + row)
{body}
"""


def labels_of(body: str, grid: tuple[int, int, int], **args: int) -> dict[int, np.ndarray]:
    fn = ast.parse(KERNEL.format(body=body)).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return path_labels(fn, {"n_rows": grid[0], "n_cols": 100, "repeat": 400, "BLOCK": 128, **args}, grid)


@pytest.mark.parametrize("body, sizes", [
    ("    if row % 64 == 37:\n        x += 1\n", [4032, 64]),
    ("    bad = row % 64 == 37\n    if bad:\n        x += 1\n", [4032, 64]),  # read through a name bound once
    ("    for i in range(0, 1 + (repeat - 1) * (row == 5)):\n        x += 1\n", [4095, 1]),  # a loop's trips
    ("    y = x if row >= tl.num_programs(0) - 3 else x + 1\n", [4093, 3]),
])
def test_a_path_the_program_id_decides_is_a_stratum(body, sizes):
    labels = labels_of(body, (4096, 1, 1))
    assert list(labels) == [0] and sorted(np.bincount(labels[0]).tolist(), reverse=True) == sizes


@pytest.mark.parametrize("body", [
    "    if x > 0.5:\n        x += 1\n",  # data: sampled as it falls
    "    if row + col == 7:\n        x += 1\n",  # two axes at once
    "    if row >= 0:\n        x += 1\n",  # every program alike
    "    for i in range(0, n_cols):\n        x += 1\n",
])
def test_paths_not_decided_by_one_program_id_are_not_strata(body):
    assert labels_of(body, (4096, 8, 1)) == {}


def test_a_loop_whose_trips_grow_with_the_program_id_is_stratified_by_powers_of_two():
    labels = labels_of("    for i in range(0, row):\n        x += 1\n", (1024, 1, 1))
    assert len(np.bincount(labels[0])) == 11  # 0, 1, 2-3, ..., 512-1023 trips


def test_every_stratum_gets_a_sample_weighted_for_its_programs():
    labels = labels_of("    if row % 64 == 37:\n        x += 1\n", (4096, 1, 1))
    drawn = [(5, 0, 0), (100, 0, 0), (2000, 0, 0), (0, 0, 0), (4095, 0, 0)]  # none has row % 64 == 37
    samples = with_strata(drawn, labels, random.Random(1))
    [extra] = [p for p in samples if p not in drawn]
    assert extra[0] % 64 == 37
    scales = stratified(program_scales(samples, (4096, 1, 1)), labels)
    assert scales[extra] == pytest.approx(64.0) and sum(scales.values()) == pytest.approx(4096.0)


def test_strata_past_the_cap_are_shared_smallest_first():
    # a stratum per program: the smallest get samples, the rest are shared among the sampled ones
    label = {0: np.arange(200)}
    samples = with_strata([(0, 0, 0)], label, random.Random(2))
    assert len(samples) == 1 + MAX_STRATA
    before = program_scales(samples, (200, 1, 1))
    after = stratified(before, label)
    assert sum(after.values()) == pytest.approx(sum(before.values()))
    assert len(set(np.round(list(after.values()), 6))) == 1  # each stands for as many: one program, shared


def test_an_axis_past_the_evaluator_s_domain_is_left_to_the_sample():
    from fitness.check.change_points import DOMAIN

    assert labels_of("    if row % 64 == 37:\n        x += 1\n", (DOMAIN + 1, 1, 1)) == {}
