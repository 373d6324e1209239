"""The contract every mutator kind meets (mutators/base.py), run on each kind by one suite:
same seed, same proposals; parents never modified; failures observed without error; ids and
lineage recorded; state survives a checkpoint round trip."""

from __future__ import annotations

import copy
import json
import math
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import msgpack
import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import LLMConfig, OptunaConfig, StokeConfig, SweepConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import Evaluation, Status
from mutators.base import MutationContext, Mutator
from mutators.factory import build_mutator
from tests.fakes.openai_server import FakeOpenAI, Reply

# a fake evaluate on purpose: the contract is about the protocol (determinism, lineage, state),
# run for every mutator kind; no worker keeps it fast
from tests.fakes.standin import fake_evaluate

ROOT = Path(__file__).resolve().parents[2]
REWRITE = (ROOT / "tests" / "candidates" / "softmax" / "one_pass.py").read_text()
KINDS = ("stoke", "optuna", "llm", "sweep")


def _reply(body: dict) -> Reply:
    # Deterministic in the request: the same prompt always gets the same rewrite.
    return Reply(f"One block per row, one pass.\n```python\n{REWRITE}```")


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=_reply) as s:
        yield s


@pytest.fixture(scope="module")
def task() -> NativeTask:
    return NativeTask(ROOT / "evo" / "tasks" / "softmax")


@pytest.fixture
def factory(request: pytest.FixtureRequest, server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> Callable[[str], Mutator]:
    monkeypatch.setenv("EVO_TEST_LLM_KEY", "test-key-not-secret")
    count = iter(range(100))

    def make(kind: str) -> Mutator:
        run_dir = tmp_path / f"run{next(count)}"
        cfg: StokeConfig | OptunaConfig | LLMConfig | SweepConfig
        if kind == "sweep":
            cfg = SweepConfig(per_proposal=3)
        elif kind == "stoke":
            cfg = StokeConfig(chain_length=4)
        elif kind == "optuna":
            cfg = OptunaConfig(trials_per_proposal=3)
        else:
            cfg = LLMConfig(model="fake-model", base_url=server.base_url, api_key_env="EVO_TEST_LLM_KEY",
                            retries=0, timeout_s=30)
        return build_mutator(cfg, run_dir=run_dir, seed=7)

    return make


def _parent(task: NativeTask) -> Individual:
    seed = Candidate.from_source(task.seed_source or "")
    return Individual(Proposal(seed, "seed"), fake_evaluate(task.key)(seed, "full"))


def _ctx(task: NativeTask, seed: int = 3) -> MutationContext:
    return MutationContext(task=task, rng=random.Random(seed), evaluate=fake_evaluate(task.key), hardware="test GPU")


def _proposals(m: Mutator, task: NativeTask, rounds: int = 2) -> list[Proposal]:
    parent, ctx, out = _parent(task), _ctx(task), []
    for _ in range(rounds):
        props = m.propose(parent, ctx)
        for p in props:
            if p.candidate is not None:
                m.observe(p, fake_evaluate(task.key)(p.candidate, "full"))
        out += props
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_seed_gives_the_same_proposals(kind, factory, task):
    first = [(p.candidate.id if p.candidate else None, p.note) for p in _proposals(factory(kind), task)]
    second = [(p.candidate.id if p.candidate else None, p.note) for p in _proposals(factory(kind), task)]
    assert first and first == second


@pytest.mark.parametrize("kind", KINDS)
def test_parents_are_never_modified(kind, factory, task):
    parent, ctx = _parent(task), _ctx(task)
    before = (parent.candidate.source, copy.deepcopy(parent.candidate.params), parent.candidate.id,
              parent.evaluation.to_dict())
    m = factory(kind)
    for p in m.propose(parent, ctx):
        if p.candidate is not None:
            m.observe(p, fake_evaluate(task.key)(p.candidate, "full"))
    assert (parent.candidate.source, parent.candidate.params, parent.candidate.id,
            parent.evaluation.to_dict()) == before


@pytest.mark.parametrize("kind", KINDS)
def test_failures_are_observed_without_error(kind, factory, task):
    m = factory(kind)
    parent = _parent(task)
    props = m.propose(parent, _ctx(task))
    assert props
    for p in props:
        assert p.candidate is not None
        for status, error in ((Status.COMPILE_ERROR, math.inf), (Status.WRONG_OUTPUT, 2.5), (Status.TIMEOUT, math.inf),
                              (Status.OK, 0.0)):  # correct but no latency measured
            m.observe(p, Evaluation(p.candidate.id, task.key, "fake", status, reason="boom", error=error))
    m.observe(Proposal(candidate=None, mutator=m.name, parents=(parent.candidate.id,), error="no reply"),
              Evaluation("none", task.key, "fake", Status.LINT_ERROR, reason="nothing to evaluate"))
    foreign = Candidate(parent.candidate.source, {**parent.candidate.params, "BLOCK": 64})
    m.observe(Proposal(candidate=foreign, mutator="other", parents=()),
              Evaluation(foreign.id, task.key, "fake", Status.CRASH, reason="segfault"))
    assert m.propose(parent, _ctx(task, seed=4)) is not None  # still usable afterwards


@pytest.mark.parametrize("kind", KINDS)
def test_ids_and_lineage_are_recorded(kind, factory, task):
    m = factory(kind)
    parent = _parent(task)
    props = m.propose(parent, _ctx(task))
    assert props
    assert m.kind == kind and m.name == kind
    for p in props:
        assert p.mutator == m.name
        assert p.parents == (parent.candidate.id,)
        assert p.note.strip()
        assert p.candidate is not None and p.candidate.id != parent.candidate.id
        assert p.cost_s >= 0 and p.cost_usd >= 0


@pytest.mark.parametrize("kind", KINDS)
def test_state_survives_a_checkpoint(kind, factory, task):
    m = factory(kind)
    _proposals(m, task, rounds=1)
    state = m.state()
    packed = msgpack.unpackb(msgpack.packb(state), raw=False)  # checkpoints are msgpack
    json.dumps(m.stats())
    fresh = factory(kind)
    fresh.load_state(packed)
    assert fresh.state() == m.state()
