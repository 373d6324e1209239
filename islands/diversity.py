"""Replacement that keeps structures apart: one kernel structure cannot take a whole population.

A structure is `Candidate.structure` (the hash of the source without its params): the SPACE
variants of one kernel share it, so without a cap a good structure's param variants crowd out a
newer, still slower structure before mutation can improve it. The best of every structure are
placed first, at most `cap` per structure; places still free then go to the best of the rest, so
a population with a single structure stays full.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from deap import tools

from evo.contracts.records import Individual


def structure_cap(population: int, share: float) -> int:
    """How many places one structure may take before the others have theirs (at least one)."""
    return max(1, math.ceil(population * share))


def diverse_best(pool: Sequence[Individual], k: int, cap: int) -> list[Individual]:
    """The best `k` of `pool` (distinct ids, best first) with at most `cap` of one structure while
    individuals of other structures are left; ties keep `pool`'s order (incumbents first)."""
    ranked = list(tools.selBest(list(pool), len(pool)))  # stable: equal fitness keeps pool order
    taken: dict[str, int] = {}
    chosen: set[int] = set()
    for i, ind in enumerate(ranked):
        if len(chosen) == k:
            break
        s = ind.candidate.structure
        if taken.get(s, 0) < cap:
            taken[s] = taken.get(s, 0) + 1
            chosen.add(i)
    for i in range(len(ranked)):
        if len(chosen) == k:
            break
        chosen.add(i)
    return [ranked[i] for i in sorted(chosen)]
