"""Migration topologies and `migrate` (DEAP migRing-style, pure)."""

from __future__ import annotations

import random

import pytest

from islands.migration import Topology, migrate, route, targets


def test_ring_sends_to_the_next_island():
    assert targets("ring", 4, random.Random(0)) == [[1], [2], [3], [0]]


def test_full_sends_to_every_other_island():
    assert targets(Topology.FULL, 3, random.Random(0)) == [[1, 2], [0, 2], [0, 1]]


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_random_is_a_derangement_that_changes_between_migrations(n):
    rng = random.Random(1)
    seen = set()
    for _ in range(20):
        t = targets("random", n, rng)
        dests = [d for [d] in t]
        assert sorted(dests) == list(range(n)) and all(d != i for i, d in enumerate(dests))
        seen.add(tuple(dests))
    assert len(seen) > 1 or n == 2


def test_one_island_has_no_neighbours():
    assert targets("full", 1, random.Random(0)) == [[]]


def test_an_unknown_topology_is_an_error():
    with pytest.raises(ValueError, match="'star'"):
        targets("star", 3, random.Random(0))


def test_route_deduplicates_migrants_arriving_from_several_islands():
    inbound = route([["a", "b"], ["a", "c"], []], [[2], [2], []], key=lambda m: m)
    assert inbound == [[], [], ["a", "b", "c"]]


def best(pop, k):
    return sorted(pop)[:k]  # smaller is better in this toy


def replace_worst(pop, newcomers):
    return sorted(set(pop) | set(newcomers))[: len(pop)]


def test_migrate_ring_moves_the_elites_and_keeps_population_sizes():
    pops = [[1, 10, 11], [5, 20, 21], [7, 30, 31]]
    out = migrate(pops, 1, best, replace_worst, "ring", random.Random(0), key=lambda x: x)
    assert out == [[1, 7, 10], [1, 5, 20], [5, 7, 30]]
    assert pops == [[1, 10, 11], [5, 20, 21], [7, 30, 31]]  # inputs untouched


def test_migrate_never_duplicates_a_resident():
    pops = [[1, 2, 3], [1, 4, 5]]
    out = migrate(pops, 2, best, replace_worst, "full", random.Random(0), key=lambda x: x)
    assert out == [[1, 2, 3], [1, 2, 4]]
    assert all(len(p) == len(set(p)) for p in out)
