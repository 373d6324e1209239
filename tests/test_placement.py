"""Waiting for the evaluators Ray can place (`evo.app.run.placement`), on a clock of the test's own: the
campaign begins once those that fit have started, says within seconds what the others wait for, and
fails with the same words when none starts."""

from __future__ import annotations

from typing import Any

import pytest

from evo.app.run.placement import FIRST_REPORT_S, GRACE_S, REPORT_EVERY_S, placement_text, wait_for_evaluators
from islands.evaluator_actor import EvaluatorInfo


def info(i: int) -> EvaluatorInfo:
    return EvaluatorInfo(f"evaluator-{i}", 100 + i, "node-a", "cpu", None, (), "task")


class Cluster:
    """A broker's `wait_started` as seen from the driver: evaluators start at the given times."""

    def __init__(self, starts: list[float], asked: int, fits: int) -> None:
        self.starts, self.asked, self.fits = sorted(starts), asked, fits
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def started(self) -> list[EvaluatorInfo]:
        return [info(i) for i, t in enumerate(self.starts) if t <= self.now]

    def placement(self) -> dict[str, Any]:
        return {"waiting": self.asked - len(self.started()), "started": len(self.started()),
                "each_needs": {"CPU": 1.0, "GPU": 1.0}, "free": {"CPU": 0.0, "GPU": 1.0},
                "nodes": [{"node": "aaaaaaaa", "address": "10.0.0.1", "fits": self.fits, "CPU": 1.0, "GPU": 2.0}]}

    def wait(self, timeout_s: float, known: int) -> tuple[list[EvaluatorInfo], dict[str, Any]]:
        later = [t for t in self.starts if t > self.now]
        if len(self.started()) <= known and len(self.started()) < self.asked:
            self.now = min([self.now + timeout_s, *later[:1]])
        return self.started(), self.placement()


def run(cluster: Cluster, timeout_s: float = 600.0) -> tuple[list[EvaluatorInfo], list[tuple[float, str]]]:
    said: list[tuple[float, str]] = []
    infos, _ = wait_for_evaluators(cluster.wait, timeout_s, lambda m: said.append((cluster.now, m)), cluster.clock)
    return infos, said


def test_every_evaluator_placed_begins_the_campaign_when_the_last_starts_and_says_nothing():
    cluster = Cluster([2.0, 3.5], asked=2, fits=2)
    infos, said = run(cluster)
    assert len(infos) == 2 and cluster.now == 3.5 and said == []


def test_what_cannot_be_placed_is_said_within_seconds_and_the_campaign_begins_with_the_rest():
    cluster = Cluster([12.0], asked=2, fits=1)  # one evaluator is slow to start; the other has no room
    infos, said = run(cluster)
    assert len(infos) == 1 and cluster.now == 12.0
    assert said[0][0] == FIRST_REPORT_S and "waiting for evaluators" in said[0][1]
    assert said[-1][1].startswith("beginning with 1 evaluator(s); 1 evaluator(s) not started yet: each needs "
                                  "1 CPU, 1 GPU; free now: 0 CPU, 1 GPU")
    assert "10.0.0.1 (aaaaaaaa): 1 CPU, 2 GPU, room for 1" in said[-1][1]


def test_one_that_fits_but_never_starts_holds_the_campaign_only_for_the_grace_period():
    cluster = Cluster([1.0], asked=2, fits=2)  # room for both by the nodes' totals, but only one starts
    infos, said = run(cluster)
    assert len(infos) == 1 and cluster.now == pytest.approx(1.0 + GRACE_S, abs=REPORT_EVERY_S)
    assert cluster.now >= 1.0 + GRACE_S and said[-1][1].startswith("beginning with 1 evaluator(s)")


def test_none_started_is_an_error_that_says_what_they_wait_for_after_reports_every_half_minute():
    cluster = Cluster([], asked=2, fits=0)
    with pytest.raises(TimeoutError) as e:
        run(cluster, timeout_s=100.0)
    assert "no evaluator started within 100 s: 2 evaluator(s) not started yet" in str(e.value)
    said: list[float] = []
    cluster = Cluster([], asked=2, fits=0)
    with pytest.raises(TimeoutError):
        wait_for_evaluators(cluster.wait, 100.0, lambda m: said.append(cluster.now), cluster.clock)
    assert said == [FIRST_REPORT_S + k * REPORT_EVERY_S for k in range(4)]  # 5, 35, 65, 95 s; then 100 s: the error


def test_the_words_name_each_node():
    text = placement_text(Cluster([], asked=1, fits=0).placement())
    assert text == ("1 evaluator(s) not started yet: each needs 1 CPU, 1 GPU; free now: 0 CPU, 1 GPU; nodes in all: "
                    "10.0.0.1 (aaaaaaaa): 1 CPU, 2 GPU, room for 0")


def broken(task: Any, settings: Any, device: str) -> Any:
    raise RuntimeError("this evaluator cannot be built here")


def test_an_evaluator_that_cannot_start_is_an_error_naming_why_before_the_campaign_begins(tmp_path):
    from evo.contracts.config import EvaluationConfig, TaskConfig
    from evo.contracts.native_task import TASK_LIBRARY
    from evo.contracts.task_files import TaskFiles
    from islands.actors import start_broker
    from islands.broker import BrokerSpec
    from islands.evaluator_actor import EvaluatorSpec
    from islands.local_runtime import LocalRuntime

    task_files = TaskFiles.collect(TaskConfig(name="softmax"), TASK_LIBRARY)
    spec = BrokerSpec(EvaluatorSpec(task_files, EvaluationConfig(device="cpu"), broken), 2, 0.0, 0.0,
                      task_files.build().key, str(tmp_path / "history.msgpack"), actor_timeout_s=60)
    rt = LocalRuntime()
    broker = start_broker(spec, rt)
    try:
        rt.get(broker.start.remote(), timeout=60)
        with pytest.raises(Exception, match=r"BrokerError: evaluator-. failed to start: .*cannot be built here"):
            for _ in range(10):
                rt.get(broker.wait_started.remote(30.0), timeout=60)
    finally:
        rt.get(broker.shutdown.remote(), timeout=60)
