"""Structural diversity in island replacement: one kernel structure cannot take a population over."""

from __future__ import annotations

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import IslandsConfig
from evo.contracts.history import pack, unpack
from evo.contracts.mutator_config import SelectionConfig, entry_names
from evo.contracts.records import Individual, Proposal
from islands.diversity import diverse_best, structure_cap
from islands.evaluation import EvaluationLedger, LocalEvaluationService
from islands.island import Island
from mutators.selection import FixedWeights

from .islands_fakes import FASTER_SOFTMAX, FakeEvaluate, ParamMutator

FAST_BLOCKS = (128, 256, 512, 1024, 2048, 4096)


def _island(task, *, share: float | None = None, population: int = 4) -> Island:
    extra = {} if share is None else {"structure_share": share}
    cfg = IslandsConfig(population=population, offspring=2, tournament_size=2, **extra)
    mutators = [ParamMutator()]
    selector = FixedWeights(dict(zip(entry_names(mutators), [1.0])), SelectionConfig(policy="fixed"))
    service = LocalEvaluationService(FakeEvaluate(task.key), EvaluationLedger(task.key, device="cpu"))
    return Island(0, cfg, task=task, mutators=mutators, selector=selector, service=service, seed=0)


def _fast_migrants(task) -> list[Individual]:
    """Six one-pass kernels: three times faster than any three-pass one under the fake latency."""
    out = []
    for block in FAST_BLOCKS:
        c = Candidate.from_source(FASTER_SOFTMAX).with_params(BLOCK=block, num_warps=4)
        out.append(Individual(Proposal(c, "swap"), FakeEvaluate(task.key)(c, "full")))
    return out


def _structures(island: Island) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ind in island.population:
        counts[ind.candidate.structure] = counts.get(ind.candidate.structure, 0) + 1
    return counts


@pytest.fixture
def seed(softmax_task):
    return Candidate.from_source(softmax_task.seed_source)


def test_many_fast_kernels_of_one_structure_leave_room_for_a_slower_other(softmax_task, seed):
    island = _island(softmax_task)
    island.initialize(seed)
    slow = seed.structure
    assert set(_structures(island)) == {slow}
    island.immigrate(_fast_migrants(softmax_task))
    counts = _structures(island)
    assert len(island.population) == 4
    assert counts[slow] == 2, "the slower structure kept its places (half the population by default)"
    best = island.best()
    assert best is not None and best.candidate.structure != slow  # the best is still the best
    assert island.population[0].id == best.id  # the population stays ordered best first


def test_with_the_cap_off_one_structure_takes_the_population(softmax_task, seed):
    island = _island(softmax_task, share=1.0)
    island.initialize(seed)
    island.immigrate(_fast_migrants(softmax_task))
    assert seed.structure not in _structures(island)


def test_a_single_structure_still_fills_the_population(softmax_task, seed):
    island = _island(softmax_task, population=6)
    island.initialize(seed)
    assert len(island.population) == len({i.id for i in island.population}) > structure_cap(6, 0.5)


def test_a_resumed_island_keeps_the_same_mix(softmax_task, seed):
    island = _island(softmax_task)
    island.initialize(seed)
    island.immigrate(_fast_migrants(softmax_task))
    again = _island(softmax_task)
    again.load_state(unpack(pack(island.state())))
    assert [i.id for i in again.population] == [i.id for i in island.population]
    for isl in (island, again):
        isl.step()
    assert [i.id for i in again.population] == [i.id for i in island.population]
    assert len(_structures(again)) == 2


def test_diverse_best_ranks_best_first_and_caps_each_structure(softmax_task):
    fast = _fast_migrants(softmax_task)
    slow_src = Candidate.from_source(softmax_task.seed_source)
    slow = [Individual(Proposal(c, "seed"), FakeEvaluate(softmax_task.key)(c, "full"))
            for c in (slow_src.with_params(BLOCK=b) for b in (1024, 4096))]
    chosen = diverse_best(slow + fast, 5, cap=2)
    assert [i.candidate.structure for i in chosen].count(slow_src.structure) == 2
    latencies = [float(i.latency_ms or 0.0) for i in chosen]
    assert latencies == sorted(latencies)
    assert diverse_best(slow + fast, 5, cap=5) == sorted(slow + fast, key=lambda i: float(i.latency_ms or 0.0))[:5]
    with pytest.raises(ValueError):
        IslandsConfig(structure_share=0.0)
