"""What an island's generation did: the report the driver turns into progress, events and budgets."""

from __future__ import annotations

from dataclasses import dataclass, field

from evo.contracts.records import Proposal, speedup


@dataclass(frozen=True)
class GenerationReport:
    """What one generation (or the initial one, generation 0) did, for progress and budgets."""

    island: int
    generation: int
    evaluations: int  # full evaluations run (cache hits excluded)
    inner_evaluations: int  # evaluations run inside mutators (quick checks...)
    cache_hits: int
    proposals: int
    duplicates: int
    accepted: int  # children that entered the population
    failures: dict[str, int]  # status -> count, among the evaluations run
    failed_proposals: tuple[Proposal, ...]  # proposals with no candidate (error says why)
    population: int
    best_id: str | None
    best_latency_ms: float | None
    best_latency_source: str  # "cuda" (measured), "model" (estimated) or "" (unknown)
    seed_latency_ms: float | None
    seed_ok: bool
    seed_reason: str
    llm_usd: float

    @property
    def best_speedup(self) -> float | None:
        return speedup(self.seed_latency_ms, self.best_latency_ms)


@dataclass
class Tally:
    evaluations: int = 0
    inner: int = 0
    hits: int = 0
    proposals: int = 0
    duplicates: int = 0
    accepted: int = 0
    llm_usd: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)
    failed_proposals: list[Proposal] = field(default_factory=list)
