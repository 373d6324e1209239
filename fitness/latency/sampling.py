"""Which programs of each grid (and which iterations of a very long loop) the latency model
interprets, and how their counts are scaled to the whole. Nothing here is predictable by a kernel:
every draw comes from a generator seeded from the run's secret, which no candidate sees; it is the
same for every candidate of the run (`fitness.latency.model.sample_seed`), so kernels are compared
on the same programs.

Programs: a grid is split into strata by "first, middle or last index along axis i" (the last block
along an axis is the one a mask cuts short; the first and last bound the addresses the grid
touches); each stratum's total is its size times the mean of its samples, and every non-empty
stratum gets samples, drawn uniformly at random inside it. A program at the first or last index
stands only for its own stratum, so no program is both always sampled and weighted for others. Positions
are drawn once per call as points u in [0, 1)^3 and mapped onto every launch's grid (program =
floor(u * grid)), so the launches of one call sample matching regions: a launch that splits work
along an axis the launches after it do not have (a split-K or split-KV partial) runs every program
along that axis, which is what a sampled program of the combining launch reads. Reuse probes
(programs at launch-order offsets +-2^i from a sampled one, run only for their addresses) tell
how far apart programs that read the same data are.

Loops: a sampled program runs every iteration of its loops up to `full` iterations per loop, so
its counts are exact and its outputs can be compared with the reference. A longer loop runs its
first and last iterations and a uniform random draw of `LOOP_SAMPLES` others, each standing for
its share; such a program's outputs are not compared (they were not computed in full).
"""

from __future__ import annotations

import random
from collections import defaultdict
from itertools import product

Pid = tuple[int, int, int]
Point = tuple[float, float, float]


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


FIRST, LAST = -1.0, 1.0  # point coordinates that place on the first or the last index of an axis


def draw_points(rng: random.Random, inner: int) -> list[Point]:
    """`inner` uniform points, and one for every edge stratum (first or last along some axes, at
    one uniform draw along the others, shared by the edge points so that axes a grid lacks add none)."""
    points: list[Point] = [(rng.random(), rng.random(), rng.random()) for _ in range(inner)]
    shared = [rng.random() for _ in range(3)]
    for edge in product((None, FIRST, LAST), repeat=3):
        if any(e is not None for e in edge):
            u = [shared[a] if e is None else e for a, e in enumerate(edge)]
            points.append((u[0], u[1], u[2]))
    return points


def place(point: Point, grid: Pid) -> Pid:
    """The program of `grid` at relative position `point` (FIRST and LAST are the end indices; a
    uniform coordinate lands strictly inside when the axis has an inside)."""
    idx = []
    for u, g in zip(point, grid):
        if u == FIRST or g <= 2:
            idx.append(0 if u != LAST else g - 1)
        elif u == LAST:
            idx.append(g - 1)
        else:
            idx.append(1 + min(int(u * (g - 2)), g - 3))
    return idx[0], idx[1], idx[2]


def sample_programs(grid: Pid, points: list[Point], *, full_axes: tuple[int, ...] = ()) -> list[Pid]:
    """The programs of `grid` at `points`, every index along `full_axes`, without repeats."""
    if programs(grid) == 0:
        return []
    chosen: dict[Pid, None] = {}
    for point in points:
        base = list(place(point, grid))
        ranges = [range(grid[a]) if a in full_axes else range(base[a], base[a] + 1) for a in range(3)]
        for pid in product(*ranges):
            chosen[(pid[0], pid[1], pid[2])] = None
    return list(chosen)


def more_programs(grid: Pid, have: list[Pid], rng: random.Random, n: int) -> list[Pid]:
    """Up to `n` uniformly drawn programs of `grid` not in `have` (for a sample that found no work)."""
    total = programs(grid)
    taken = {linear(p, grid) for p in have}
    left = total - len(taken)
    if left <= 0:
        return []
    if left <= 4 * n:
        pool = [i for i in range(total) if i not in taken]
        return [unlinear(i, grid) for i in rng.sample(pool, min(n, len(pool)))]
    out: set[int] = set()
    while len(out) < n:
        i = rng.randrange(total)
        if i not in taken:
            out.add(i)
    return [unlinear(i, grid) for i in sorted(out)]


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


Stratum = tuple[int, int, int]  # per axis: 0 first index, 1 inside, 2 last index


def stratum(pid: Pid, grid: Pid) -> Stratum:
    key = [0 if i == 0 else (2 if i == g - 1 else 1) for i, g in zip(pid, grid)]
    return key[0], key[1], key[2]


def stratum_size(key: Stratum, grid: Pid) -> int:
    n = 1
    for k, g in zip(key, grid):
        n *= g - 2 if k == 1 else 1
    return n


def program_scales(samples: list[Pid], grid: Pid) -> dict[Pid, float]:
    """How many programs each sample stands for (the scales sum to the programs of the sampled strata)."""
    groups: dict[Stratum, list[Pid]] = defaultdict(list)
    for p in samples:
        groups[stratum(p, grid)].append(p)
    scales = {}
    for key, members in groups.items():
        for p in members:
            scales[p] = stratum_size(key, grid) / len(members)
    return scales


LOOP_SAMPLES = 62  # iterations drawn from the inside of a loop too long to run in full


def loop_plan(n: int, full: int, rng: random.Random | None) -> list[tuple[int, float]]:
    """(iteration index, weight) pairs to run for a loop of `n` iterations: all of them up to `full`,
    else the first, the last and up to `LOOP_SAMPLES` random others standing for the rest. Without
    `rng` (reuse probes, which need addresses only) the first iteration alone."""
    if rng is None:
        return [(0, float(n))] if n else []
    if n <= full:
        return [(i, 1.0) for i in range(n)]
    middle = sorted(rng.sample(range(1, n - 1), max(min(full - 2, LOOP_SAMPLES), 1)))
    weight = (n - 2) / len(middle)
    return [(0, 1.0), *((i, weight) for i in middle), (n - 1, 1.0)]
