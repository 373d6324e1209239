"""The evaluation broker: one async actor (on Ray, or a thread with an event loop in the local
executor) between the islands and the evaluator actors.

Its `islands.evaluation.EvaluationLedger` (the shared cache and the history) makes a kernel found
by two islands, or proposed again after a resume, evaluated once, even while the first evaluation
is in flight. The broker hands work to idle evaluator actors (one per GPU on a cluster,
`num_gpus=1`, so timings never share a GPU), replaces an evaluator actor that dies (and retries its
candidate on the replacement) or stops answering (a `timeout` verdict). It runs on the driver's
node, where the run directory is.

Compile ahead (`BrokerSpec.compile_ahead` preparers per evaluator node, `fitness.prepare`): a
candidate first goes to an idle preparer, which lints it (a lint failure is its verdict) and, on a
GPU node, compiles its kernels into the node's shared Triton cache; then to an idle evaluator, one on
the preparer's node when there is one. Candidates of a batch go through both stages concurrently, so
the evaluators check and time some while preparers compile others. A preparer that fails or hangs
is dropped (the candidate goes on to an evaluator unprepared): preparing only saves time. The broker
keeps the busy figures (`EvaluationStats.busy_fraction`): evaluator seconds less Triton's compiles,
over wall seconds while any candidate was in the broker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.history import MsgpackLog
from evo.contracts.records import Proposal
from evo.contracts.verdict import FULL, VERIFIED, Evaluation, Status
from fitness.prepare import Prepared
from islands.evaluation import Answer, EvaluationLedger, EvaluationStats, Run
from islands.evaluator_actor import EvaluatorActor, EvaluatorInfo, EvaluatorSpec, PreparerActor
from islands.runtime import Runtime

PREPARER_START_S = 120.0


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
    compile_ahead: int = 0  # preparers per node with evaluators (0: candidates go straight to evaluators)


class IdleActors:
    """Idle actors with where they run; `get(prefer=node)` takes one on `node` when there is one."""

    def __init__(self) -> None:
        self._items: list[tuple[Any, EvaluatorInfo]] = []
        self._changed = asyncio.Event()
        self.closed = False

    def put_nowait(self, item: tuple[Any, EvaluatorInfo]) -> None:
        self._items.append(item)
        self._changed.set()

    def close(self) -> None:
        """No actor will come back: callers waiting in `get` (and later ones) get None."""
        self.closed = True
        self._changed.set()

    async def get(self, prefer: str = "") -> tuple[Any, EvaluatorInfo] | None:
        while not self._items:
            if self.closed:
                return None
            self._changed.clear()
            await self._changed.wait()
        for i, (_, info) in enumerate(self._items):
            if prefer and info.node_id == prefer:
                return self._items.pop(i)
        return self._items.pop(0)


class EvaluationBroker:
    """See the module docstring. Created by `islands.actors.start_broker`; call `start()` first."""

    def __init__(self, spec: BrokerSpec, runtime: Runtime) -> None:
        self.spec, self.rt = spec, runtime
        self.ledger = EvaluationLedger(spec.task_key, history=MsgpackLog(Path(spec.history_path)))
        self.stats = self.ledger.stats
        self.idle = IdleActors()
        self.preparers = IdleActors()
        self._preparers_live = 0
        self.events: list[dict[str, Any]] = []
        self._spawned = 0
        self.actors: dict[str, Any] = {}  # every live evaluator and preparer actor, idle or busy
        self._in_broker = 0  # candidates between entering `_run` and leaving it
        self._queued_since = 0.0
        # token -> (candidate id, level, since, the model's estimate of a full run's CPU seconds)
        self._running: dict[int, tuple[str, str, float, float | None]] = {}
        self._tokens = 0

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
        self.stats.slots = self.spec.count
        if self.spec.compile_ahead > 0:
            nodes = sorted({info.node_id for _, info in started})
            await asyncio.gather(*(self._spawn_preparer(node, i) for node in nodes
                                   for i in range(self.spec.compile_ahead)))
        return [info for _, info in started]

    async def _spawn_preparer(self, node: str, i: int) -> None:
        name = f"preparer-{node[:8]}-{i}"
        actor = self.rt.actor(PreparerActor, self.spec.evaluator, name, name=name, num_cpus=1.0, node=node)
        try:
            # a preparer starts in seconds; one that waits for a free CPU must not hold up the campaign
            where: str = await asyncio.wait_for(_awaitable(actor.node.remote()),
                                                min(self.spec.start_timeout_s, PREPARER_START_S))
        except Exception as e:
            if not (self.rt.timed_out(e) or self.rt.died(e) or self.rt.failed(e)):
                raise
            self.rt.kill(actor)
            self.events.append({"kind": "preparer_unavailable", "name": name, "why": str(e).strip()[-300:],
                                "time": time.time()})
            return
        self.actors[name] = actor
        self._preparers_live += 1
        self.preparers.put_nowait((actor, EvaluatorInfo(name, 0, where, self.device, None, (), self.spec.task_key)))

    async def evaluate_many(self, proposals: Sequence[Proposal], level: str) -> list[Answer]:
        return list(await asyncio.gather(*(self.ledger.evaluate_async(p, level, self._run) for p in proposals)))

    def _failed(self, c: Candidate, level: str, status: Status, reason: str) -> Evaluation:
        """The verdict for a candidate whose evaluation never came back (actor died or hung)."""
        return Evaluation(c.id, self.spec.task_key, self.device, status, reason=reason, level=level)

    async def _run(self, c: Candidate, level: str) -> Run:
        """Prepare `c` (when compile-ahead is on), then evaluate it on an idle evaluator; the busy figures."""
        if self._in_broker == 0:
            self._queued_since = time.monotonic()
        self._in_broker += 1
        self._tokens += 1
        token = self._tokens
        estimate = self._full_run_estimate(c) if level == VERIFIED else None
        self._running[token] = (c.id, level, time.monotonic(), estimate)
        try:
            node, verdict = "", None
            if self._preparers_live > 0:
                node, verdict = await self._prepare(c, level)
            if verdict is not None:
                return verdict
            return await self._evaluate(c, level, node)
        finally:
            self._running.pop(token, None)
            self._in_broker -= 1
            if self._in_broker == 0:
                self.stats.queued_s += time.monotonic() - self._queued_since

    async def _prepare(self, c: Candidate, level: str) -> tuple[str, Run | None]:
        """(the preparer's node, the candidate's verdict when preparing gave one)."""
        taken = await self.preparers.get()
        if taken is None:  # every preparer was dropped
            return "", None
        actor, info = taken
        try:
            prepared: Prepared = await asyncio.wait_for(_awaitable(actor.prepare.remote(c, level)),
                                                        self.spec.actor_timeout_s)
        except Exception as e:
            if not (self.rt.timed_out(e) or self.rt.died(e) or self.rt.failed(e)):
                raise
            self.rt.kill(actor)
            self.actors.pop(info.name, None)
            self._preparers_live -= 1
            if self._preparers_live == 0:
                self.preparers.close()
            self.events.append({"kind": "preparer_dropped", "name": info.name, "time": time.time(),
                                "why": f"on {c.id}: {str(e).strip()[-300:]}"})
            return "", None
        self.preparers.put_nowait((actor, info))
        self.stats.prepared += 1
        self.stats.warmed += int(prepared.warmed)
        self.stats.prepare_s += prepared.seconds
        if prepared.verdict is not None:
            return info.node_id, (prepared.verdict, prepared.seconds, info.name)
        return info.node_id, None

    async def _evaluate(self, c: Candidate, level: str, node: str) -> Run:
        """Evaluate `c` on an idle evaluator (one on `node` when there is one). An evaluator that dies (a
        lost node, a kill) is replaced and the evaluation runs on another one; one that hangs is killed,
        replaced and given one more try. Only a hang that reproduces is the candidate's `timeout`; each
        incident is listed in the verdict (`Evaluation.incidents`), so the ledger never caches an
        infrastructure failure as the candidate's status."""
        deaths_allowed = self.spec.count + 1  # an actor found dead may have died before this request
        incidents: list[str] = []
        hangs = 0
        while True:
            taken = await self.idle.get(prefer=node)
            assert taken is not None  # the evaluators' pool is never closed: a dead evaluator is replaced
            actor, info = taken
            start = time.monotonic()
            try:
                evaluation, seconds, compiling = await asyncio.wait_for(
                    _awaitable(actor.evaluate.remote(c, level)), self.spec.actor_timeout_s)
            except Exception as e:
                if not (self.rt.timed_out(e) or self.rt.died(e) or self.rt.failed(e)):
                    raise
                failure = e
            else:
                self.idle.put_nowait((actor, info))
                self.stats.slot_s += seconds - compiling
                self.stats.slot_compile_s += compiling
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
        """The figures so far (wall seconds of work in progress included)."""
        if self._in_broker == 0:
            return self.stats
        return dataclasses.replace(self.stats, queued_s=self.stats.queued_s + time.monotonic() - self._queued_since)

    def _full_run_estimate(self, c: Candidate) -> float | None:
        """The CPU seconds the latency model estimated a full run of `c` at the bench size takes (from its
        full evaluation; one bench size only), if known."""
        known = self.ledger.lookup(c, FULL)
        detail = known.evaluation.latency_detail if known is not None else {}
        if not detail or "shapes" in detail:
            return None
        estimate = (detail.get("verification") or {}).get("full_run_estimate_s")
        return float(estimate) if isinstance(estimate, (int, float)) else None

    async def in_flight(self) -> list[tuple[str, str, float, float | None]]:
        """The candidates in the broker now (being prepared, waiting for an evaluator, or evaluated):
        (id, level, seconds since they came in, a full run's estimated CPU seconds or None), the longest
        first."""
        now = time.monotonic()
        return sorted(((cid, level, now - since, est) for cid, level, since, est in self._running.values()),
                      key=lambda r: -r[2])

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
