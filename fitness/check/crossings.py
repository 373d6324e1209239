"""Sizes past the thresholds a kernel compares with, tried even when every line ran.

A path can split without a line of its own: ``tl.where(n_cols > 8192, a, b)``, ``scale = 1.0 - 0.5 *
(n > LIMIT)``, a mask on a size. Where the code compares a value with a threshold fixed for the candidate
(an integer expression of literals, meta-parameters and module constants: `fitness.check.thresholds`)
and no check size of some free dimension lies past it, the check also runs a small check size with that
dimension one past it (at most `MAX_CROSSINGS` sizes, cheapest first), checked like a check size. A
wrong result there is the verdict, at a size the check chose.
"""

from __future__ import annotations

import ast
import itertools

from evo.contracts.candidate import Candidate
from evo.contracts.task import Size, Task, size_key
from fitness.check.fixed import reachable
from fitness.check.thresholds import LARGEST_THRESHOLD, MAX_ELEMENTS, base_size, constants, cost, value

MAX_CROSSINGS = 4


def compared(candidate: Candidate) -> list[tuple[int, int]]:
    """(threshold, line) of every comparison in the code ``launch`` reaches between a value fixed for the
    candidate and one that is not."""
    tree = ast.parse(candidate.source)
    names = constants(candidate, tree)
    live = reachable(tree)
    out: list[tuple[int, int]] = []
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name in live):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            for a, b in itertools.pairwise(operands):
                va, vb = value(a, names), value(b, names)
                if (va is None) != (vb is None):
                    t = va if va is not None else vb
                    if t is not None and 1 <= t <= LARGEST_THRESHOLD:
                        out.append((t, node.lineno))
    return sorted(set(out))


def crossing_sizes(task: Task, candidate: Candidate) -> list[tuple[Size, int, int]]:
    """(size, threshold, line) to try: a free dimension of the small check size moved one past a compared
    threshold no check size of that dimension lies past; cheapest first, at most `MAX_CROSSINGS`."""
    base, free = base_size(task)
    known = {size_key(s) for s in task.check_sizes}
    found: dict[str, tuple[Size, int, int]] = {}
    for t, line in compared(candidate):
        for dim in free:
            largest = max((int(s[dim]) for s in task.check_sizes if dim in s), default=0)
            if largest > t:
                continue
            size = {**base, dim: t + 1}
            key = size_key(size)
            if key not in known and key not in found and cost(size) <= MAX_ELEMENTS:
                found[key] = (size, t, line)
    return sorted(found.values(), key=lambda f: cost(f[0]))[:MAX_CROSSINGS]
