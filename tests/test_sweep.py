"""The baselines: random search and the exhaustive sweep of the seed's SPACE (`mutators.sweep`)."""

from __future__ import annotations

import itertools
import random

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import SweepConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.records import Individual, Proposal
from mutators.base import MutationContext
from mutators.factory import build_mutator
from tests.fakes.standin import fake_evaluate

from .conftest import ROOT

TASK = NativeTask(ROOT / "evo" / "tasks" / "matmul")
SEED = Candidate.from_source(TASK.seed_source or "")


def seed_individual() -> Individual:
    return Individual(Proposal(SEED, "seed"), fake_evaluate(TASK.key)(SEED, "full"))


def drain(order: str, seed: int = 1, per: int = 7) -> list[Candidate]:
    m = build_mutator(SweepConfig(order=order, per_proposal=per), run_dir=ROOT, seed=seed)
    parent = seed_individual()
    other = Individual(Proposal(SEED.with_params(**{k: v[-1] for k, v in SEED.space().items()}), "stoke"),
                       parent.evaluation)
    ctx = MutationContext(task=TASK, rng=random.Random(0), evaluate=fake_evaluate(TASK.key), seed=parent)
    out: list[Candidate] = []
    while not m.exhausted():
        props = m.propose(other, ctx)  # whatever the parent, the points are the seed's
        assert all(p.parents == (SEED.id,) and p.mutator == "sweep" for p in props)
        out += [p.candidate for p in props if p.candidate is not None]
    assert m.propose(other, ctx) == []
    return out


def every_point() -> set[tuple]:
    space = SEED.space()
    names = sorted(space)
    points = {tuple(zip(names, values)) for values in itertools.product(*(space[n] for n in names))}
    points.discard(tuple((n, SEED.params[n]) for n in names))  # the seed itself is not proposed again
    return points


def point(c: Candidate) -> tuple:
    return tuple((n, c.params[n]) for n in sorted(SEED.space()))


def test_the_grid_sweep_proposes_every_point_of_the_seeds_space_once_in_order():
    got = drain("grid")
    assert len(got) == len(every_point()) and {point(c) for c in got} == every_point()
    assert [point(c) for c in got] == sorted(point(c) for c in got)
    assert all(c.source == SEED.source for c in got)  # the seed's structure: parameters only


def test_random_search_draws_the_same_points_without_replacement_in_a_seeded_order():
    a, b, c = drain("random", seed=1), drain("random", seed=1), drain("random", seed=2)
    assert {point(x) for x in a} == every_point() and len(a) == len(every_point())
    assert [x.id for x in a] == [x.id for x in b]  # the same seed, the same order
    assert [x.id for x in a] != [x.id for x in c]
    assert [point(x) for x in a] != sorted(point(x) for x in a)


def test_a_sweep_resumes_where_its_checkpoint_left_it():
    m = build_mutator(SweepConfig(order="random", per_proposal=5), run_dir=ROOT, seed=3)
    parent = seed_individual()
    ctx = MutationContext(task=TASK, rng=random.Random(0), evaluate=fake_evaluate(TASK.key), seed=parent)
    first = [p.candidate.id for p in m.propose(parent, ctx) if p.candidate]
    fresh = build_mutator(SweepConfig(order="random", per_proposal=5), run_dir=ROOT, seed=3)
    fresh.load_state(m.state())
    assert [p.candidate.id for p in fresh.propose(parent, ctx) if p.candidate] == \
        [p.candidate.id for p in m.propose(parent, ctx) if p.candidate]
    assert first and m.stats()["proposed"] == 10
