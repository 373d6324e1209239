"""Evaluation as a service for islands, and the one component that evaluates each candidate once.

An island never evaluates anything itself: it hands proposals to an `EvaluationService` (the local
one here, for tests and single-process use; the Ray broker in `islands.broker` on a cluster). Both
go through an `EvaluationLedger`, which answers "have we evaluated this candidate at this level? if
not, evaluate it, record it and return it": the cache (candidate id + task key + device + level,
filled from the history on resume), requests for an id already in flight waiting for that
evaluation, one history record per evaluation actually run (never one per request), and the counts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from evo.contracts.candidate import Candidate
from evo.contracts.history import MsgpackLog
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import FULL, Evaluation
from islands.evaluator_actor import EvaluatorInfo
from mutators.base import EvaluateFn

Run = tuple[Evaluation, float, str]  # the verdict, evaluator seconds, the evaluator's name


class Answer(NamedTuple):
    individual: Individual
    fresh: bool  # False: from the cache (or from another request for the same id in flight)


class EvaluationService(Protocol):
    """Evaluates batches of proposals (in parallel where it can), in order."""

    def evaluate_many(self, proposals: Sequence[Proposal], level: str) -> list[Answer]: ...


@dataclass
class EvaluatorTally:
    """One evaluator's share of the work (the broker's): where it ran, from when to when (wall clock),
    its evaluations and the seconds they took."""

    node: str
    since: float
    until: float | None = None  # when it died or was replaced (None: alive)
    evaluations: int = 0
    busy_s: float = 0.0

    def row(self, name: str, now: float) -> dict[str, Any]:
        alive = max(1e-9, (self.until or now) - self.since)
        return {"name": name, "evaluations": self.evaluations, "busy_s": round(self.busy_s, 3),
                "alive_s": round(alive, 3), "busy_fraction": round(min(1.0, self.busy_s / alive), 4),
                "lost": self.until is not None}


def nodes_table(tallies: dict[str, EvaluatorTally], now: float) -> list[dict[str, Any]]:
    """Per node (in the order their first evaluator started): its evaluators' rows and evaluations."""
    out: dict[str, dict[str, Any]] = {}
    for name, t in sorted(tallies.items(), key=lambda kv: kv[1].since):
        node = out.setdefault(t.node, {"node": t.node, "evaluators": [], "evaluations": 0})
        node["evaluators"].append(t.row(name, now))
        node["evaluations"] += t.evaluations
    return list(out.values())


@dataclass
class EvaluationStats:
    fresh: dict[str, int] = field(default_factory=dict)  # level -> evaluations run (this run and earlier)
    failures: dict[str, int] = field(default_factory=dict)  # status -> count among full evaluations run
    cache_hits: int = 0
    busy_s: float = 0.0  # evaluator time spent in evaluations run in this session
    replaced: int = 0  # evaluators replaced (the broker's)
    evaluators: list[EvaluatorInfo] = field(default_factory=list)  # where each live evaluator runs (the broker's)
    # the device's slot (the broker's, this session): seconds evaluators spent checking and timing (their
    # evaluations less Triton's compiles), seconds they spent compiling, and wall seconds while at least one
    # candidate was in the broker (being prepared, waiting for an evaluator, or evaluated)
    slot_s: float = 0.0
    slot_compile_s: float = 0.0
    queued_s: float = 0.0
    slots: int = 0  # evaluators the busy fraction is over
    prepared: int = 0  # candidates prepared ahead (`fitness.prepare`), and how many of them compiled ahead
    warmed: int = 0
    prepare_s: float = 0.0  # preparers' seconds
    tallies: dict[str, EvaluatorTally] = field(default_factory=dict)  # by evaluator name (the broker's, this session)
    batched: int = 0  # evaluations that rode along in another candidate's evaluator call (the broker's)

    @property
    def busy_fraction(self) -> float | None:
        """Slot seconds over wall seconds while work was queued, per evaluator (None before any work):
        on a GPU node, the fraction of time the GPU's timing slot did GPU work while it had work."""
        if self.queued_s <= 0 or self.slots <= 0:
            return None
        return min(1.0, self.slot_s / (self.queued_s * self.slots))

    @property
    def evaluations(self) -> int:
        return sum(self.fresh.values())

    def count(self, evaluation: Evaluation) -> None:
        self.fresh[evaluation.level] = self.fresh.get(evaluation.level, 0) + 1
        if evaluation.level == FULL and not evaluation.ok:
            self.failures[evaluation.status.value] = self.failures.get(evaluation.status.value, 0) + 1


CacheKey = tuple[str, str, str, str]  # candidate id, task key, device, level


class EvaluationLedger:
    """See the module docstring. `history`: the run's log, read back on creation (resume)."""

    def __init__(self, task_key: str, *, device: str = "", history: MsgpackLog | None = None) -> None:
        self.task_key = task_key
        self.device = device
        self.history = history
        self.stats = EvaluationStats()
        self._cache: dict[CacheKey, Individual] = {}
        self._inflight: dict[CacheKey, asyncio.Future[Individual]] = {}
        if history is not None:
            history.repair()
            for record in history.read():
                if record.get("kind") == "evaluation":
                    ind = Individual.from_dict(record)
                    self._cache[self._key_of(ind)] = ind
                    self.stats.count(ind.evaluation)

    @staticmethod
    def _key_of(ind: Individual) -> CacheKey:
        e = ind.evaluation
        return ind.id, e.task_key, e.device, e.level

    def key(self, candidate: Candidate, level: str) -> CacheKey:
        return candidate.id, self.task_key, self.device, level

    def lookup(self, candidate: Candidate, level: str) -> Individual | None:
        return self._cache.get(self.key(candidate, level))

    def record(self, proposal: Proposal, run: Run) -> Individual:
        """Keep a verdict that was just computed: cache, history, counts."""
        evaluation, seconds, evaluator = run
        ind = Individual(proposal, evaluation, seconds=seconds, evaluator=evaluator, time=time.time())
        self._cache[self._key_of(ind)] = ind
        self.stats.count(evaluation)
        self.stats.busy_s += seconds
        if self.history is not None:
            self.history.append({"kind": "evaluation", **ind.to_dict()})
        return ind

    def _hit(self, proposal: Proposal, level: str) -> Answer | None:
        assert proposal.candidate is not None, "a proposal without a candidate is never evaluated"
        hit = self.lookup(proposal.candidate, level)
        if hit is None:
            return None
        self.stats.cache_hits += 1
        return Answer(hit, False)

    def evaluate(self, proposal: Proposal, level: str, run: Callable[[Candidate, str], Run]) -> Answer:
        """The individual of `proposal` at `level`, evaluated with `run` unless known already."""
        hit = self._hit(proposal, level)
        if hit is not None:
            return hit
        assert proposal.candidate is not None
        return Answer(self.record(proposal, run(proposal.candidate, level)), True)

    async def evaluate_async(self, proposal: Proposal, level: str,
                             run: Callable[[Candidate, str], Awaitable[Run]]) -> Answer:
        """As `evaluate`, for an event loop: concurrent requests for one id share one evaluation."""
        hit = self._hit(proposal, level)
        if hit is not None:
            return hit
        assert proposal.candidate is not None
        key = self.key(proposal.candidate, level)
        if key in self._inflight:
            self.stats.cache_hits += 1
            return Answer(await asyncio.shield(self._inflight[key]), False)
        future: asyncio.Future[Individual] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            ind = self.record(proposal, await run(proposal.candidate, level))
            future.set_result(ind)
            return Answer(ind, True)
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved here, so an unwaited future does not warn
            raise
        finally:
            del self._inflight[key]


class LocalEvaluationService:
    """Evaluates in this process, one proposal after another (tests, single-process use)."""

    def __init__(self, evaluate: EvaluateFn, ledger: EvaluationLedger, *, name: str = "local") -> None:
        self._evaluate = evaluate
        self.ledger = ledger
        self.name = name

    def _run(self, candidate: Candidate, level: str) -> Run:
        start = time.monotonic()
        evaluation = self._evaluate(candidate, level)
        return evaluation, time.monotonic() - start, self.name

    def evaluate_many(self, proposals: Sequence[Proposal], level: str) -> list[Answer]:
        return [self.ledger.evaluate(p, level, self._run) for p in proposals]
