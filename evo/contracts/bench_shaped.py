"""Bench-shaped check cases: the bench size's long dimensions, run with every rule of the check.

Check sizes are small, so a kernel whose path changes only when a dimension is large (a loop that
merges partial sums once a row spans several blocks, a softmax that drops the max subtraction past
2048 columns) never takes that path in the check; at the bench size it runs once, on one draw, with
the race sanitizer off. So the full check also runs, for each bench size (each shape of a workload),
a case that keeps the bench size's dimensions and shrinks only as many as it must to stay under a
budget of elements: the race sanitizer costs 16 bytes per byte of every buffer and the interpreter
is slow per program. Dimensions are shrunk in the order the task names them, outermost first (rows
before columns, batch and heads before the sequence, M and N before K, as sizes are written), each to
a small check value (the smallest odd one above 1: several programs along it, not a multiple of a
block), then to 1; then the innermost long dimension is halved until the case fits. So softmax at
4096 x 4096 is checked at 3 x 4096, a reduction of 2^26 at 2^19, attention 4 x 32 x 4096 x 128 at
1 x 1 x 2048 x 128. A kernel whose path needs two dimensions large at once still meets the bench
size itself at verification, and sizes between the check and bench sizes drawn up to it
(`evo.contracts.odd_sizes`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evo.contracts.odd_sizes import free_dimensions

Size = dict[str, Any]

CAP_ELEMENTS = 1 << 20  # elements of all inputs and outputs of one bench-shaped case: race maps of 16 MiB per 4 bytes
WORK_FACTOR = 2  # a bench-shaped case does at most this many times the work of the largest check size


def small_value(values: list[int]) -> int:
    """The smallest value above 1 among `values` (several programs along the dimension), else the smallest."""
    above = [v for v in values if v > 1]
    return min(above) if above else min(values)


def bench_shaped_size(check_sizes: list[Size], bench_size: Size, elements: Callable[[Size], int],
                      work: Callable[[Size], float]) -> Size | None:
    """The bench-shaped size for `bench_size` (see the module docstring); None where no dimension of it
    lies past the check sizes, or where no shape past them fits `CAP_ELEMENTS`. `elements(size)` counts
    the elements of a case's inputs and outputs, `work(size)` its work (FLOPs where the task counts them)."""
    free = free_dimensions([*check_sizes, bench_size])
    values = {d: [int(s[d]) for s in check_sizes if d in s] for d in free}
    long = [d for d in bench_size if d in free and values[d] and int(bench_size[d]) > max(values[d])]
    if not long:
        return None
    budget = WORK_FACTOR * max(work(s) for s in check_sizes)

    def fits(size: Size) -> bool:
        return elements(size) <= CAP_ELEMENTS and work(size) <= budget

    size = dict(bench_size)
    *outer, inner = long
    for shrink in (lambda d: small_value(values[d]), lambda d: min(values[d])):
        for d in outer:
            if fits(size):
                return size
            size[d] = min(size[d], shrink(d))
    floor = max(values[inner]) + 1
    # halved while over the budget and the half is still past the check sizes: the last step may stay over
    # the work budget (never over the memory cap), so that the long dimension stays long
    while not fits(size) and size[inner] // 2 >= floor:
        size[inner] //= 2
    return size if elements(size) <= CAP_ELEMENTS else None
