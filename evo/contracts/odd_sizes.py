"""Sizes between a task's check sizes and its bench sizes, drawn for a verification.

Check sizes are small (the interpreter runs them in full) and bench sizes are often round (4096^3): a
kernel can be right at both and wrong at the sizes in between that a model actually runs, where the
grid has several programs along an axis and the last one is cut short. A matmul with 128 x 128
tiles never sees a second tile along M or N at check sizes of at most 128, nor a partial tile at
4096. So a verification also runs the candidate at an odd size per bench size: every dimension
that the task lets vary (its value differs among the check and bench sizes) is drawn, made odd where
it can be: one whose bench value lies past the largest check value uniformly from (largest check
value, bench value], up to the bench value itself (a kernel may change its path anywhere below it),
any other from the range of its check and bench values (no dimension is pinned to one value). Only
dimensions that are the same in every size keep their value. The draw comes from the run's secret,
so no kernel can know it. A drawn size may be as large as the bench size: the evaluator runs one
past the race sanitizer's budget as it runs a bench size (`fitness.evaluate`).
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
        checked = [int(s[dim]) for s in check_sizes if dim in s]
        largest, bench = max(checked, default=0), int(bench_size[dim])
        if bench > largest + 1:
            lo, hi = largest + 1, bench
            moved = True
        else:  # within the checked range: drawn there too, not pinned to its bench value
            lo, hi = min([*checked, bench]), max(largest, bench)
        v = rng.randint(lo, hi)
        if v % 2 == 0 and v + 1 <= hi:
            v += 1
        out[dim] = v
    return out if moved else None
