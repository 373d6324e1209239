"""The evaluation broker: one async actor (on Ray, or a thread with an event loop in the local
executor) between the islands and the evaluator actors.

Its `islands.evaluation.EvaluationLedger` (the shared cache and the history) makes a kernel found
by two islands, or proposed again after a resume, evaluated once, even while the first evaluation
is in flight. The broker hands work to idle evaluator actors (one per GPU on a cluster,
`num_gpus=1`, so timings never share a GPU), replaces an evaluator actor that dies (and retries its
candidate on the replacement) or stops answering (a `timeout` verdict). It runs on the driver's
node, where the run directory is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.history import MsgpackLog
from evo.contracts.records import Proposal
from evo.contracts.verdict import Evaluation, Status
from islands.evaluation import Answer, EvaluationLedger, EvaluationStats, Run
from islands.evaluator_actor import EvaluatorActor, EvaluatorInfo, EvaluatorSpec
from islands.runtime import Runtime


class BrokerError(RuntimeError):
    """Evaluation cannot go on (no evaluator could be started, evaluators disagree on the task)."""


@dataclass(frozen=True)
class BrokerSpec:
    evaluator: EvaluatorSpec
    count: int
    num_cpus: float
    num_gpus: float
    task_key: str
    history_path: str
    actor_timeout_s: float  # an evaluator that does not answer within this is killed and replaced
    start_timeout_s: float = 600.0


class EvaluationBroker:
    """See the module docstring. Created by `islands.actors.start_broker`; call `start()` first."""

    def __init__(self, spec: BrokerSpec, runtime: Runtime) -> None:
        self.spec, self.rt = spec, runtime
        self.ledger = EvaluationLedger(spec.task_key, history=MsgpackLog(Path(spec.history_path)))
        self.stats = self.ledger.stats
        self.idle: asyncio.Queue[tuple[Any, EvaluatorInfo]] = asyncio.Queue()
        self.events: list[dict[str, Any]] = []
        self._spawned = 0
        self.actors: dict[str, Any] = {}  # every live evaluator actor, idle or busy

    @property
    def device(self) -> str:
        return self.ledger.device

    async def _spawn(self) -> tuple[Any, EvaluatorInfo]:
        name = f"evaluator-{self._spawned}"
        self._spawned += 1
        actor = self.rt.actor(EvaluatorActor, self.spec.evaluator, name, name=name, num_cpus=self.spec.num_cpus,
                              num_gpus=self.spec.num_gpus)
        self.actors[name] = actor
        try:
            info: EvaluatorInfo = await asyncio.wait_for(_awaitable(actor.info.remote()), self.spec.start_timeout_s)
        except Exception as e:
            if self.rt.timed_out(e):
                self.rt.kill(actor)
                raise BrokerError(f"{name} did not start within {self.spec.start_timeout_s:.0f} s "
                                  f"(resources free: {self.rt.resources()})") from None
            if self.rt.died(e) or self.rt.failed(e):
                raise BrokerError(f"{name} failed to start: {e}") from None
            raise
        if info.task_key != self.spec.task_key:
            raise BrokerError(f"{name} on node {info.node_id[:8]} built task {info.task_key}, the driver "
                              f"{self.spec.task_key}: the task files differ between nodes")
        if self.device and info.device != self.device:
            raise BrokerError(f"{name} evaluates on {info.device}, the others on {self.device}")
        self.ledger.device = info.device
        return actor, info

    async def start(self) -> list[EvaluatorInfo]:
        """Start the evaluator actors; returns where each one was placed."""
        started = await asyncio.gather(*(self._spawn() for _ in range(self.spec.count)))
        for actor, info in started:
            self.idle.put_nowait((actor, info))
            self.stats.evaluators.append(info)
        return [info for _, info in started]

    async def evaluate_many(self, proposals: Sequence[Proposal], level: str) -> list[Answer]:
        return list(await asyncio.gather(*(self.ledger.evaluate_async(p, level, self._run) for p in proposals)))

    def _failed(self, c: Candidate, level: str, status: Status, reason: str) -> Evaluation:
        """The verdict for a candidate whose evaluation never came back (actor died or hung)."""
        return Evaluation(c.id, self.spec.task_key, self.device, status, reason=reason, level=level)

    async def _run(self, c: Candidate, level: str) -> Run:
        """Evaluate `c` on an idle evaluator. An evaluator that dies (a lost node, a kill) is replaced
        and the evaluation runs on another one; one that hangs is killed, replaced and given one more
        try. Only a hang that reproduces is the candidate's `timeout`; each incident is listed in the
        verdict (`Evaluation.incidents`), so the ledger never caches an infrastructure failure as the
        candidate's status."""
        deaths_allowed = self.spec.count + 1  # an actor found dead may have died before this request
        incidents: list[str] = []
        hangs = 0
        while True:
            actor, info = await self.idle.get()
            start = time.monotonic()
            try:
                evaluation, seconds = await asyncio.wait_for(_awaitable(actor.evaluate.remote(c, level)),
                                                             self.spec.actor_timeout_s)
            except Exception as e:
                if not (self.rt.timed_out(e) or self.rt.died(e) or self.rt.failed(e)):
                    raise
                failure = e
            else:
                self.idle.put_nowait((actor, info))
                if incidents:
                    evaluation = evaluation.with_(incidents=[*incidents, *evaluation.incidents])
                return evaluation, seconds, info.name
            if self.rt.timed_out(failure):
                self.rt.kill(actor)
                await self._replace(info, f"no answer within {self.spec.actor_timeout_s:.0f} s on {c.id}")
                hangs += 1
                incidents.append(f"evaluator {info.name} did not answer within {self.spec.actor_timeout_s:.0f} s "
                                 "(killed and replaced)")
                if hangs < 2:
                    continue
                reason = (f"the evaluator did not answer within {self.spec.actor_timeout_s:.0f} s, twice, on "
                          "fresh evaluators (each was killed and replaced)")
                return (self._failed(c, level, Status.TIMEOUT, reason).with_(incidents=incidents),
                        time.monotonic() - start, info.name)
            if self.rt.died(failure):
                await self._replace(info, f"died while evaluating {c.id}")
                incidents.append(f"evaluator {info.name} died during the evaluation (replaced)")
                if len(incidents) - hangs < deaths_allowed:
                    continue
                reason = f"evaluator actors died {deaths_allowed} times in a row on this candidate (each was replaced)"
                return self._failed(c, level, Status.CRASH, reason).with_(incidents=incidents), 0.0, ""
            # the evaluator raised: a bug, not the candidate's verdict
            self.idle.put_nowait((actor, info))
            reason = f"the evaluator raised {str(failure).strip().splitlines()[-1]}"
            return self._failed(c, level, Status.CRASH, reason), 0.0, info.name

    async def _replace(self, dead: EvaluatorInfo, why: str) -> None:
        self.actors.pop(dead.name, None)
        self.stats.replaced += 1
        self.stats.evaluators = [e for e in self.stats.evaluators if e.name != dead.name]
        actor, info = await self._spawn()
        self.stats.evaluators.append(info)
        self.events.append({"kind": "evaluator_replaced", "dead": dead.name, "pid": dead.pid, "why": why,
                            "replacement": info.name, "time": time.time()})
        self.idle.put_nowait((actor, info))

    async def get_stats(self) -> EvaluationStats:
        return self.stats

    async def drain_events(self) -> list[dict[str, Any]]:
        out, self.events = self.events, []
        return out

    async def get_device(self) -> str:
        return self.device

    async def shutdown(self) -> None:
        """Close the evaluators' workers and end the evaluator actors."""
        actors = list(self.actors.values())
        self.actors.clear()
        await asyncio.gather(*(self._close(a) for a in actors))

    async def _close(self, actor: Any) -> None:
        try:
            await asyncio.wait_for(_awaitable(actor.close.remote()), 30)
        except Exception:
            pass  # it is killed next either way
        self.rt.kill(actor)


async def _awaitable(ref: Any) -> Any:
    """`await ref` for a Ray ObjectRef or a local reference, as one coroutine (for `asyncio.wait_for`)."""
    return await ref
