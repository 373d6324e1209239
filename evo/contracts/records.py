"""Population members: an evaluated candidate, where it came from, and its DEAP fitness.

Fitness is lexicographic (tier, latency): a correct candidate with a latency beats a correct one
whose latency is unknown (no latency stage ran, or it could not time it), which beats any failure;
among timed candidates lower latency is better. DEAP compares `Fitness.wvalues`, so the classes are
defined here, locally, rather than through DEAP's global `creator`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import IntEnum
from typing import Any

from deap import base

from evo.contracts.candidate import Candidate
from evo.contracts.verdict import Evaluation
from mutators.base import Scored


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


@dataclass(frozen=True)
class Origin:
    """Lineage of an evaluated candidate: who proposed it, from which parents, where and when."""

    parents: tuple[str, ...] = ()
    mutator: str = ""
    island: int = -1
    generation: int = 0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["parents"] = list(self.parents)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Origin:
        return cls(**{**d, "parents": tuple(d.get("parents", ()))})


class Individual:
    """A population member. Identity is the candidate id: two individuals with one id are one kernel."""

    def __init__(self, candidate: Candidate, evaluation: Evaluation, origin: Origin) -> None:
        self.candidate = candidate
        self.evaluation = evaluation
        self.origin = origin
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

    @property
    def scored(self) -> Scored:
        return Scored(self.candidate, self.evaluation)

    def __repr__(self) -> str:
        return f"Individual({self.id}, {self.evaluation.status.value}, latency={self.latency_ms})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate.to_dict(),
            "evaluation": self.evaluation.to_dict(),
            "origin": self.origin.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Individual:
        return cls(
            Candidate.from_dict(d["candidate"]),
            Evaluation.from_dict(d["evaluation"]),
            Origin.from_dict(d["origin"]),
        )


def same_id(a: Individual, b: Individual) -> bool:
    """DEAP's `similar` for the hall of fame: identity is the content hash."""
    return a.id == b.id


def speedup(seed_latency_ms: float | None, latency_ms: float | None) -> float | None:
    """How many times faster than the seed; None when either latency is unknown."""
    if seed_latency_ms is None or latency_ms is None or latency_ms <= 0:
        return None
    return seed_latency_ms / latency_ms
