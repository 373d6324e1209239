"""Evaluation as a service for islands: requests, results, history records and the shared cache.

An island never evaluates anything itself: it hands `EvalRequest`s to an `EvaluationService` (a
local one here for tests and single-process use; the Ray broker in `islands.broker` on a cluster).
Every service keeps one cache keyed by candidate id + task key + device + level, so an id is
evaluated once whichever island, mutator or generation asks for it, and writes one history record
per evaluation it actually ran (`fresh`), never one per request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from evo.contracts.candidate import Candidate
from evo.contracts.records import Origin
from evo.contracts.verdict import Evaluation, Status

FULL = "full"
QUICK = "quick"


@dataclass(frozen=True)
class EvalRequest:
    candidate: Candidate
    level: str
    origin: Origin


@dataclass(frozen=True)
class EvalResult:
    evaluation: Evaluation
    fresh: bool  # False: answered from the cache (or by another request for the same id in flight)
    seconds: float = 0.0  # evaluation time, 0 for cache hits


@dataclass(frozen=True)
class CacheKey:
    candidate_id: str
    task_key: str
    device: str
    level: str


def cache_key(evaluation: Evaluation) -> CacheKey:
    return CacheKey(evaluation.candidate_id, evaluation.task_key, evaluation.device, evaluation.level)


@dataclass(frozen=True)
class EvalRecord:
    """One line of the evaluation history: an evaluation that ran, with the candidate's lineage."""

    candidate: Candidate
    evaluation: Evaluation
    origin: Origin
    seconds: float
    evaluator: str
    time: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "evaluation",
            "candidate": self.candidate.to_dict(),
            "evaluation": self.evaluation.to_dict(),
            "origin": self.origin.to_dict(),
            "seconds": self.seconds,
            "evaluator": self.evaluator,
            "time": self.time,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalRecord:
        return cls(
            Candidate.from_dict(d["candidate"]), Evaluation.from_dict(d["evaluation"]),
            Origin.from_dict(d["origin"]), float(d["seconds"]), str(d["evaluator"]), float(d["time"]),
        )


class EvaluationService(Protocol):
    """Evaluates batches of requests (in parallel where it can), in request order."""

    def evaluate_many(self, requests: Sequence[EvalRequest]) -> list[EvalResult]: ...


class EvalCache:
    """Evaluations by `CacheKey`; filled from the history on resume."""

    def __init__(self, records: Iterable[EvalRecord] = ()) -> None:
        self._store: dict[CacheKey, Evaluation] = {}
        for r in records:
            self.put(r.evaluation)

    def __len__(self) -> int:
        return len(self._store)

    def get(self, key: CacheKey) -> Evaluation | None:
        return self._store.get(key)

    def put(self, evaluation: Evaluation, key: CacheKey | None = None) -> None:
        self._store[key or cache_key(evaluation)] = evaluation


def failed(candidate: Candidate, task_key: str, device: str, level: str, status: Status, reason: str) -> Evaluation:
    """The verdict for a candidate whose evaluation never came back (actor died or hung)."""
    return Evaluation(candidate.id, task_key, device, status, reason=reason, level=level)


EvaluateFn = Callable[[Candidate, str], Evaluation]


class LocalEvaluationService:
    """Evaluates in this process, one request after another (tests, single-process use)."""

    def __init__(
        self, evaluate: EvaluateFn, *, task_key: str, device: str, cache: EvalCache | None = None,
        history: Callable[[EvalRecord], None] | None = None, name: str = "local",
    ) -> None:
        self._evaluate = evaluate
        self.task_key = task_key
        self.device = device
        self.cache = cache if cache is not None else EvalCache()
        self.history = history
        self.name = name
        self.fresh = 0

    def evaluate_many(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        return [self.evaluate_one(r) for r in requests]

    def evaluate_one(self, request: EvalRequest) -> EvalResult:
        key = CacheKey(request.candidate.id, self.task_key, self.device, request.level)
        hit = self.cache.get(key)
        if hit is not None:
            return EvalResult(hit, fresh=False)
        start = time.monotonic()
        evaluation = self._evaluate(request.candidate, request.level)
        seconds = time.monotonic() - start
        self.cache.put(evaluation, key)
        self.fresh += 1
        if self.history is not None:
            self.history(EvalRecord(request.candidate, evaluation, request.origin, seconds, self.name, time.time()))
        return EvalResult(evaluation, fresh=True, seconds=seconds)
