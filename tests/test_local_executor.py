"""`evo run --executor local`: the campaign without Ray, islands and the broker as threads of the
driver and each evaluator's candidates in its own worker subprocess; the same run directory, resume,
and treatment of hung evaluators as on Ray."""

from __future__ import annotations

import asyncio
import io
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from evo.app.run import campaign as campaign_module
from evo.app.run.campaign import Campaign
from evo.app.run.progress import PlainLog
from evo.app.run.setup import CampaignHooks, prepare
from evo.contracts.candidate import Candidate
from evo.contracts.verdict import Evaluation
from islands.local_runtime import LocalRuntime

from .campaign_job import FAKE_HOOKS
from .conftest import ROOT
from .islands_fakes import FakeLatencyEvaluator, fault_evaluator_factory, fault_mutator_factory
from .test_campaign_ray import (
    advance_until_the_faults,
    assert_nothing_evaluated_twice,
    events,
    fake_latency_ms_of_faster,
    history,
    write_config,
)


class Counter:
    def __init__(self, start: int) -> None:
        self.n = start
        self.threads: set[str] = set()

    def add(self, k: int) -> int:
        self.threads.add(threading.current_thread().name)
        time.sleep(0.01)
        self.n += k
        return self.n

    def seen_threads(self) -> set[str]:
        return set(self.threads)

    def boom(self) -> None:
        raise ValueError("boom")

    def hang(self) -> None:
        time.sleep(3600)


class Relay:
    """An async actor (like the broker) awaiting another actor's calls."""

    def __init__(self, other: object) -> None:
        self.other = other

    async def twice(self, k: int) -> list[int]:
        return [await self.other.add.remote(k), await self.other.add.remote(k)]  # type: ignore[attr-defined]

    async def within(self, seconds: float) -> str:
        try:
            await asyncio.wait_for(_await(self.other.hang.remote()), seconds)  # type: ignore[attr-defined]
        except asyncio.TimeoutError:
            return "timed out"
        return "answered"


async def _await(ref: object) -> object:
    return await ref  # type: ignore[misc]


def test_local_actors_run_calls_in_order_on_their_own_thread_and_tell_failures_apart():
    rt = LocalRuntime()
    counter = rt.actor(Counter, 10, name="counter")
    refs = [counter.add.remote(k) for k in range(1, 6)]
    assert rt.get(refs) == [11, 13, 16, 20, 25]  # in call order
    [thread] = rt.get(counter.seen_threads.remote())
    assert thread.startswith("counter") and thread != threading.current_thread().name
    relay = rt.actor(Relay, counter)
    assert rt.get(relay.twice.remote(5)) == [30, 35]
    with pytest.raises(Exception) as raised:
        rt.get(counter.boom.remote())
    assert rt.failed(raised.value) and not rt.died(raised.value) and "ValueError: boom" in str(raised.value)
    assert rt.get(relay.within.remote(0.2)) == "timed out"
    hung = counter.hang.remote()
    with pytest.raises(Exception) as waited:
        rt.get(hung, timeout=0.2)
    assert rt.timed_out(waited.value)
    rt.kill(counter)  # its thread is stuck in hang(): the pending call and every later one fail as died
    for ref in (hung, counter.add.remote(1)):
        with pytest.raises(Exception) as dead:
            rt.get(ref, timeout=5)
        assert rt.died(dead.value)
    broken = rt.actor(Relay)  # its constructor raises (an argument missing): each call says so
    with pytest.raises(Exception) as bad:
        rt.get(broken.twice.remote(1))
    assert rt.died(bad.value) and "could not be created" in str(bad.value)


def local_campaign(config: Path, hooks: CampaignHooks, resume: Path | None = None) -> tuple[Campaign, io.StringIO]:
    out = io.StringIO()
    prepared = prepare(str(config), resume=str(resume) if resume else None, hooks=hooks)
    return Campaign(prepared, hooks, PlainLog(out), "local"), out


def test_a_local_campaign_resumes_like_a_ray_one(tmp_path):
    config = write_config(tmp_path, budget={"generations": 1})
    c, out = local_campaign(config, FAKE_HOOKS)
    first = c.run()
    assert first["status"] == "finished" and "local executor" in out.getvalue()
    assert first["evaluators"] and all(e["node_id"] == "local" for e in first["evaluators"])
    run_dir = Path(first["run_dir"])
    raised = write_config(tmp_path, budget={"generations": 3})
    resumed = local_campaign(raised, FAKE_HOOKS, resume=run_dir)[0].run()
    assert resumed["status"] == "finished" and resumed["generation"] == 3
    assert resumed["best"]["latency_ms"] == pytest.approx(fake_latency_ms_of_faster())
    assert_nothing_evaluated_twice(history(run_dir))
    assert [e["kind"] for e in events(run_dir, "resume")] == ["resume"]


def test_hung_and_crashing_kernels_and_a_hung_evaluator_get_the_same_verdicts_as_on_ray(tmp_path):
    config = write_config(tmp_path, evaluation={"device": "cpu", "timeout_s": 6},
                          evaluators={"count": 2, "actor_timeout_s": 20},
                          islands={"count": 1, "population": 2, "offspring": 1}, budget={"generations": 3})
    hooks = CampaignHooks(mutator_factory=fault_mutator_factory, evaluator_factory=fault_evaluator_factory)
    c, out = local_campaign(config, hooks)
    c.start()
    c.advance()
    _, by_note = advance_until_the_faults(c)
    assert by_note["hang"]["status"] == "timeout", by_note["hang"]
    assert by_note["segfault"]["status"] == "unsafe", by_note["segfault"]
    assert by_note["actor-hang"]["status"] == "timeout" and "did not answer" in by_note["actor-hang"]["reason"]
    assert len(by_note["actor-hang"]["incidents"]) == 2, by_note["actor-hang"]
    assert by_note["faster"]["status"] == "ok", by_note["faster"]
    # the hung evaluator was replaced twice (a machine loaded enough to slow the hung kernel past the
    # evaluators' timeout may replace more, on the hung kernel's account: its verdict is still a timeout)
    replaced = events(c.store.path, "evaluator_replaced")
    assert sum(by_note["actor-hang"]["candidate_id"] in e["why"] for e in replaced) == 2, replaced
    assert "replaced by" in out.getvalue()


def test_evo_run_works_where_ray_is_not_installed(tmp_path):
    """The CLI with `import ray` made to fail: it chooses the local executor by itself and runs a real
    campaign (real evaluators in sandboxed workers) to its budget."""
    cfg = {"name": "noray", "seed": 1,
           "task": {"name": "softmax", "sizes": {"check": [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 131}],
                                                 "bench": [{"rows": 64, "cols": 1024}]}},
           "evaluation": {"device": "cpu", "timeout_s": 60}, "evaluators": {"count": 1},
           "islands": {"count": 1, "population": 2, "offspring": 1}, "mutators": [{"kind": "optuna"}],
           "budget": {"generations": 1}, "output_dir": str(tmp_path / "runs")}
    path = tmp_path / "noray.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code = ("import sys; sys.modules['ray'] = None\n"  # `import ray` now raises ImportError
            "from evo.app.cli import main\n"
            f"rc = main(['run', {str(path)!r}])\n"
            "assert 'ray' not in sys.modules or sys.modules['ray'] is None\n"
            "sys.exit(rc)\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "CPU evaluator(s) (local executor" in done.stdout + done.stderr
    assert '"status": "finished"' in done.stdout


class SlowEvaluator(FakeLatencyEvaluator):
    """Every evaluation takes a little longer; a full one says, as the latency model does, how long a
    full run at the bench size would take (20.5 min)."""

    def evaluate(self, candidate: Candidate, *, level: str = "full") -> Evaluation:
        time.sleep(1.2)
        evaluation = super().evaluate(candidate, level=level)
        if level == "full" and evaluation.ok:
            evaluation = evaluation.with_(latency_detail={"verification": {"full_run_estimate_s": 1230.0}})
        return evaluation


def test_a_generation_without_news_says_which_candidate_is_in_evaluation_and_for_how_long(tmp_path, monkeypatch):
    """A full run at the bench size in the interpreter can take many minutes on a CPU: the campaign says
    what it is waiting for instead of going quiet."""
    monkeypatch.setattr(campaign_module, "HEARTBEAT_S", 0.3)
    config = write_config(tmp_path, islands={"count": 1, "population": 2, "offspring": 2},
                          evaluators={"count": 1}, budget={"generations": 2})
    hooks = CampaignHooks(mutator_factory=FAKE_HOOKS.mutator_factory,
                          evaluator_factory=lambda task, settings, device: SlowEvaluator(task, settings, device))
    c, out = local_campaign(config, hooks)
    assert c.run()["status"] == "finished"
    beats = [line for line in out.getvalue().splitlines() if "in progress for" in line]
    assert beats, out.getvalue()
    assert any(re.search(r"generation [01] in progress for \d+ s \(island 0\): 1 candidate in evaluation; the "
                         r"longest, [0-9a-f]{16}, in (a quick check|its check and latency|a full run at the bench "
                         r"size .*), for \d+ s", line) for line in beats), beats
    # a new best verified in full: the wait is put beside the model's estimate of it
    verifying = [line for line in beats if "in a full run at the bench size" in line]
    assert verifying and all("(the latency model estimated about 20.5 min of CPU for it)" in line
                             for line in verifying), beats
