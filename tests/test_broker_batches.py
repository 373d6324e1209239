"""The broker hands an evaluator several waiting candidates in one call when more wait than there are
evaluators (`islands.broker`, `MAX_BATCH`): each gets its own verdict, once; a batch whose evaluator
hangs or dies costs no candidate its verdict (each runs again alone; only the one that hangs again is a
`timeout`). Local executor, fake evaluators that answer at once."""

from __future__ import annotations

import time
from pathlib import Path

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, TaskConfig
from evo.contracts.native_task import TASK_LIBRARY
from evo.contracts.records import Proposal
from evo.contracts.task import Task
from evo.contracts.task_files import TaskFiles
from evo.contracts.verdict import Evaluation, Status
from islands.actors import start_broker
from islands.broker import MAX_BATCH, BrokerSpec
from islands.evaluation import EvaluationStats
from islands.evaluator_actor import EvaluatorSpec
from islands.local_runtime import LocalRuntime


class Instant:
    """Answers at once with the candidate's own id; sleeps far past the broker's patience on a candidate
    whose source says HANG."""

    def __init__(self, task: Task, settings: EvaluationConfig, device: str) -> None:
        self.task_key, self.device = task.key, device

    def evaluate(self, candidate: Candidate, *, level: str = "full") -> Evaluation:
        if "HANG" in candidate.source:
            time.sleep(6.0)
        return Evaluation(candidate.id, self.task_key, self.device, Status.OK, level=level, reason="fake: ok",
                          error=0.0, latency_ms=1.0)

    def close(self) -> None:
        pass


def instant(task: Task, settings: EvaluationConfig, device: str) -> Instant:
    return Instant(task, settings, device)


def proposals(n: int, hang: int | None = None) -> list[Proposal]:
    seed = (TASK_LIBRARY / "softmax" / "seed.py").read_text()
    return [Proposal(Candidate(f"{seed}\n# {i}{' HANG' if i == hang else ''}\n", {}), "test") for i in range(n)]


def ids(props: list[Proposal]) -> list[str]:
    return [p.candidate.id for p in props if p.candidate is not None]


def run(tmp_path: Path, props: list[Proposal], evaluators: int,
        actor_timeout_s: float = 60.0) -> tuple[list[Evaluation], EvaluationStats]:
    task_files = TaskFiles.collect(TaskConfig(name="softmax"), TASK_LIBRARY)
    spec = BrokerSpec(EvaluatorSpec(task_files, EvaluationConfig(device="cpu"), instant), evaluators, 0.0, 0.0,
                      task_files.build().key, str(tmp_path / "history.msgpack"), actor_timeout_s=actor_timeout_s)
    rt = LocalRuntime()
    broker = start_broker(spec, rt)
    try:
        rt.get(broker.start.remote(), timeout=120)
        infos, _ = rt.get(broker.wait_started.remote(120.0), timeout=180)
        while len(infos) < evaluators:
            infos, _ = rt.get(broker.wait_started.remote(120.0, len(infos)), timeout=180)
        rt.get(broker.begin.remote(), timeout=60)
        answers = rt.get(broker.evaluate_many.remote(props, "full"), timeout=300)
        stats = rt.get(broker.get_stats.remote())
    finally:
        rt.get(broker.shutdown.remote(), timeout=60)
    return [a.individual.evaluation for a in answers], stats


def test_waiting_candidates_ride_along_and_each_gets_its_own_verdict(tmp_path):
    props = proposals(40)
    verdicts, stats = run(tmp_path, props, evaluators=2)
    assert [v.candidate_id for v in verdicts] == ids(props)
    assert all(v.ok and not v.incidents for v in verdicts)
    assert stats.evaluations == 40 and stats.batched > 0
    assert sum(t.evaluations for t in stats.tallies.values()) == 40
    # fewer evaluator calls than candidates, none larger than MAX_BATCH
    assert stats.batched <= 40 - 40 // MAX_BATCH


def test_a_batch_that_hangs_costs_no_other_candidate_its_verdict(tmp_path):
    props = proposals(12, hang=5)
    verdicts, stats = run(tmp_path, props, evaluators=1, actor_timeout_s=1.0)
    assert [v.candidate_id for v in verdicts] == ids(props)
    hung = verdicts[5]
    assert hung.status is Status.TIMEOUT, hung.reason
    assert all(v.ok for i, v in enumerate(verdicts) if i != 5), [(v.status, v.reason) for v in verdicts]
    assert stats.evaluations == 12 and stats.replaced >= 2
    assert any("batch" in i for v in verdicts for i in v.incidents)  # it hung in a batch first


def test_the_figures_the_broker_gives_are_of_one_moment_and_stay_so(tmp_path):
    # the local executor's caller shares the broker's process: what it holds must not change under it
    task_files = TaskFiles.collect(TaskConfig(name="softmax"), TASK_LIBRARY)
    spec = BrokerSpec(EvaluatorSpec(task_files, EvaluationConfig(device="cpu"), instant), 1, 0.0, 0.0,
                      task_files.build().key, str(tmp_path / "history.msgpack"), actor_timeout_s=60.0)
    rt = LocalRuntime()
    broker = start_broker(spec, rt)
    props = proposals(6)
    try:
        rt.get(broker.start.remote(), timeout=120)
        rt.get(broker.wait_started.remote(120.0), timeout=180)
        rt.get(broker.begin.remote(), timeout=60)
        rt.get(broker.evaluate_many.remote(props[:2], "full"), timeout=300)
        first = rt.get(broker.get_stats.remote())
        rt.get(broker.evaluate_many.remote(props[2:], "full"), timeout=300)
        later = rt.get(broker.get_stats.remote())
    finally:
        rt.get(broker.shutdown.remote(), timeout=60)
    assert (first.evaluations, dict(first.fresh)) == (2, {"full": 2})
    assert sum(t.evaluations for t in first.tallies.values()) == 2
    assert later.evaluations == 6 and sum(t.evaluations for t in later.tallies.values()) == 6
