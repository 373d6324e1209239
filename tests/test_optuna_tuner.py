"""The Optuna mutator: studies per structure, known-good configs first, tell/FAIL, resume, samplers."""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import OptunaConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import Evaluation, Status
from mutators.base import MutationContext
from mutators.optuna.known_configs import TRITON_TUTORIAL_MATMUL, known_configs
from mutators.optuna.space import Encoding, derived_space, open_storage
from mutators.optuna.tuner import OptunaMutator

# a fake evaluate on purpose: these tests are about studies, enqueueing and tell/FAIL; no worker
# keeps them fast (the real latency model drives tests/test_mutators_improve.py)
from tests.fakes.standin import fake_evaluate

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def matmul() -> NativeTask:
    return NativeTask(ROOT / "evo" / "tasks" / "matmul")


@pytest.fixture(scope="module")
def softmax() -> NativeTask:
    return NativeTask(ROOT / "evo" / "tasks" / "softmax")


def seed_of(task: NativeTask) -> Individual:
    c = Candidate.from_source(task.seed_source or "")
    return Individual(Proposal(c, "seed"), fake_evaluate(task.key)(c, "full"))


def loop(m: OptunaMutator, task: NativeTask, rounds: int, parent: Individual | None = None,
         evaluate: Callable[[Candidate, str], Evaluation] | None = None) -> list:
    evaluate = evaluate or fake_evaluate(task.key)
    parent = parent or seed_of(task)
    ctx = MutationContext(task=task, rng=random.Random(0), evaluate=evaluate)
    seen = []
    for _ in range(rounds):
        for p in m.propose(parent, ctx):
            assert p.candidate is not None
            m.observe(p, evaluate(p.candidate, "full"))
            seen.append(p)
    return seen


def study(m: OptunaMutator, task: NativeTask) -> optuna.Study:
    return optuna.load_study(study_name=m.study_name(task.key, seed_of(task).candidate), storage=m.storage)


def test_known_good_configs_are_tried_first_in_the_candidates_names(matmul, tmp_path):
    m = OptunaMutator(OptunaConfig(trials_per_proposal=3), journal_path=tmp_path / "j.log", seed=0)
    props = loop(m, matmul, rounds=1)
    first = props[0].candidate.params
    tutorial = TRITON_TUTORIAL_MATMUL[0]
    assert (first["BM"], first["BN"], first["BK"], first["num_warps"], first["num_stages"]) == (
        tutorial["BLOCK_M"], tutorial["BLOCK_N"], tutorial["BLOCK_K"], tutorial["num_warps"], tutorial["num_stages"])
    assert all(p.candidate.source == props[0].candidate.source for p in props)  # only params change
    trials = study(m, matmul).get_trials()
    assert trials[0].state is TrialState.COMPLETE
    assert trials[0].user_attrs == {"source": "parent", "candidate": seed_of(matmul).candidate.id, "status": "ok",
                                    "island": -1}


def test_known_configs_skip_names_and_values_the_candidate_lacks():
    softmax_like = {"BLOCK": 128, "num_warps": 4}
    configs = known_configs(softmax_like, {"BLOCK": [128, 1024, 2048], "num_warps": [4, 8]})
    assert configs and all(set(c) == {"BLOCK", "num_warps"} for c in configs)
    assert {"BLOCK": 4096, "num_warps": 8} not in configs  # 4096 is outside SPACE
    assert known_configs({"BM": 16, "num_warps": 1}, {}) == []  # no BLOCK_N / BLOCK_K: matmul tables do not apply


def test_failures_are_told_as_fail_and_latencies_as_values(softmax, tmp_path):
    m = OptunaMutator(OptunaConfig(trials_per_proposal=2), journal_path=tmp_path / "j.log", seed=0)
    parent = seed_of(softmax)
    ctx = MutationContext(task=softmax, rng=random.Random(0), evaluate=fake_evaluate(softmax.key))
    ok, bad = m.propose(parent, ctx)
    assert ok.candidate is not None and bad.candidate is not None
    m.observe(ok, Evaluation(ok.candidate.id, softmax.key, "cpu", Status.OK, error=0.0, latency_ms=1.5))
    m.observe(bad, Evaluation(bad.candidate.id, softmax.key, "cpu", Status.COMPILE_ERROR, reason="out of resources"))
    by_number = {t.number: t for t in study(m, softmax).get_trials()}
    assert by_number[ok.meta["trial"]].state is TrialState.COMPLETE and by_number[ok.meta["trial"]].value == 1.5
    assert by_number[bad.meta["trial"]].state is TrialState.FAIL
    assert m.stats()["told_fail"] == 1


def test_a_config_already_tried_is_not_proposed_again(softmax, tmp_path):
    m = OptunaMutator(OptunaConfig(sampler="random", trials_per_proposal=4), journal_path=tmp_path / "j.log", seed=0)
    props = loop(m, softmax, rounds=6)
    keys = [tuple(sorted(p.candidate.params.items())) for p in props]
    assert len(keys) == len(set(keys))
    assert seed_of(softmax).candidate.id not in {p.candidate.id for p in props}


def test_studies_survive_a_resume_and_are_shared_through_the_journal(softmax, tmp_path):
    journal = tmp_path / "optuna.journal"
    first = OptunaMutator(OptunaConfig(trials_per_proposal=3), journal_path=journal, seed=0)
    before = loop(first, softmax, rounds=2)
    # a new process, same run dir
    resumed = OptunaMutator(OptunaConfig(trials_per_proposal=3), journal_path=journal, seed=0)
    after = loop(resumed, softmax, rounds=1)
    assert {p.meta["study"] for p in after} == {p.meta["study"] for p in before}
    assert not {p.candidate.id for p in after} & {p.candidate.id for p in before}
    assert min(p.meta["trial"] for p in after) > max(p.meta["trial"] for p in before)


def test_one_study_per_kernel_structure(softmax, tmp_path):
    m = OptunaMutator(OptunaConfig(trials_per_proposal=1), journal_path=tmp_path / "j.log", seed=0)
    seed = seed_of(softmax)
    other_source = seed.candidate.source.replace("tl.exp(", "tl.exp2(1.4426950408889634 * ")
    other_c = Candidate(other_source, seed.candidate.params)
    other = Individual(Proposal(other_c, "seed"), fake_evaluate(softmax.key)(other_c, "full"))
    (a,), (b,) = loop(m, softmax, 1, seed), loop(m, softmax, 1, other)
    assert a.meta["study"] != b.meta["study"] and m.stats()["studies"] == 2


@pytest.mark.parametrize("sampler", ["tpe", "gp", "random", "cmaes", "nsga2"])
def test_every_sampler_tunes_the_numeric_space(sampler, matmul, tmp_path):
    m = OptunaMutator(OptunaConfig(sampler=sampler, trials_per_proposal=4, enqueue_known=False),
                      journal_path=tmp_path / "j.log", seed=1)
    props = loop(m, matmul, rounds=3)
    assert len(props) >= 6
    best = m.best(matmul.key, seed_of(matmul).candidate)
    assert best is not None and best["values"][0] <= seed_of(matmul).latency_ms
    assert len(best["values"]) == (2 if sampler == "nsga2" else 1)  # latency and worst error/tolerance
    for p in props:
        for k, v in p.candidate.params.items():
            assert v in matmul_space(matmul)[k]


def matmul_space(task: NativeTask) -> dict:
    return seed_of(task).candidate.space()


def test_space_encoding_is_ordinal_for_numbers_and_derived_without_space():
    c = Candidate.from_source(
        'PARAMS = {"BLOCK": 64, "mode": "a"}\nSPACE = {"BLOCK": [256, 64, 128], "mode": ["a", "b"]}\n')
    enc = Encoding.of(c)
    assert enc.values["BLOCK"] == [64, 128, 256] and enc.ordinal == {"BLOCK"} and not enc.numeric
    assert enc.encode({"BLOCK": 128, "mode": "b"}) == {"BLOCK": 1, "mode": "b"}
    assert enc.decode({"BLOCK": 2, "mode": "a"}) == {"BLOCK": 256, "mode": "a"}
    assert enc.encode({"BLOCK": 100, "mode": "a"}) is None
    assert derived_space({"BLOCK": 128, "num_warps": 16, "flag": True}) == {
        "BLOCK": [32, 64, 128, 256, 512], "num_warps": [4, 8, 16, 32]}


def test_a_categorical_space_works_with_cmaes(tmp_path, softmax):
    source = (softmax.seed_source or "").replace(
        'SPACE = {', 'SPACE = {"evict": ["evict_first", "evict_last"], ').replace(
        "def launch(x, y, *, BLOCK, num_warps):", "def launch(x, y, *, BLOCK, num_warps, evict='evict_last'):")
    c = Candidate.from_source(source)
    m = OptunaMutator(OptunaConfig(sampler="cmaes", trials_per_proposal=3), journal_path=tmp_path / "j.log", seed=0)
    props = loop(m, softmax, 2, Individual(Proposal(c, "seed"), fake_evaluate(softmax.key)(c, "full")))
    assert props and all(p.candidate.params["evict"] in ("evict_first", "evict_last") for p in props)


def test_storage_accepts_rdb_urls_and_rejects_others(tmp_path, softmax):
    m = OptunaMutator(OptunaConfig(storage=f"sqlite:///{tmp_path / 'o.db'}"), journal_path=tmp_path / "unused",
                      seed=0)
    assert loop(m, softmax, 1) and (tmp_path / "o.db").is_file() and not (tmp_path / "unused").exists()
    with pytest.raises(ValueError, match="expected an RDB URL"):
        open_storage("redis://localhost:6379", tmp_path / "j")
    with pytest.raises(ValueError, match="sampler"):
        OptunaConfig(sampler="bohb")


def test_grid_neighbours_step_once_along_one_parameter():
    c = Candidate.from_source(
        'PARAMS = {"BLOCK": 64, "mode": "a"}\nSPACE = {"BLOCK": [64, 128, 256], "mode": ["a", "b", "c"]}\n')
    enc = Encoding.of(c)
    assert enc.neighbours({"BLOCK": 0, "mode": "b"}) == [
        {"BLOCK": 1, "mode": "b"}, {"BLOCK": 0, "mode": "a"}, {"BLOCK": 0, "mode": "c"}]
    assert enc.neighbours({"BLOCK": 2, "mode": "a"})[:2] == [{"BLOCK": 1, "mode": "a"}, {"BLOCK": 2, "mode": "b"}]


# softmax's SPACE: BLOCK 64..4096 (indices 0..6), num_warps 1..16 (indices 0..4). The fastest point is
# (4096, 4 warps); (4096, 16 warps) is a local optimum of the grid (both its neighbours are slower) and
# (4096, 8 warps) is within 2% of it: what a settled TPE sampler saw on layer norm, never asking 4 warps.
WARPS_COST = {1: 3.0, 2: 2.5, 4: 0.0, 8: 0.51, 16: 0.5}
BLOCKS = [64, 128, 256, 512, 1024, 2048, 4096]


def trap_latency(params: dict) -> float:
    return 1.0 + (6 - BLOCKS.index(params["BLOCK"])) + WARPS_COST[params["num_warps"]]


def trap_evaluate(task: NativeTask):
    def evaluate(c: Candidate, level: str) -> Evaluation:
        return Evaluation(c.id, task.key, "fake", Status.OK, level=level, error=0.0,
                          latency_ms=trap_latency(c.params))
    return evaluate


def settled_run(monkeypatch, tmp_path, softmax, cfg: OptunaConfig, rounds: int, source: str | None = None,
                m: OptunaMutator | None = None) -> tuple[OptunaMutator, list[dict]]:
    """A sampler that always asks BLOCK 64 with 1 warp (it has settled), from a parent at (4096, 16)."""
    def settled(kind: object, seed: int) -> optuna.samplers.BaseSampler:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.PartialFixedSampler({"BLOCK": 0, "num_warps": 0},
                                                       optuna.samplers.RandomSampler(seed=seed))

    monkeypatch.setattr("mutators.optuna.tuner.make_sampler", settled)
    m = m or OptunaMutator(cfg, journal_path=tmp_path / "j.log", seed=0)
    evaluate = trap_evaluate(softmax)
    c = Candidate(source or softmax.seed_source or "", {"BLOCK": 4096, "num_warps": 16})
    parent = Individual(Proposal(c, "seed"), evaluate(c, "full"))
    return m, [dict(p.candidate.params) for p in loop(m, softmax, rounds, parent, evaluate)]


def test_a_settled_sampler_is_answered_by_the_grid_neighbours_of_the_best_few(monkeypatch, tmp_path, softmax):
    best = {"BLOCK": 4096, "num_warps": 4}
    _, alone = settled_run(monkeypatch, tmp_path / "off", softmax, OptunaConfig(
        trials_per_proposal=3, enqueue_known=False, polish=0), rounds=6)
    assert alone == [{"BLOCK": 64, "num_warps": 1}]  # the sampler's one point, then only repeats
    _, best_only = settled_run(monkeypatch, tmp_path / "one", softmax, OptunaConfig(
        trials_per_proposal=3, enqueue_known=False, polish=1), rounds=6)
    assert best not in best_only  # around the best alone the walk stops at the local optimum (4096, 16)
    m, asked = settled_run(monkeypatch, tmp_path / "three", softmax, OptunaConfig(
        trials_per_proposal=3, enqueue_known=False, polish=3), rounds=6)
    assert best in asked and len(asked) == len({tuple(sorted(p.items())) for p in asked})
    assert m.stats()["polished"] >= len(asked) - 1
    # every point it asked, after the sampler's own, is one step from a point measured before it
    index = {"BLOCK": BLOCKS, "num_warps": sorted(WARPS_COST)}
    measured = [{"BLOCK": 4096, "num_warps": 16}, asked[0]]
    for p in asked[1:]:
        assert any(sum(abs(index[k].index(p[k]) - index[k].index(q[k])) for k in p) == 1 for q in measured), p
        measured.append(p)


def test_a_new_structures_study_starts_from_the_fastest_configs_measured_on_others(monkeypatch, tmp_path, softmax):
    cfg = OptunaConfig(trials_per_proposal=3, enqueue_known=False, polish=3, transfer=2)
    m, asked = settled_run(monkeypatch, tmp_path, softmax, cfg, rounds=6)
    fastest = [p for p in sorted(asked, key=trap_latency) if p != {"BLOCK": 4096, "num_warps": 16}]
    other = (softmax.seed_source or "").replace("tl.exp(", "tl.exp2(1.4426950408889634 * ")
    assert other != softmax.seed_source
    # a resumed mutator (its checkpointed state) transfers too; the parent's own config is not asked again
    resumed = OptunaMutator(cfg, journal_path=tmp_path / "j.log", seed=0)
    resumed.load_state(m.state())
    _, first = settled_run(monkeypatch, tmp_path, softmax, cfg, rounds=1, source=other, m=resumed)
    assert first[:2] == fastest[:2] and resumed.stats()["transferred"] == 2
    _, cold = settled_run(monkeypatch, tmp_path / "cold", softmax,
                          OptunaConfig(trials_per_proposal=3, enqueue_known=False, polish=3, transfer=0),
                          rounds=1, source=other)
    assert fastest[0] not in cold


def test_a_transferred_config_keeps_the_new_structures_own_params(tmp_path, softmax):
    m = OptunaMutator(OptunaConfig(transfer=2), journal_path=tmp_path / "j.log", seed=0)
    m.load_state({"fastest": {softmax.key: [[1.0, {"BLOCK": 4096, "num_warps": 4}],
                                            [2.0, {"BLOCK": 4096, "num_warps": 3}]]}})  # 3: not in SPACE
    split = Candidate.from_source('PARAMS = {"BLOCK": 64, "num_warps": 1, "SPLIT": 8}\n'
                                  'SPACE = {"BLOCK": [64, 4096], "num_warps": [1, 4], "SPLIT": [1, 8, 64]}\n')
    enc = Encoding.of(split)
    assert m._transferred(softmax.key, enc, {}, split.params) == [{"BLOCK": 1, "SPLIT": 1, "num_warps": 1}]
