"""Operator selection as an island uses it: which mutator gets the next parent.

The surface is that of `mutators.selection` (the mutators package's selectors: fixed weights, UCB1,
Thompson sampling): `choose(rng, available) -> name` and `record(name, outcomes) -> reward`, one
record per *pull* (one `propose` call and the verdicts of what it proposed), plus `state()` /
`load_state()` for checkpoints and a per-mutator `table` for reports. This module holds a minimal
fixed-weight selector with that surface, so islands run before the bandits are merged; once they
are, `build_selector` should come from `mutators.config` and this module can go.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from fitness.status import Evaluation, Status
from mutators.base import Proposal


@dataclass(frozen=True)
class Outcome:
    """What one proposal came to. `child_latency_ms` is None unless the child is correct, timed and
    new to the island (a duplicate of a resident teaches nothing)."""

    valid: bool
    correct: bool
    parent_latency_ms: float | None
    child_latency_ms: float | None
    cost_s: float
    cost_usd: float

    @classmethod
    def of(cls, proposal: Proposal, evaluation: Evaluation | None, parent_latency_ms: float | None) -> Outcome:
        """From a proposal and its full evaluation (None when there was no candidate to evaluate)."""
        valid = proposal.candidate is not None and evaluation is not None and evaluation.status is not Status.LINT_ERROR
        correct = evaluation is not None and evaluation.ok
        seconds = proposal.cost_s + (evaluation.check_seconds if evaluation is not None else 0.0)
        return cls(valid, correct, parent_latency_ms, evaluation.latency_ms if correct and evaluation else None,
                   seconds, proposal.cost_usd)

    def improvement(self) -> float:
        """ln(parent / child) for a faster correct child, else 0."""
        p, c = self.parent_latency_ms, self.child_latency_ms
        if not self.correct or c is None or p is None or not (0 < c < p):
            return 0.0
        return math.log(p / c)


@dataclass
class OperatorStats:
    pulls: int = 0
    proposals: int = 0
    valid: int = 0
    correct: int = 0
    improvements: int = 0
    cost_s: float = 0.0
    cost_usd: float = 0.0


class Selector(Protocol):
    names: list[str]
    table: dict[str, OperatorStats]

    def choose(self, rng: random.Random, available: Sequence[str] | None = None) -> str: ...

    def record(self, name: str, outcomes: Sequence[Outcome]) -> float: ...

    def state(self) -> dict[str, Any]: ...

    def load_state(self, state: Mapping[str, Any]) -> None: ...


class FixedWeights:
    """Draws mutators in proportion to fixed weights (ablations); learns nothing, counts outcomes."""

    def __init__(self, weights: Mapping[str, float]) -> None:
        if not weights:
            raise ValueError("operator selection needs at least one mutator")
        if any(w < 0 for w in weights.values()):
            raise ValueError(f"mutator weights must be >= 0 (got {dict(weights)})")
        self.weights = dict(weights)
        self.names = list(weights)
        self.table = {n: OperatorStats() for n in self.names}

    def choose(self, rng: random.Random, available: Sequence[str] | None = None) -> str:
        pool = [n for n in (self.names if available is None else available) if n in self.weights]
        w = [self.weights[n] for n in pool]
        if not pool or sum(w) <= 0:
            raise ValueError(f"no mutator with a positive weight to choose from (among {', '.join(pool) or 'none'})")
        return rng.choices(pool, w)[0]

    def record(self, name: str, outcomes: Sequence[Outcome]) -> float:
        s = self.table[name]
        s.pulls += 1
        s.proposals += len(outcomes)
        s.valid += sum(o.valid for o in outcomes)
        s.correct += sum(o.correct for o in outcomes)
        s.improvements += sum(o.improvement() > 0 for o in outcomes)
        s.cost_s += sum(o.cost_s for o in outcomes)
        s.cost_usd += sum(o.cost_usd for o in outcomes)
        return 0.0

    def state(self) -> dict[str, Any]:
        return {"table": {n: asdict(s) for n, s in self.table.items()}}

    def load_state(self, state: Mapping[str, Any]) -> None:
        for n, d in dict(state.get("table", {})).items():
            if n in self.table:
                self.table[n] = OperatorStats(**d)


def build_selector(policy: str, weights: Mapping[str, float]) -> Selector:
    """The selector a config names (`selection.policy`) over mutators `name -> weight`."""
    if policy == "fixed":
        return FixedWeights(weights)
    raise ValueError(f"unknown operator selection policy {policy!r}; valid: fixed")
