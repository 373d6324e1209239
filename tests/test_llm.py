"""The LLM mutator against the real `openai` client and a fake OpenAI-compatible server on 127.0.0.1:
good rewrites, broken ones, garbage, timeouts, rate limits, accounting, budget, record and replay."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import LLMConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import Evaluation, LatencySource, Status
from mutators.base import MutationContext
from mutators.factory import build_mutator
from mutators.llm.mutator import LLMMutator
from tests.fakes.openai_server import FakeOpenAI, Reply

# a fake evaluate on purpose: these tests are about the client, prompts and replies, not about
# kernels; no worker keeps them fast (the real latency model drives tests/test_mutators_improve.py)
from tests.fakes.standin import fake_evaluate

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "EVO_TEST_LLM_KEY"
KEY = "sk-test-0123456789-not-a-real-key"
GOOD = (ROOT / "tests" / "candidates" / "softmax" / "one_pass.py").read_text()
GOOD_REPLY = f"One block per row.\n```python\n{GOOD}```"
EDIT_REPLY = """Bigger blocks.
<<<<<<< SEARCH
PARAMS = {"BLOCK": 128, "num_warps": 4}
=======
PARAMS = {"BLOCK": 1024, "num_warps": 4}
>>>>>>> REPLACE
"""


@pytest.fixture(scope="module")
def task() -> NativeTask:
    return NativeTask(ROOT / "evo" / "tasks" / "softmax")


@pytest.fixture
def parent(task: NativeTask) -> Individual:
    seed = Candidate.from_source(task.seed_source or "")
    ev = fake_evaluate(task.key)(seed, "full").with_(
        speedups={"torch": 0.25}, latency_detail={"fraction_of_roofline": 0.031, "registers": 40})
    return Individual(Proposal(seed, "seed"), ev)


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def make(server: FakeOpenAI, tmp_path: Path, **kw) -> LLMMutator:
    base = {"model": "fake-model", "base_url": server.base_url, "api_key_env": KEY_ENV, "retries": 0,
            "timeout_s": 30.0, "backoff_s": 0.01}
    m = build_mutator(LLMConfig(**{**base, **kw}), run_dir=tmp_path, seed=0)
    assert isinstance(m, LLMMutator)
    return m


def ctx(task: NativeTask, **kw) -> MutationContext:
    return MutationContext(task=task, rng=random.Random(0), evaluate=fake_evaluate(task.key), **kw)


def test_a_good_rewrite_becomes_a_child_and_its_cost_is_counted(task, parent, tmp_path):
    with FakeOpenAI([Reply(GOOD_REPLY, prompt_tokens=2000, completion_tokens=500)]) as server:
        m = make(server, tmp_path, price_in_per_mtok=1.0, price_out_per_mtok=4.0)
        (p,) = m.propose(parent, ctx(task))
        request = server.received[0]
    assert p.candidate is not None and p.candidate.source == GOOD
    assert p.candidate.params == {"num_warps": 4}
    assert "module" in p.note and p.error == ""
    assert p.cost_usd == pytest.approx((2000 * 1.0 + 500 * 4.0) / 1e6)
    assert m.stats()["prompt_tokens"] == 2000 and m.stats()["spent_usd"] == pytest.approx(0.004)
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "fake-model" and request.body["max_tokens"] == 4096


def test_search_replace_edits_are_applied_to_the_parent(task, parent, tmp_path):
    with FakeOpenAI([Reply(EDIT_REPLY)]) as server:
        (p,) = make(server, tmp_path).propose(parent, ctx(task))
    assert p.candidate is not None
    assert p.candidate.params == {"BLOCK": 1024, "num_warps": 4}
    assert p.candidate.source == parent.candidate.source.replace(
        'PARAMS = {"BLOCK": 128,', 'PARAMS = {"BLOCK": 1024,')
    assert "1 edit" in p.note


def test_the_prompt_shows_reference_contract_fitness_failures_inspirations_and_hardware(task, parent, tmp_path):
    tuned = parent.candidate.with_params(BLOCK=256)
    failing = Candidate(parent.candidate.source.replace("tl.exp(", "tl.exp2("), dict(parent.candidate.params))
    failures = [
        Individual(Proposal(failing, "llm", (parent.candidate.id,)),
                   Evaluation(failing.id, task.key, "cpu", Status.WRONG_OUTPUT, reason="output 0 wrong at size {...}",
                              error=3.0, max_error_ratio=812.0, mismatch_fraction=0.93,
                              worst_case='size {"rows": 7}')),
        Individual(Proposal(failing, "llm", ()),
                   Evaluation("x", task.key, "cpu", Status.COMPILE_ERROR,
                              reason="CompilationError: at 12:8: unsupported tensor shape")),
    ]
    elite = Individual(Proposal(Candidate.from_source(GOOD), "seed"),
                       Evaluation("e", task.key, "cpu", Status.OK, error=0.0, latency_ms=0.5,
                                  latency_source=LatencySource.MODEL))
    shown = Individual(Proposal(tuned, "seed"), parent.evaluation)
    with FakeOpenAI([Reply(GOOD_REPLY)]) as server:
        make(server, tmp_path).propose(shown, ctx(task, recent_failures=failures, elites=[elite],
                                                  hardware="NVIDIA H100 SXM (model)"))
        system, user = (m["content"] for m in server.received[0].body["messages"])
    assert "launch(*inputs, *outputs, **params)" in system and "SEARCH" in system
    assert task.definition_text().strip()[:200] in user
    assert "NVIDIA H100 SXM (model)" in user
    assert "PARAMS = {'BLOCK': 256, 'num_warps': 4}" in user  # the params it actually runs with
    assert "latency:" in user and "speedup over torch: 0.25x" in user and "fraction_of_roofline: 0.031" in user
    assert 'worst case: size {"rows": 7}' in user and "max error / tolerance: 812" in user
    assert "unsupported tensor shape" in user
    assert "0.5 ms" in user and "one pass" in user.lower()


@pytest.mark.parametrize("reply, words", [
    ("```python\nimport triton\ndef launch(x, y:\n    pass\n```", "does not parse"),
    ("I think the kernel is already optimal.", "neither a ```python module nor SEARCH/REPLACE"),
    ("```python\nx = 1\n```", "not a whole module"),
    ("<<<<<<< SEARCH\nthis line is not in the kernel\n=======\nfoo\n>>>>>>> REPLACE\n", "does not match"),
    ("<<<<<<< SEARCH\n        offs = start + tl.arange(0, BLOCK)\n=======\nfoo\n>>>>>>> REPLACE\n", "matches 3 places"),
    ("```python\n{source}```", "repeats the current kernel"),
])
def test_a_reply_that_cannot_be_applied_is_a_failed_proposal_with_its_reason(task, parent, tmp_path, reply, words):
    reply = reply.replace("{source}", parent.candidate.source)
    with FakeOpenAI([Reply(reply), Reply(GOOD_REPLY)]) as server:
        m = make(server, tmp_path)
        (p,) = m.propose(parent, ctx(task))
        assert p.candidate is None and words in p.error
        m.propose(parent, ctx(task))  # the next prompt tells the model what went wrong
        assert words in server.received[1].body["messages"][1]["content"]
    assert m.stats()["unusable_replies"] == 1


def test_a_slow_reply_times_out_and_is_retried_then_reported(task, parent, tmp_path):
    with FakeOpenAI([Reply(GOOD_REPLY, delay_s=3.0), Reply(GOOD_REPLY, delay_s=3.0)]) as server:
        m = make(server, tmp_path, timeout_s=0.5, retries=1)
        (p,) = m.propose(parent, ctx(task))
        assert len(server.received) == 2
    assert p.candidate is None and "after 2 attempts" in p.error and "Timeout" in p.error
    assert m.stats()["retried"] == 1 and m.stats()["failed"] == 1


def test_a_rate_limit_is_retried_after_the_servers_delay(task, parent, tmp_path):
    waits: list[float] = []
    with FakeOpenAI([Reply("slow down", status=429, retry_after_s=0.2), Reply(GOOD_REPLY)]) as server:
        m = make(server, tmp_path, retries=2)
        m.client._sleep = waits.append  # record the backoff instead of sleeping
        (p,) = m.propose(parent, ctx(task))
    assert p.candidate is not None
    assert waits == [pytest.approx(0.2)]  # Retry-After (0.2 s) is longer than the first backoff (0.01 s)
    assert m.stats()["retried"] == 1 and m.stats()["requests"] == 1


def test_a_refused_request_is_not_retried(task, parent, tmp_path):
    with FakeOpenAI([Reply("bad model", status=404), Reply(GOOD_REPLY)]) as server:
        m = make(server, tmp_path, retries=3)
        (p,) = m.propose(parent, ctx(task))
        assert len(server.received) == 1
    assert p.candidate is None and "HTTP 404" in p.error


def test_an_endpoint_that_is_down_pauses_the_mutator_then_it_comes_back(task, parent, tmp_path):
    down = [Reply("unavailable", status=503) for _ in range(3)]
    with FakeOpenAI([*down, Reply(GOOD_REPLY)]) as server:
        m = make(server, tmp_path, pause_after_failures=3, pause_s=30.0)
        now = [1000.0]
        m.client._clock = lambda: now[0]
        errors = [m.propose(parent, ctx(task))[0].error for _ in range(3)]
        assert all(server.base_url in e and "fake-model" in e for e in errors), errors  # names the endpoint
        assert "pause for 30 s" in errors[2] and "pause" not in errors[0]
        assert m.exhausted()  # the island leaves it out while paused: no request, no retries
        assert m.propose(parent, ctx(task)) == [] and len(server.received) == 3
        now[0] += 31.0
        assert not m.exhausted()
        (p,) = m.propose(parent, ctx(task))
        assert p.candidate is not None and len(server.received) == 4
    assert m.stats()["failed"] == 3 and m.stats()["pauses"] == 1 and m.stats()["request_errors"] == 3


def test_the_prompt_holds_nothing_the_evaluator_measured_about_itself(parent):
    from mutators.llm.prompt import fitness_lines

    timed = parent.evaluation.with_(latency_detail={**parent.evaluation.latency_detail, "model_s": 1.234,
                                                    "full_run_estimate_s": 88.0, "sample_seed": "9405021867"})
    lines = "\n".join(fitness_lines(timed))
    assert "registers: 40" in lines and "model_s" not in lines and "full_run" not in lines
    assert "sample_seed" not in lines and "9405021867" not in lines  # drawn per run: a replay could not match


def test_the_budget_stops_llm_proposals_once_spent(task, parent, tmp_path):
    with FakeOpenAI([Reply(GOOD_REPLY, prompt_tokens=1000, completion_tokens=1000)] * 3) as server:
        m = make(server, tmp_path, price_in_per_mtok=3.0, price_out_per_mtok=15.0, budget_usd=0.01)
        assert not m.exhausted()
        (p,) = m.propose(parent, ctx(task))  # $0.018: over the budget after this one
        assert p.candidate is not None and m.exhausted()
        assert m.propose(parent, ctx(task)) == []
        assert len(server.received) == 1


def test_concurrent_samples_are_capped_by_the_semaphore(task, parent, tmp_path):
    with FakeOpenAI([Reply(GOOD_REPLY, delay_s=0.3)] * 4) as server:
        m = make(server, tmp_path, samples_per_proposal=4, max_concurrent=2)
        props = m.propose(parent, ctx(task))
    assert len(props) == 4 and all(p.candidate is not None for p in props)
    assert m.client._slots._value == 2  # every slot given back


def test_a_missing_key_is_a_clear_error_when_the_mutator_is_built(task, parent, tmp_path, monkeypatch):
    with FakeOpenAI([Reply(GOOD_REPLY)]) as server:
        m = make(server, tmp_path)
        monkeypatch.delenv(KEY_ENV)
        with pytest.raises(ValueError, match=f"environment variable {KEY_ENV} is not set"):
            make(server, tmp_path)
        (p,) = m.propose(parent, ctx(task))  # unset after building: the first request says so
        assert server.received == []
    assert p.candidate is None and f"environment variable {KEY_ENV} is not set" in p.error


def test_record_then_replay_reruns_exactly_without_a_network(task, parent, tmp_path):
    record = tmp_path / "rec.jsonl"
    script = [Reply(EDIT_REPLY, prompt_tokens=10, completion_tokens=20), Reply("garbage"),
              Reply("no such model", status=404), Reply(GOOD_REPLY)]
    with FakeOpenAI(script) as server:
        live = make(server, tmp_path, mode="record", record_path=str(record), price_in_per_mtok=1.0,
                    samples_per_proposal=1)
        first = [live.propose(parent, ctx(task)) for _ in range(4)]
        url = server.base_url
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    assert len(lines) == 4 and lines[0]["request"]["messages"][1]["role"] == "user" and lines[1]["reply"] == "garbage"
    assert "HTTP 404" in lines[2]["error"]  # a request without a reply is recorded too
    assert KEY not in "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    # Replay: the server is gone; identical prompts are answered from the record.
    replay = build_mutator(LLMConfig(model="fake-model", base_url=url, api_key_env="UNSET_VARIABLE_FOR_TEST",
                                     mode="replay", record_path=str(record), price_in_per_mtok=1.0),
                           run_dir=tmp_path, seed=0)
    again = [replay.propose(parent, ctx(task)) for _ in range(4)]
    key = [[(p.candidate.id if p.candidate else None, p.error, p.cost_usd) for p in ps] for ps in first]
    assert key == [[(p.candidate.id if p.candidate else None, p.error, p.cost_usd) for p in ps] for ps in again]
    assert replay.stats()["spent_usd"] == live.stats()["spent_usd"]
    (miss,) = replay.propose(Individual(Proposal(parent.candidate.with_params(BLOCK=512), "seed"), parent.evaluation),
                             ctx(task))
    assert miss.candidate is None and "no recorded reply" in miss.error
    assert replay.stats()["replay_misses"] == 1  # counted, so a report can show that replay was not exact


def test_replay_without_a_record_file_is_a_config_error(tmp_path):
    with pytest.raises(ValueError, match="record file not found"):
        build_mutator(LLMConfig(mode="replay", record_path=str(tmp_path / "none.jsonl")), run_dir=tmp_path, seed=0)


def test_observed_failures_feed_the_next_prompt(task, parent, tmp_path):
    with FakeOpenAI([Reply(GOOD_REPLY), Reply(GOOD_REPLY)]) as server:
        m = make(server, tmp_path)
        (p,) = m.propose(parent, ctx(task))
        assert p.candidate is not None
        m.observe(p, Evaluation(p.candidate.id, task.key, "cpu", Status.UNSAFE, error=math.inf,
                                reason="out-of-bounds store: the guard zone around output 0 changed"))
        m.propose(parent, ctx(task))
        assert "guard zone around output 0 changed" in server.received[1].body["messages"][1]["content"]
    assert m.stats()["observed_failed"] == 1
