"""The evaluation broker: one async actor (on Ray, or a thread with an event loop in the local
executor) between the islands and the evaluator actors.

Its `islands.evaluation.EvaluationLedger` (the shared cache and the history) makes a kernel found
by two islands, or proposed again after a resume, evaluated once, even while the first evaluation
is in flight. The broker hands work to idle evaluator actors (one per GPU on a cluster,
`num_gpus=1`, so timings never share a GPU), replaces an evaluator actor that dies (and retries its
candidate on the replacement) or stops answering (a `timeout` verdict). It runs on the driver's
node, where the run directory is.

Placement: the broker asks Ray for its evaluators at once and the campaign begins with those that have
started (`wait_started`, `begin`); the others join whenever Ray can place them (a node that comes up, a
GPU freed), as ``evaluator_joined`` events. `placement` says what they wait for: the resources each
needs and, per node, what it has. When the count was not set it follows the cluster (`BrokerSpec.follow`):
every `WATCH_S` the broker asks for evaluators for the GPUs of nodes that joined. A dead evaluator's
replacement is asked for the same way, so the campaign goes on with the others while a lost node's
evaluators wait for room elsewhere; the idle evaluators of a node that is gone are replaced when the
broker sees it gone (a ``node_lost`` event), a busy one when its evaluation fails, and that candidate
is evaluated again on another evaluator (recorded once, with the incident).

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
import copy
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.history import MsgpackLog
from evo.contracts.records import Proposal
from evo.contracts.verdict import FULL, VERIFIED, Evaluation, Status
from fitness.prepare import Prepared
from islands.evaluation import Answer, EvaluationLedger, EvaluationStats, EvaluatorTally, Run
from islands.evaluator_actor import EvaluatorActor, EvaluatorInfo, EvaluatorSpec, PreparerActor
from islands.runtime import Runtime

PREPARER_START_S = 120.0
MAX_BATCH = 8  # candidates one evaluator call carries at most (`EvaluationBroker._evaluate`)
MAX_START_FAILURES = 3  # evaluators in a row that fail to start before the broker stops asking for more
WATCH_S = 5.0  # how often the broker looks for nodes that joined or are gone


class BrokerError(RuntimeError):
    """Evaluation cannot go on (no evaluator could be started, evaluators disagree on the task)."""


@dataclass(frozen=True)
class BrokerSpec:
    evaluator: EvaluatorSpec
    count: int  # evaluators to start with (all of them, once Ray can place them)
    num_cpus: float
    num_gpus: float
    task_key: str
    history_path: str
    actor_timeout_s: float  # an evaluator that does not answer within this is killed and replaced
    start_timeout_s: float = 600.0
    compile_ahead: int = 0  # preparers per node with evaluators (0: candidates go straight to evaluators)
    # "GPU" (or "CPU"): the count was not set, so it follows the cluster: nodes that join get evaluators
    follow: str = ""


@dataclass
class Ride:
    """What a candidate waiting for an evaluator gets instead of one when a candidate that got one takes it
    along (`IdleActors.companions`): its result comes in `result`, or None if that batch failed (then it
    is evaluated alone)."""

    result: asyncio.Future[Run | None]


Taken = tuple[Any, EvaluatorInfo] | Ride


class IdleActors:
    """Idle actors with where they run; `get(prefer=node)` takes one on `node` when there is one. An actor
    put back goes straight to one waiting caller (one on its node first), so a deep queue of candidates
    costs nothing per actor returned. A caller that got an actor may take other waiting candidates of the
    same level along (`companions`): they get a `Ride`."""

    def __init__(self) -> None:
        self._items: list[tuple[Any, EvaluatorInfo]] = []
        # (node preferred, the waiting caller, its candidate and level when it may ride along)
        self._waiters: list[tuple[str, asyncio.Future[Taken | None], tuple[Candidate, str] | None]] = []
        self.closed = False

    def put_nowait(self, item: tuple[Any, EvaluatorInfo]) -> None:
        self._waiters = [w for w in self._waiters if not w[1].done()]
        if self._waiters:
            i = next((k for k, w in enumerate(self._waiters) if w[0] and w[0] == item[1].node_id), 0)
            self._waiters.pop(i)[1].set_result(item)
            return
        self._items.append(item)

    def close(self) -> None:
        """No actor will come back: callers waiting in `get` (and later ones) get None."""
        self.closed = True
        for _, f, _ in self._waiters:
            if not f.done():
                f.set_result(None)
        self._waiters.clear()

    def take(self, which: Callable[[EvaluatorInfo], bool]) -> list[tuple[Any, EvaluatorInfo]]:
        """Remove and return the idle actors `which` picks."""
        out = [item for item in self._items if which(item[1])]
        self._items = [item for item in self._items if not which(item[1])]
        return out

    def waiting(self, level: str, node: str) -> int:
        """Callers waiting that could ride along with an evaluator on `node` at `level`."""
        return sum(1 for w in self._waiters if self._rides(w, level, node))

    def companions(self, level: str, node: str, k: int) -> list[tuple[Candidate, Ride]]:
        """Up to `k` waiting candidates of `level` that take no other node's evaluator, each given a `Ride`."""
        out: list[tuple[Candidate, Ride]] = []
        for w in list(self._waiters):
            if len(out) >= k:
                break
            if self._rides(w, level, node) and w[2] is not None:
                self._waiters.remove(w)
                ride = Ride(asyncio.get_running_loop().create_future())
                w[1].set_result(ride)
                out.append((w[2][0], ride))
        return out

    @staticmethod
    def _rides(w: tuple[str, asyncio.Future[Taken | None], tuple[Candidate, str] | None], level: str,
               node: str) -> bool:
        return not w[1].done() and w[2] is not None and w[2][1] == level and w[0] in ("", node)

    async def get(self, prefer: str = "", rider: tuple[Candidate, str] | None = None) -> Taken | None:
        """An idle actor (or, given `rider`, possibly a `Ride`); None once closed and none is left."""
        if self._items:
            i = next((k for k, (_, info) in enumerate(self._items) if prefer and info.node_id == prefer), 0)
            return self._items.pop(i)
        if self.closed:
            return None
        future: asyncio.Future[Taken | None] = asyncio.get_running_loop().create_future()
        self._waiters.append((prefer, future, rider))
        try:
            return await future
        except asyncio.CancelledError:
            handed = future.result() if future.done() and not future.cancelled() else None
            if isinstance(handed, Ride):
                handed.result.cancel()
            elif handed is not None:
                self.put_nowait(handed)  # handed over as the caller went away: to the next one
            raise


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
        self._pending: dict[str, float] = {}  # evaluators asked for and not started: name -> when asked
        self._changed = asyncio.Event()  # an evaluator started or failed to
        self._error: BrokerError | None = None  # why no evaluator can start
        self._started = False  # the campaign began (`begin`)
        self._gone = ""  # why the last evaluator could not be replaced
        self._start_failures = 0  # evaluators in a row that failed to start
        self._suspects: set[str] = set()  # nodes an evaluator died on, not yet seen gone
        self._names_on: dict[str, list[str]] = {}  # the evaluators each node has had
        self._tasks: set[asyncio.Future[Any]] = set()

    @property
    def device(self) -> str:
        return self.ledger.device

    def _ask(self) -> None:
        """Ask the runtime for one more evaluator actor; it joins the idle pool once it has started,
        whenever Ray can place it (`_joined`)."""
        name = f"evaluator-{self._spawned}"
        self._spawned += 1
        actor = self.rt.actor(EvaluatorActor, self.spec.evaluator, name, name=name, num_cpus=self.spec.num_cpus,
                              num_gpus=self.spec.num_gpus)
        self.actors[name] = actor
        self._pending[name] = time.monotonic()
        task = asyncio.ensure_future(self._joined(name, actor))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _joined(self, name: str, actor: Any) -> None:
        try:
            info: EvaluatorInfo = await _awaitable(actor.info.remote())
        except Exception as e:  # it died or raised before it started (a task of its own: nobody to raise to)
            self._pending.pop(name, None)
            self.actors.pop(name, None)
            self._start_failures += 1
            if self._started and self._start_failures < MAX_START_FAILURES:
                self._ask()  # placed on a node that went away meanwhile (Ray cancels it): ask again
            else:
                self._not_started(name, f"{name} failed to start: {_last_line(e)}")
            return
        self._start_failures = 0
        self._pending.pop(name, None)
        wrong = ""
        if info.task_key != self.spec.task_key:
            wrong = (f"{name} on node {info.node_id[:8]} built task {info.task_key}, the driver "
                     f"{self.spec.task_key}: the task files differ between nodes")
        elif self.device and info.device != self.device:
            wrong = f"{name} evaluates on {info.device}, the others on {self.device}"
        if wrong:
            self.rt.kill(actor)
            self.actors.pop(name, None)
            self._start_failures = MAX_START_FAILURES  # it would be so again: ask for no more
            self._not_started(name, wrong)
            return
        self.ledger.device = info.device
        self._names_on.setdefault(info.node_id, []).append(name)
        self.stats.tallies[name] = EvaluatorTally(info.node_id, time.time())
        self.stats.evaluators.append(info)
        self.stats.slots = len(self.stats.evaluators)
        if self._started:  # after the campaign began: a node that joined, or a replacement placed at last
            self.events.append({"kind": "evaluator_joined", "name": name, "node": info.node_id, "time": time.time(),
                                "pid": info.pid, "evaluators": len(self.stats.evaluators)})
        self.idle.put_nowait((actor, info))
        self._changed.set()

    def _not_started(self, name: str, why: str) -> None:
        """An evaluator that will never serve: fatal while none has started (the campaign cannot begin),
        an event afterwards (the others go on)."""
        if not self.stats.evaluators and not self._started:
            self._error = self._error or BrokerError(why)
        else:
            self.events.append({"kind": "evaluator_unavailable", "name": name, "why": why, "time": time.time()})
            if not self.stats.evaluators and not self._pending:
                self._gone = why
                self.idle.close()  # nothing will serve the candidates waiting for an evaluator
        self._changed.set()

    def placement(self) -> dict[str, Any]:
        """What the broker waits for: evaluators asked for and not started, the resources each needs, and
        per node what it has in all and how many evaluators would fit there."""
        need = {"CPU": self.spec.num_cpus, **({"GPU": self.spec.num_gpus} if self.spec.num_gpus else {})}
        nodes = []
        for n in self.rt.nodes():
            res = n["resources"]
            fits = min((int(res.get(k, 0.0) // v) for k, v in need.items() if v > 0), default=0)
            nodes.append({"node": str(n["id"])[:8], "address": n["address"], "fits": fits,
                          **{k: res.get(k, 0.0) for k in ("CPU", "GPU")}})
        return {"waiting": len(self._pending), "started": len(self.stats.evaluators), "each_needs": need,
                "free": {k: v for k, v in self.rt.resources().items() if k in ("CPU", "GPU")}, "nodes": nodes,
                "longest_wait_s": round(max((time.monotonic() - t for t in self._pending.values()), default=0.0), 1)}

    def _wanted(self, nodes: list[dict[str, Any]]) -> int:
        """Evaluators to keep: the count asked for, or, when it follows the cluster (`BrokerSpec.follow`),
        one per such resource the live `nodes` have (at least the count asked for)."""
        if not self.spec.follow:
            return self.spec.count
        per = self.spec.num_gpus if self.spec.follow == "GPU" else self.spec.num_cpus
        total = sum(n["resources"].get(self.spec.follow, 0.0) for n in nodes)
        return max(self.spec.count, int(total // per) if per > 0 else 0)

    async def _watch(self) -> None:
        """Every `WATCH_S`: replace the idle evaluators of nodes that are gone (a busy one is replaced when
        its evaluation fails), and ask for evaluators for the resources of nodes that joined (`_wanted`)."""
        while True:
            await asyncio.sleep(WATCH_S)
            try:
                nodes = self.rt.nodes()
            except Exception:  # the cluster's state is briefly unreadable (a node going away): next time
                continue
            alive = frozenset(str(n["id"]) for n in nodes)
            if self.rt.name == "ray":  # the local executor's evaluators live in this process
                self._lost(alive)
                for actor, info in self.idle.take(functools.partial(_gone, alive)):
                    self.rt.kill(actor)
                    self._replace(info, f"its node {info.node_id[:8]} is gone", set(alive))
            if self._start_failures < MAX_START_FAILURES:  # else evaluators fail to start: do not spin
                for _ in range(self._wanted(nodes) - len(self.stats.evaluators) - len(self._pending)):
                    self._ask()

    def _lost(self, alive: set[str] | frozenset[str]) -> None:
        """A ``node_lost`` event for each node an evaluator died on that is no longer alive, once."""
        for node in sorted(self._suspects - set(alive)):
            self._suspects.discard(node)
            self.events.append({"kind": "node_lost", "node": node, "evaluators": self._names_on.get(node, []),
                                "time": time.time()})

    async def start(self) -> None:
        """Ask for the evaluator actors (and watch the cluster for more, when the count follows it); returns
        at once: `wait_started` says which have started and what the rest wait for."""
        for _ in range(self.spec.count):
            self._ask()
        self._tasks.add(asyncio.ensure_future(self._watch()))

    async def wait_started(self, timeout_s: float, known: int = 0) -> tuple[list[EvaluatorInfo], dict[str, Any]]:
        """(the evaluators started, `placement()`) once more than `known` have started (or one failed to), at
        once when none is pending, or after `timeout_s`. Raises `BrokerError` when none can ever start."""
        if self._pending and self._error is None and len(self.stats.evaluators) <= known:
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass
        if self._error is not None:
            raise self._error
        return list(self.stats.evaluators), self.placement()

    async def begin(self) -> None:
        """The campaign begins with the evaluators started so far; those that start later are events
        (``evaluator_joined``). Compile-ahead preparers are started for their nodes."""
        self._started = True
        if self.spec.compile_ahead > 0:
            nodes = sorted({info.node_id for info in self.stats.evaluators})
            await asyncio.gather(*(self._spawn_preparer(node, i) for node in nodes
                                   for i in range(self.spec.compile_ahead)))

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
        taken = await self.preparers.get()  # no rider: never a Ride
        if taken is None or isinstance(taken, Ride):  # every preparer was dropped
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
        infrastructure failure as the candidate's status.

        When more candidates wait than there are evaluators, the one that gets an evaluator takes its
        share of the waiting ones along in one call (`MAX_BATCH` at most); they get their verdicts from
        it. If that call fails, each of them (and this one) is evaluated again alone, as above."""
        deaths_allowed = self.spec.count + 1  # an actor found dead may have died before this request
        incidents: list[str] = []
        hangs = 0
        alone = False
        while True:
            taken = await self.idle.get(prefer=node, rider=None if alone else (c, level))
            if taken is None:
                raise BrokerError(f"no evaluator is left: {self._gone}")
            if isinstance(taken, Ride):
                run = await taken.result
                if run is not None:
                    evaluation, seconds, name = run
                    if incidents:
                        evaluation = evaluation.with_(incidents=[*incidents, *evaluation.incidents])
                    return evaluation, seconds, name
                incidents.append("the evaluator of the batch it was in failed (evaluated again alone)")
                alone = True
                continue
            actor, info = taken
            along = [] if alone else self.idle.companions(
                level, info.node_id, min(MAX_BATCH - 1, self.idle.waiting(level, info.node_id)
                                         // max(1, len(self.stats.evaluators))))
            start = time.monotonic()
            try:
                if along:
                    runs = await asyncio.wait_for(
                        _awaitable(actor.evaluate_batch.remote([c, *(x for x, _ in along)], level)),
                        self.spec.actor_timeout_s * (1 + len(along)))
                else:
                    runs = [await asyncio.wait_for(_awaitable(actor.evaluate.remote(c, level)),
                                                   self.spec.actor_timeout_s)]
            except Exception as e:
                if not (self.rt.timed_out(e) or self.rt.died(e) or self.rt.failed(e)):
                    for _, ride in along:
                        _settle(ride, None)
                    raise
                failure = e
            else:
                self.idle.put_nowait((actor, info))
                for _, seconds, compiling in runs:
                    if (tally := self.stats.tallies.get(info.name)) is not None:
                        tally.evaluations += 1
                        tally.busy_s += seconds
                    self.stats.slot_s += seconds - compiling
                    self.stats.slot_compile_s += compiling
                # one that took longer than an evaluator may take alone is evaluated again alone, where it
                # gets the verdict it would have had there (a batch's patience is its size times that)
                slow = self.spec.actor_timeout_s
                for (_, ride), (evaluation, seconds, _) in zip(along, runs[1:], strict=True):
                    _settle(ride, (evaluation, seconds, info.name) if seconds <= slow else None)
                self.stats.batched += sum(1 for run in runs[1:] if run[1] <= slow)
                evaluation, seconds, _ = runs[0]
                if along and seconds > slow:
                    incidents.append(f"took {seconds:.0f} s in a batch on evaluator {info.name}, more than one "
                                     f"evaluation may ({slow:.0f} s): evaluated again alone")
                    alone = True
                    continue
                if incidents:
                    evaluation = evaluation.with_(incidents=[*incidents, *evaluation.incidents])
                return evaluation, seconds, info.name
            for _, ride in along:
                _settle(ride, None)  # each is evaluated again alone
            if along:
                if self.rt.timed_out(failure) or self.rt.died(failure):
                    self.rt.kill(actor)
                    self._replace(info, f"a batch of {1 + len(along)} with {c.id} failed: {_last_line(failure)}")
                    incidents.append(f"evaluator {info.name} failed a batch of {1 + len(along)} (replaced; "
                                     "evaluated again alone)")
                else:
                    self.idle.put_nowait((actor, info))
                    incidents.append(f"evaluator {info.name} raised on a batch of {1 + len(along)} (evaluated "
                                     "again alone)")
                alone = True
                continue
            if self.rt.timed_out(failure):
                self.rt.kill(actor)
                self._replace(info, f"no answer within {self.spec.actor_timeout_s:.0f} s on {c.id}")
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
                self._replace(info, f"died while evaluating {c.id}")
                incidents.append(f"evaluator {info.name} died during the evaluation (replaced)")
                if len(incidents) - hangs < deaths_allowed:
                    continue
                reason = f"evaluator actors died {deaths_allowed} times in a row on this candidate (each was replaced)"
                return self._failed(c, level, Status.CRASH, reason).with_(incidents=incidents), 0.0, ""
            # the evaluator raised: a bug, not the candidate's verdict
            self.idle.put_nowait((actor, info))
            reason = f"the evaluator raised {str(failure).strip().splitlines()[-1]}"
            return self._failed(c, level, Status.CRASH, reason), 0.0, info.name

    def _replace(self, dead: EvaluatorInfo, why: str, alive: set[str] | None = None) -> None:
        """Ask for an evaluator in place of `dead`; the work goes on with the others meanwhile (the
        replacement joins when Ray places it: at once where the dead one's resources are free again,
        later where its node was lost). A node found gone (not among the `alive` node ids) is a
        ``node_lost`` event, once."""
        if alive is None:
            try:
                alive = {str(n["id"]) for n in self.rt.nodes()}
            except Exception:
                alive = {dead.node_id}
        self._suspects.add(dead.node_id)  # its loss may show only later (`_lost`)
        self._lost(alive)
        self.actors.pop(dead.name, None)
        if (tally := self.stats.tallies.get(dead.name)) is not None and tally.until is None:
            tally.until = time.time()
        self.stats.replaced += 1
        self.stats.evaluators = [e for e in self.stats.evaluators if e.name != dead.name]
        self.stats.slots = len(self.stats.evaluators)
        replacement = f"evaluator-{self._spawned}"
        self._ask()
        self.events.append({"kind": "evaluator_replaced", "dead": dead.name, "pid": dead.pid, "why": why,
                            "node": dead.node_id, "replacement": replacement, "time": time.time()})

    async def get_stats(self) -> EvaluationStats:
        """The figures so far (wall seconds of work in progress included): a copy, all of one moment
        (the local executor's caller shares this process, and the counts go on changing after this)."""
        snapshot = copy.deepcopy(self.stats)
        if self._in_broker > 0:
            snapshot.queued_s += time.monotonic() - self._queued_since
        return snapshot

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

    async def shutdown(self, patience_s: float = 30.0) -> None:
        """Close the evaluators' workers and end the evaluator actors (one still busy after `patience_s`
        is killed; its worker is closed as it goes)."""
        for task in list(self._tasks):
            task.cancel()
        for name in list(self._pending):  # never started: nothing to close
            actor = self.actors.pop(name, None)
            if actor is not None:
                self.rt.kill(actor)
        self._pending.clear()
        actors = list(self.actors.values())
        self.actors.clear()
        await asyncio.gather(*(self._close(a, patience_s) for a in actors))

    async def _close(self, actor: Any, patience_s: float) -> None:
        try:
            await asyncio.wait_for(_awaitable(actor.close.remote()), patience_s)
        except Exception:
            pass  # it is killed next either way
        self.rt.kill(actor)


def _settle(ride: Ride, run: Run | None) -> None:
    if not ride.result.done():  # its caller may have gone (cancelled)
        ride.result.set_result(run)


def _gone(alive: frozenset[str], info: EvaluatorInfo) -> bool:
    return info.node_id not in alive


def _last_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[-1] if lines else type(e).__name__


async def _awaitable(ref: Any) -> Any:
    """`await ref` for a Ray ObjectRef or a local reference, as one coroutine (for `asyncio.wait_for`)."""
    return await ref
