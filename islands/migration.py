"""Migration between islands, in the style of DEAP's `migRing`: pure functions, with the
selection of emigrants and the replacement of residents passed in.

Every `interval` generations each island sends copies of its top-k to its neighbours:
- ring: island i sends to i + 1 (mod n);
- random: each island sends to one other island, drawn afresh as a random derangement (so every
  island also receives exactly one batch);
- full: every island sends to every other.
Inbound migrants are deduplicated by id (`key`): the same kernel arriving from two islands is one
migrant, and a migrant already resident is not added again. Migrants carry their evaluation and are
never evaluated again.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from evo.contracts.config import Topology

T = TypeVar("T")


def targets(topology: Topology | str, n: int, rng: random.Random) -> list[list[int]]:
    """For each island, the islands it sends to (never itself)."""
    topology = Topology(topology)
    if n < 2:
        return [[] for _ in range(n)]
    if topology is Topology.RING:
        return [[(i + 1) % n] for i in range(n)]
    if topology is Topology.FULL:
        return [[j for j in range(n) if j != i] for i in range(n)]
    while True:  # a random derangement; for n >= 2 about 1/e of permutations qualify
        perm = list(range(n))
        rng.shuffle(perm)
        if all(perm[i] != i for i in range(n)):
            return [[perm[i]] for i in range(n)]


def route(emigrants: Sequence[Sequence[T]], to: Sequence[Sequence[int]], key: Callable[[T], Hashable]) -> list[list[T]]:
    """Inbound migrants per island, first arrival kept when one id comes from several islands."""
    inbound: list[list[T]] = [[] for _ in emigrants]
    seen: list[set[Hashable]] = [set() for _ in emigrants]
    for src, dests in enumerate(to):
        for dst in dests:
            for m in emigrants[src]:
                k = key(m)
                if k not in seen[dst]:
                    seen[dst].add(k)
                    inbound[dst].append(m)
    return inbound


def migrate(
    populations: Sequence[Sequence[T]], k: int, selection: Callable[[Sequence[T], int], Sequence[T]],
    replacement: Callable[[Sequence[T], Sequence[T]], list[T]], topology: Topology | str, rng: random.Random,
    key: Callable[[T], Hashable],
) -> list[list[T]]:
    """New populations after one migration: `selection(pop, k)` picks emigrants, `replacement(pop,
    immigrants)` makes room for the inbound ones that are not already resident."""
    emigrants = [list(selection(pop, k)) for pop in populations]
    inbound = route(emigrants, targets(topology, len(populations), rng), key)
    out = []
    for pop, arrivals in zip(populations, inbound):
        resident = {key(m) for m in pop}
        out.append(replacement(pop, [m for m in arrivals if key(m) not in resident]))
    return out
