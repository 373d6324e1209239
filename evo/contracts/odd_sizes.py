"""Sizes between a task's check sizes and its bench sizes, drawn for a verification.

Check sizes are small (the interpreter runs them in full) and bench sizes are often round (4096^3): a
kernel can be right at both and wrong at the sizes in between that a model actually runs, where the
grid has several programs along an axis and the last one is cut short. A matmul with 128 x 128
tiles never sees a second tile along M or N at check sizes of at most 128, nor a partial tile at
4096. So a verification also runs the candidate at an odd size per bench size: every dimension
that the task lets vary (its value differs among the check and bench sizes) and whose bench value
lies past the largest check value is drawn uniformly from (largest check value, max(that + 1,
bench value / 4)], made odd where it can be; the other dimensions keep their bench value. The draw
comes from the run's secret, so no kernel can know it.
"""

from __future__ import annotations

import random
from typing import Any

Size = dict[str, Any]


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def free_dimensions(sizes: list[Size]) -> set[str]:
    """The integer dimensions whose value differs among `sizes` (the ones a task lets vary)."""
    keys = set().union(*(s.keys() for s in sizes)) if sizes else set()
    return {k for k in keys if all(_is_int(s.get(k)) for s in sizes) and len({s[k] for s in sizes}) > 1}


def odd_size(check_sizes: list[Size], bench_size: Size, rng: random.Random) -> Size | None:
    """A size between `check_sizes` and `bench_size` (see the module docstring), or None where no
    dimension of the bench size lies past the check sizes."""
    free = free_dimensions([*check_sizes, bench_size])
    out = dict(bench_size)
    moved = False
    for dim in sorted(free):
        largest = max(int(s[dim]) for s in check_sizes if dim in s) if any(dim in s for s in check_sizes) else 0
        bench = int(bench_size[dim])
        if bench <= largest + 1:
            continue
        hi = min(bench, max(largest + 1, bench // 4))
        v = rng.randint(largest + 1, hi)
        if v % 2 == 0 and v + 1 <= hi:
            v += 1
        out[dim] = v
        moved = True
    return out if moved else None
