"""Each mutator alone improves on the seed of the softmax and matmul tasks within a small budget.

Correctness is the real equivalence checker (Triton interpreter on the CPU). Latency is the TEST
STAND-IN of `tests/fakes/standin.py` (a deterministic function of source and params, not a
performance model) until the roofline latency stage lands; the loop below stands in for an island.
The LLM is the fake OpenAI-compatible server, scripted to return a known-better rewrite.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from evo.candidate import Candidate
from evo.native_task import NativeTask
from evo.task import Task
from fitness.evaluate import EvalSettings, Evaluator
from mutators.base import MutationContext, Mutator, Scored
from mutators.config import LLMConfig, OptunaConfig, StokeConfig, build_mutator
from mutators.stoke import StokeMutator
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.standin import with_standin_latency

ROOT = Path(__file__).resolve().parent.parent

SOFTMAX_REWRITE = (ROOT / "tests" / "candidates" / "softmax" / "one_pass.py").read_text()
MATMUL_EDITS = """Larger tiles and more warps: 16x16x16 tiles with one warp leave the GPU mostly idle.
<<<<<<< SEARCH
PARAMS = {"BM": 16, "BN": 16, "BK": 16, "num_warps": 1, "num_stages": 1}
=======
PARAMS = {"BM": 64, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": 3}
>>>>>>> REPLACE
"""
BROKEN = "```python\nimport triton\ndef launch(x, y:\n    pass\n```"


@pytest.fixture(scope="module")
def matmul_task() -> NativeTask:
    return NativeTask(ROOT / "tasks" / "matmul")


@pytest.fixture(scope="module")
def matmul_evaluator(matmul_task: NativeTask) -> Iterator[Evaluator]:
    ev = Evaluator(matmul_task, EvalSettings(timeout_s=120.0, memory_mb=1024), device="cpu")
    yield ev
    ev.close()


@dataclass(frozen=True)
class Run:
    seed: Scored
    best: Scored
    proposals: int


def drive(m: Mutator, task: Task, evaluator: Evaluator, rounds: int) -> Run:
    """A single-island loop in miniature: propose from the best so far, check in full, keep the best."""

    def evaluate(c: Candidate, level: str):
        return with_standin_latency(evaluator.evaluate(c, level=level), c)

    seed_c = Candidate.from_source(task.seed_source or "")
    seed = best = Scored(seed_c, evaluate(seed_c, "full"))
    assert seed.evaluation.ok, seed.evaluation.reason
    ctx = MutationContext(task=task, rng=random.Random(0), evaluate=evaluate, hardware="test stand-in")
    n = 0
    for _ in range(rounds):
        for p in m.propose(best, ctx):
            n += 1
            if p.candidate is None:
                continue
            e = evaluate(p.candidate, "full")
            m.observe(p, e)
            if e.ok and e.latency_ms is not None and e.latency_ms < best.latency_ms:
                best = Scored(p.candidate, e)
    return Run(seed, best, n)


def _assert_improved(run: Run) -> None:
    assert run.best.evaluation.ok and run.best.evaluation.level == "full"
    assert run.best.candidate.id != run.seed.candidate.id
    assert run.best.latency_ms < run.seed.latency_ms


@pytest.fixture
def evaluators(request, softmax_task, softmax_evaluator) -> dict[str, tuple[Task, Evaluator]]:
    out: dict[str, tuple[Task, Evaluator]] = {"softmax": (softmax_task, softmax_evaluator)}
    if "matmul" in request.node.name:
        out["matmul"] = (request.getfixturevalue("matmul_task"), request.getfixturevalue("matmul_evaluator"))
    return out


@pytest.mark.parametrize("name", ["softmax", "matmul"])
def test_stoke_alone_improves_on_the_seed(name, evaluators, tmp_path):
    task, ev = evaluators[name]
    m = build_mutator(StokeConfig(chain_length=5), run_dir=tmp_path, seed=0)
    assert isinstance(m, StokeMutator)
    run = drive(m, task, ev, rounds=6 if name == "softmax" else 4)
    _assert_improved(run)
    table = m.table_text()
    assert "param x2" in table and "total" in table
    totals = m.stats()["moves"]
    assert sum(r["valid"] for r in totals.values()) >= sum(r["correct"] for r in totals.values()) > 0


@pytest.mark.parametrize("name", ["softmax", "matmul"])
def test_optuna_alone_improves_on_the_seed(name, evaluators, tmp_path):
    task, ev = evaluators[name]
    m = build_mutator(OptunaConfig(trials_per_proposal=3), run_dir=tmp_path, seed=0)
    run = drive(m, task, ev, rounds=2)
    _assert_improved(run)
    assert run.best.candidate.source == run.seed.candidate.source  # only the params were tuned
    best = m.best(task.key, run.seed.candidate)  # type: ignore[attr-defined]
    assert best is not None and best["params"] == run.best.candidate.params


@pytest.mark.parametrize("name", ["softmax", "matmul"])
def test_llm_alone_improves_on_the_seed(name, evaluators, tmp_path, monkeypatch):
    task, ev = evaluators[name]
    good = SOFTMAX_REWRITE if name == "softmax" else None
    replies = [Reply(BROKEN), Reply(f"One pass over each row.\n```python\n{good}```") if good else Reply(MATMUL_EDITS)]
    monkeypatch.setenv("EVO_TEST_LLM_KEY", "test-key")
    with FakeOpenAI(replies) as server:
        cfg = LLMConfig(model="fake-model", base_url=server.base_url, api_key_env="EVO_TEST_LLM_KEY", retries=0)
        m = build_mutator(cfg, run_dir=tmp_path, seed=0)
        run = drive(m, task, ev, rounds=2)
        assert "does not parse" in server.received[1].body["messages"][1]["content"]  # the failure was shown
    _assert_improved(run)
    assert run.proposals == 2
