"""The two records a kernel travels in: a `Proposal` (a candidate and where it came from) and an
`Individual` (a proposal with its verdict), which is at once a population member, a mutator's
parent or elite, a migrant and one line of the evaluation history.

A proposal is made by a mutator (or is the seed, or a draw from its SPACE); the island stamps its
island and generation; the evaluation service turns it into an individual, and the history keeps
exactly that individual (`Individual.to_dict`, read back by `Individual.from_dict`).

Fitness is lexicographic (tier, latency): a correct candidate with a latency beats a correct one
whose latency is unknown (no latency stage ran, or it could not time it), which beats any failure;
among timed candidates lower latency is better. DEAP compares `Fitness.wvalues`, so the fitness
class is defined here, locally, rather than through DEAP's global `creator`. `best_of` is the one
rule for "the best kernel" everywhere (summary, standalone file, report, ablation).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from deap import base

from evo.contracts.candidate import Candidate
from evo.contracts.verdict import Evaluation


@dataclass(frozen=True)
class Proposal:
    """A candidate and its lineage: which mutator proposed it, from which parents, on which island
    and in which generation. `candidate` is None when the proposal failed before evaluation (an LLM
    reply that cannot be applied); `error` then says why. `cost_s` and `cost_usd` are what the
    mutator spent; `meta` is the mutator's private bookkeeping (never written to the history)."""

    candidate: Candidate | None
    mutator: str
    parents: tuple[str, ...] = ()
    island: int = -1
    generation: int = 0
    note: str = ""
    error: str = ""
    cost_s: float = 0.0
    cost_usd: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def lineage(self) -> dict[str, Any]:
        """What the history keeps of a proposal (its "origin")."""
        return {"parents": list(self.parents), "mutator": self.mutator, "island": self.island,
                "generation": self.generation, "note": self.note}

    @classmethod
    def from_lineage(cls, candidate: Candidate | None, d: dict[str, Any]) -> Proposal:
        return cls(candidate, str(d.get("mutator", "")), tuple(d.get("parents", ())), int(d.get("island", -1)),
                   int(d.get("generation", 0)), str(d.get("note", "")))


class Tier(IntEnum):
    FAILED = 0
    UNTIMED = 1  # correct, latency unknown
    TIMED = 2  # correct, latency known


class KernelFitness(base.Fitness):
    """DEAP fitness of a kernel: values (tier, latency_ms), tier maximised, latency minimised."""

    weights = (1.0, -1.0)


def tier(evaluation: Evaluation) -> Tier:
    if not evaluation.ok:
        return Tier.FAILED
    return Tier.TIMED if evaluation.latency_ms is not None else Tier.UNTIMED


def fitness_values(evaluation: Evaluation) -> tuple[float, float]:
    t = tier(evaluation)
    latency = evaluation.latency_ms if t is Tier.TIMED and evaluation.latency_ms is not None else math.inf
    return float(t), float(latency)


class Individual:
    """An evaluated proposal. Identity is the candidate id: two individuals with one id are one kernel.

    `seconds` is the evaluator's time, `evaluator` its name and `time` (epoch seconds) when the
    verdict was recorded: the earliest evaluation wins a tie for the best."""

    def __init__(self, proposal: Proposal, evaluation: Evaluation, *, seconds: float = 0.0, evaluator: str = "",
                 time: float = 0.0) -> None:
        if proposal.candidate is None:
            raise ValueError("an individual needs a candidate (a failed proposal is never evaluated)")
        self.proposal = proposal
        self.candidate: Candidate = proposal.candidate
        self.evaluation = evaluation
        self.seconds = seconds
        self.evaluator = evaluator
        self.time = time
        self.fitness = KernelFitness(fitness_values(evaluation))

    @property
    def id(self) -> str:
        return self.candidate.id

    @property
    def tier(self) -> Tier:
        return tier(self.evaluation)

    @property
    def latency_ms(self) -> float | None:
        return self.evaluation.latency_ms if self.tier is Tier.TIMED else None

    def __repr__(self) -> str:
        return f"Individual({self.id}, {self.evaluation.status.value}, latency={self.latency_ms})"

    def to_dict(self) -> dict[str, Any]:
        """The history record of this individual (also its form in checkpoints)."""
        return {
            "candidate": self.candidate.to_dict(),
            "evaluation": self.evaluation.to_dict(),
            "origin": self.proposal.lineage(),
            "seconds": self.seconds,
            "evaluator": self.evaluator,
            "time": self.time,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Individual:
        candidate = Candidate.from_dict(d["candidate"])
        return cls(Proposal.from_lineage(candidate, d.get("origin", {})), Evaluation.from_dict(d["evaluation"]),
                   seconds=float(d.get("seconds", 0.0)), evaluator=str(d.get("evaluator", "")),
                   time=float(d.get("time", 0.0)))


def same_id(a: Individual, b: Individual) -> bool:
    """DEAP's `similar` for the hall of fame: identity is the content hash."""
    return a.id == b.id


def best_of(individuals: Iterable[Individual]) -> Individual | None:
    """The best kernel: the highest tier, then the lowest latency, ties to the earliest evaluation."""
    return min(individuals, key=lambda i: (-int(i.tier), i.latency_ms if i.latency_ms is not None else math.inf,
                                           i.time), default=None)


def speedup(seed_latency_ms: float | None, latency_ms: float | None) -> float | None:
    """How many times faster than the seed; None when either latency is unknown."""
    if seed_latency_ms is None or latency_ms is None or latency_ms <= 0:
        return None
    return seed_latency_ms / latency_ms
