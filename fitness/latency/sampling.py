"""Which programs of a grid (and which iterations of a loop) the latency model interprets, and how
their counts are scaled to the whole.

Programs: every corner of the grid (each axis at 0 or at its last index), the middle program, and
a few inner programs at fixed pseudo-random positions. The grid is split into strata
by "is this the last index along axis i" (the last block along an axis is the one a mask cuts
short); each stratum's total is its size times the mean of its samples. Corners put a sample in
every stratum. Reuse probes (programs at launch-order offsets +-2^i from the middle one, run only
for their addresses) tell how far apart programs that read the same data are.

Loops: the first ``keep`` iterations and the last one run; the first ones stand for all but the
last (weight ``(n - 1) / keep``), the last (often masked) for itself.
"""

from __future__ import annotations

import random
from collections import defaultdict
from itertools import product

Pid = tuple[int, int, int]


def normalize_grid(grid: tuple[int, ...] | list[int]) -> Pid:
    g = [int(v) for v in grid] + [1] * (3 - len(grid))
    if len(g) != 3 or any(v < 0 for v in g):
        raise ValueError(f"a grid has at most 3 non-negative dimensions, got {tuple(grid)}")
    return g[0], g[1], g[2]


def linear(pid: Pid, grid: Pid) -> int:
    """Launch order: axis 0 fastest."""
    return pid[0] + grid[0] * (pid[1] + grid[1] * pid[2])


def unlinear(n: int, grid: Pid) -> Pid:
    return n % grid[0], (n // grid[0]) % grid[1], n // (grid[0] * grid[1])


def programs(grid: Pid) -> int:
    return grid[0] * grid[1] * grid[2]


def sample_programs(grid: Pid, *, inner: int = 2) -> tuple[list[Pid], Pid]:
    """The programs to interpret and count, and the base program of the reuse probes."""
    total = programs(grid)
    if total == 0:
        return [], (0, 0, 0)
    chosen: list[Pid] = []

    def add(p: Pid) -> None:
        if p not in chosen:
            chosen.append(p)

    for corner in product(*[sorted({0, g - 1}) for g in grid]):
        add((corner[0], corner[1], corner[2]))
    base = unlinear((total - 1) // 2, grid)
    add(base)
    rng = random.Random(total)  # deterministic: the same grid samples the same programs
    for _ in range(inner):
        add(unlinear(rng.randrange(total), grid))
    return chosen, base


def reuse_probes(base: Pid, grid: Pid, max_offset: int) -> list[tuple[int, Pid]]:
    """Programs at launch-order offsets +-1, +-2, +-4, ... (up to `max_offset`) from `base`.

    A program that reads what `base` reads at offset d re-reads it while both are resident when
    d is below the number of programs resident at once: the L2 serves that re-read.
    """
    total, b = programs(grid), linear(base, grid)
    probes = []
    d = 1
    while d <= max_offset:
        for signed in (d, -d):
            if 0 <= b + signed < total:
                probes.append((signed, unlinear(b + signed, grid)))
        d *= 2
    return probes


def stratum(pid: Pid, grid: Pid) -> tuple[bool, bool, bool]:
    return pid[0] == grid[0] - 1, pid[1] == grid[1] - 1, pid[2] == grid[2] - 1


def stratum_size(key: tuple[bool, bool, bool], grid: Pid) -> int:
    n = 1
    for last, g in zip(key, grid):
        n *= 1 if last else g - 1
    return n


def program_scales(samples: list[Pid], grid: Pid) -> dict[Pid, float]:
    """How many programs each sample stands for (the scales sum to the number of programs)."""
    groups: dict[tuple[bool, bool, bool], list[Pid]] = defaultdict(list)
    for p in samples:
        groups[stratum(p, grid)].append(p)
    scales = {}
    for key, members in groups.items():
        for p in members:
            scales[p] = stratum_size(key, grid) / len(members)
    return scales


def loop_plan(n: int, keep: int = 2, *, tail: bool = True) -> list[tuple[int, float]]:
    """(iteration index, weight) pairs to run for a loop of `n` iterations (`tail`: run the last)."""
    if not tail:
        return [(i, n / min(keep, n)) for i in range(min(keep, n))]
    if n <= keep + 1:
        return [(i, 1.0) for i in range(n)]
    head = (n - 1) / keep
    return [*((i, head) for i in range(keep)), (n - 1, 1.0)]
