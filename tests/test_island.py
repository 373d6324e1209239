"""`Island` as plain Python: selection, mutation, replacement, identity, checkpoints. No Ray."""

from __future__ import annotations

import random

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, IslandsConfig, LatencyMode
from evo.contracts.history import MsgpackLog, pack, unpack
from evo.contracts.mutator_config import SelectionConfig, entry_names
from evo.contracts.native_task import NativeTask
from evo.contracts.records import Individual, Proposal, Tier
from evo.contracts.verdict import Evaluation, LatencySource, Status
from islands.checkpoint import CheckpointError
from islands.evaluation import EvaluationLedger, LocalEvaluationService
from islands.island import Island, IslandError
from mutators.selection import FixedWeights

from .islands_fakes import (
    EchoMutator,
    FailingMutator,
    FakeEvaluate,
    FakeLatencyEvaluator,
    ParamMutator,
    SwapMutator,
    fake_latency_ms,
)


def make_island(task, mutators, *, index=0, seed=0, evaluate=None, log=None, population=6, offspring=4,
                weights=None):
    """An island on a local service; `log` is its history (read back on creation, as on a resume)."""
    evaluate = evaluate or FakeEvaluate(task.key)
    service = LocalEvaluationService(evaluate, EvaluationLedger(task.key, device="cpu", history=log))
    cfg = IslandsConfig(population=population, offspring=offspring, tournament_size=2)
    selector = FixedWeights(dict(zip(entry_names(mutators), weights or [1.0] * len(mutators))),
                            SelectionConfig(policy="fixed"))
    return Island(index, cfg, task=task, mutators=mutators, selector=selector, service=service, seed=seed), evaluate


def history(log: MsgpackLog) -> list[Individual]:
    return [Individual.from_dict(r) for r in log.read() if r.get("kind") == "evaluation"]


@pytest.fixture
def seed(softmax_task):
    return Candidate.from_source(softmax_task.seed_source)


def test_initial_population_is_the_seed_and_distinct_draws_from_its_space(softmax_task, seed):
    island, ev = make_island(softmax_task, [ParamMutator()])
    report = island.initialize(seed)
    ids = [i.id for i in island.population]
    assert len(ids) == len(set(ids)) and 1 <= len(ids) <= 6
    assert island.seed is not None and island.seed.id == seed.id and report.seed_ok
    space = seed.space()
    for ind in island.population:
        assert all(ind.candidate.params[k] in space[k] for k in space)
    assert report.evaluations == len(ev.calls) == 7
    assert [level for _, level in ev.calls].count("verified") == 1  # the island's best, run in full at bench size
    assert sum(report.failures.values()) + len(ids) == 6  # every draw either failed or joined


def test_generations_improve_on_the_seed_and_never_evaluate_an_id_twice(softmax_task, seed, tmp_path):
    log = MsgpackLog(tmp_path / "history.msgpack")
    island, ev = make_island(softmax_task, [ParamMutator(), SwapMutator()], log=log)
    island.initialize(seed)
    seed_latency = fake_latency_ms(seed)
    for _ in range(4):
        report = island.step()
        ids = [i.id for i in island.population]
        assert len(ids) == len(set(ids)), "two copies of one kernel in the population"
    assert report.best_latency_ms is not None and report.best_latency_ms < seed_latency
    assert report.best_speedup == pytest.approx(seed_latency / report.best_latency_ms)
    assert len(ev.calls) == len(set(ev.calls)), "an id was evaluated twice"
    records = history(log)
    assert len(records) == len(ev.calls)
    swapped = [r for r in records if r.proposal.mutator == "swap" and r.evaluation.level == "full"]
    assert swapped and swapped[0].proposal.parents and swapped[0].proposal.generation >= 1
    assert any(r.evaluation.level == "quick" and r.proposal.note == "inner" for r in records)
    assert island.logbook[-1]["gen"] == 4 and island.logbook[-1]["min"] <= seed_latency
    assert island.hof[0].latency_ms == report.best_latency_ms


def test_failed_children_are_recorded_but_never_join_the_population(softmax_task, seed, tmp_path):
    log = MsgpackLog(tmp_path / "history.msgpack")
    # ParamMutator draws BLOCK=64 sometimes: FakeEvaluate calls that wrong
    island, _ = make_island(softmax_task, [ParamMutator()], log=log)
    island.initialize(seed)
    for _ in range(5):
        island.step()
    wrong = [r for r in history(log) if r.evaluation.status is Status.WRONG_OUTPUT]
    assert wrong, "the fake space has a wrong BLOCK; some draw should have hit it"
    assert all(i.evaluation.ok for i in island.population)
    assert {r.candidate.id for r in wrong}.isdisjoint(i.id for i in island.population)
    assert island.recent_failures and island.recent_failures[-1].evaluation.status is Status.WRONG_OUTPUT


@pytest.mark.parametrize("raises", [False, True])
def test_a_failing_mutator_is_reported_and_the_island_goes_on(softmax_task, seed, raises):
    island, _ = make_island(softmax_task, [FailingMutator(raises=raises), ParamMutator()])
    island.initialize(seed)
    reports = [island.step() for _ in range(3)]
    failed = [f for r in reports for f in r.failed_proposals]
    assert failed and all(f.mutator == "failing" for f in failed)
    assert ("the fake mutator broke" if raises else "could not be applied") in failed[0].error
    stats = island.selector.table["failing"]
    assert stats.proposals == len(failed) and stats.valid == 0 and stats.pulls >= len(failed)
    if not raises:
        assert sum(r.llm_usd for r in reports) == pytest.approx(0.25 * len(failed))


def test_duplicates_are_not_evaluated(softmax_task, seed):
    island, ev = make_island(softmax_task, [EchoMutator()], population=1)
    island.initialize(seed)
    calls = len(ev.calls)
    report = island.step()
    assert len(ev.calls) == calls and report.evaluations == 0 and report.duplicates == report.proposals > 0


def test_same_seed_same_run_and_islands_have_their_own_streams(softmax_task, seed):
    def run(index, campaign_seed):
        island, ev = make_island(softmax_task, [ParamMutator(), SwapMutator()], index=index, seed=campaign_seed)
        island.initialize(seed)
        for _ in range(3):
            island.step()
        return ev.calls

    assert run(0, 7) == run(0, 7)
    assert run(0, 7) != run(1, 7)
    assert run(0, 7) != run(0, 8)


def test_the_global_random_state_is_left_alone(softmax_task, seed):
    island, _ = make_island(softmax_task, [ParamMutator()])
    island.initialize(seed)
    random.seed(123)
    before = random.getstate()
    island.step()
    assert random.getstate() == before


def test_a_checkpointed_island_continues_exactly_like_the_original(softmax_task, seed, tmp_path):
    log = MsgpackLog(tmp_path / "history.msgpack")
    a, ev_a = make_island(softmax_task, [ParamMutator(), SwapMutator()], seed=3, log=log)
    a.initialize(seed)
    a.step()
    a.step()
    state = unpack(pack(a.state()))  # what a checkpoint file holds
    # as on resume: the cache is rebuilt from the history, so nothing evaluated before is redone
    b, ev_b = make_island(softmax_task, [ParamMutator(), SwapMutator()], seed=3, log=log)
    b.load_state(state)
    assert [i.id for i in b.population] == [i.id for i in a.population] and b.generation == 2
    assert b.mutators[0].observed == a.mutators[0].observed  # mutator state travels too
    calls_a = len(ev_a.calls)
    ra, rb = a.step(), b.step()
    assert ev_b.calls == ev_a.calls[calls_a:]
    assert (ra.best_id, ra.population, ra.generation) == (rb.best_id, rb.population, rb.generation)
    assert len(b.logbook) == len(a.logbook)


def test_a_checkpoint_of_another_island_is_refused(softmax_task, seed):
    a, _ = make_island(softmax_task, [ParamMutator()], index=0)
    a.initialize(seed)
    b, _ = make_island(softmax_task, [ParamMutator()], index=1)
    with pytest.raises(CheckpointError, match="checkpoint of island 0 given to island 1"):
        b.load_state(a.state())


def test_fitness_ranks_timed_over_untimed_over_failed():
    def ind(status, latency):
        c = Candidate("src", {"latency": latency or 0, "status": status.value})
        ev = Evaluation(c.id, "t", "cpu", status, latency_ms=latency,
                        latency_source=LatencySource.MODEL if latency else None)
        return Individual(Proposal(c, "seed"), ev)

    fast, slow = ind(Status.OK, 1.0), ind(Status.OK, 2.0)
    untimed, failed = ind(Status.OK, None), ind(Status.WRONG_OUTPUT, None)
    assert fast.fitness > slow.fitness > untimed.fitness > failed.fitness
    assert (fast.tier, untimed.tier, failed.tier) == (Tier.TIMED, Tier.UNTIMED, Tier.FAILED)


def test_without_latency_correct_candidates_still_evolve(softmax_task, seed):
    island, _ = make_island(softmax_task, [ParamMutator()], evaluate=FakeEvaluate(softmax_task.key, timed=False))
    island.initialize(seed)
    report = island.step()
    assert report.best_latency_ms is None and report.best_speedup is None and island.population


def test_an_island_without_a_correct_candidate_says_so(softmax_task):
    island, _ = make_island(softmax_task, [ParamMutator()])
    report = island.initialize(Candidate.from_source(softmax_task.seed_source, {"BLOCK": 64}))
    assert not report.seed_ok
    with pytest.raises(IslandError, match="no correct candidate"):
        island.step()


def test_migrants_are_deduplicated_and_never_evaluated(softmax_task, seed):
    a, _ = make_island(softmax_task, [SwapMutator(quick_check=False)], index=0, population=3)
    b, ev_b = make_island(softmax_task, [ParamMutator()], index=1, population=3)
    a.initialize(seed)
    a.step()
    b.initialize(seed)
    calls = len(ev_b.calls)
    migrants = a.emigrants(2)
    assert migrants[0].fitness >= migrants[1].fitness
    stayed = b.immigrate(migrants + migrants)
    ids = [i.id for i in b.population]
    assert len(ids) == len(set(ids)) and all(level == "verified" for _, level in ev_b.calls[calls:])
    assert migrants[0].id in ids and stayed >= 1
    assert b.immigrate(migrants) == 0  # already resident


def test_an_island_with_real_evaluations_adopts_the_faster_kernel(softmax_task, seed, tmp_path, request):
    """Real lint + equivalence in a worker (fake latency): a wrong swap is refused, a right one wins. A new
    best is verified in full at the bench size: 256 rows of 4096 (at the library's 4096 rows the
    interpreter takes a minute per kernel; no latency is modelled, the fake one replaces it)."""
    from .islands_fakes import WRONG_SOFTMAX

    small = NativeTask(softmax_task.path)
    small.bench_sizes = [{"rows": 256, "cols": 4096}]
    real = FakeLatencyEvaluator(small, EvaluationConfig(timeout_s=60.0, memory_mb=1024, latency=LatencyMode.OFF),
                                "cpu")
    request.addfinalizer(real.close)
    log = MsgpackLog(tmp_path / "history.msgpack")
    swaps = [SwapMutator(quick_check=False), SwapMutator(WRONG_SOFTMAX, quick_check=False)]
    island, _ = make_island(softmax_task, swaps,
                            evaluate=lambda c, level: real.evaluate(c, level=level), log=log,
                            population=2, offspring=2, weights=[1.0, 1.0])
    island.initialize(seed)
    while not any(r.proposal.mutator == "swap-2" for r in history(log)) or \
            island.best().latency_ms == fake_latency_ms(seed):
        island.step()
        assert island.generation < 20
    statuses = {r.proposal.mutator: r.evaluation.status for r in history(log) if r.proposal.generation > 0}
    assert statuses == {"swap": Status.OK, "swap-2": Status.WRONG_OUTPUT}
    assert island.best().candidate.source.startswith('"""Correct: the whole row in one block')


def test_the_selector_records_each_pull_and_a_duplicate_is_no_improvement(softmax_task, seed):
    island, _ = make_island(softmax_task, [SwapMutator(quick_check=False), EchoMutator()], population=3)
    island.initialize(seed)
    for _ in range(3):
        island.step()
    swap, echo = island.selector.table["swap"], island.selector.table["echo"]
    assert swap.pulls + echo.pulls == 3 * 4  # offspring parents per generation, one pull each
    assert swap.improvements == 1  # the faster kernel, once: later swaps re-propose a resident
    assert echo.pulls == 0 or (echo.correct == echo.proposals and echo.improvements == 0)


def test_an_exhausted_mutator_is_not_chosen(softmax_task, seed):
    class Spent(ParamMutator):
        name = "spent"

        def exhausted(self) -> bool:
            return True

    island, _ = make_island(softmax_task, [Spent(), SwapMutator(quick_check=False)], weights=[100.0, 1.0])
    island.initialize(seed)
    island.step()
    assert island.selector.table["spent"].pulls == 0 and island.selector.table["swap"].pulls == 4


def test_an_islands_best_must_pass_a_full_run_at_bench_size_or_leave_for_good(softmax_task, seed):
    """A kernel right at the check sizes but wrong in a full bench-size run never becomes the best."""

    class WrongAtBench(FakeEvaluate):
        def __call__(self, candidate, level):
            ev = super().__call__(candidate, level)
            if level == "verified" and candidate.params.get("BLOCK") == 4096:
                return ev.with_(status=Status.WRONG_OUTPUT, reason="fake: wrong at the bench size", latency_ms=None)
            return ev

    island, ev = make_island(softmax_task, [ParamMutator()], evaluate=WrongAtBench(softmax_task.key), population=8)
    island.initialize(seed)
    for _ in range(6):
        island.step()
    best = island.best()
    assert best is not None and best.id in island.verified and best.candidate.params.get("BLOCK") != 4096
    rejected = [cid for cid, level in ev.calls if level == "verified" and cid in island.rejected]
    assert rejected, "the fake space's BLOCK 4096 (its fastest) should have been the best once"
    assert all(i.id not in island.rejected for i in [*island.population, *island.hof])
    assert any(f.evaluation.reason == "fake: wrong at the bench size" for f in island.recent_failures)
    again = Island(0, island.cfg, task=softmax_task, mutators=[ParamMutator()], selector=island.selector,
                   service=island.service, seed=0)
    again.load_state(unpack(pack(island.state())))
    assert again.verified == island.verified and again.rejected == island.rejected


def test_an_island_of_one_whose_only_child_fails_verification_breeds_from_the_seed_again(softmax_task, seed):
    """Population 1: the child displaces the seed, then fails its full run; the island must not be left empty."""

    class NothingVerifies(FakeEvaluate):
        def __call__(self, candidate, level):
            ev = super().__call__(candidate, level)
            if level == "verified":
                return ev.with_(status=Status.TIMEOUT, reason="fake: not verified at bench size", latency_ms=None)
            return ev

    island, _ = make_island(softmax_task, [ParamMutator()], evaluate=NothingVerifies(softmax_task.key),
                            population=1, offspring=1)
    island.initialize(seed)
    for _ in range(8):
        island.step()  # raised "no correct candidate to breed from" once the child was rejected
    assert [i.id for i in island.population] == [island.seed.id] and island.best().id == island.seed.id
    assert island.rejected
