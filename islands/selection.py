"""Operator selection: which mutator an island applies to the next parent.

The island only needs two verbs, so any policy (fixed weights here; bandits such as UCB1 or
Thompson sampling from `mutators/`) plugs in by implementing `OperatorPolicy`. The island reports
each proposal's `Outcome`; the policy decides what reward it makes of it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Outcome:
    """What one proposal of arm `arm` achieved and cost.

    `speedup_over_parent` is parent latency / child latency when both are known and the child is
    correct (> 1 is an improvement), else None. `cost_s` counts the mutator's own time and the
    evaluation time of what it proposed; `cost_usd` is what it spent on an LLM.
    """

    correct: bool
    speedup_over_parent: float | None
    cost_s: float
    cost_usd: float = 0.0
    duplicate: bool = False  # the child was already known (no new information)
    proposed: bool = True  # False: the mutator produced no candidate (failed before evaluation)

    @property
    def improved(self) -> bool:
        return self.speedup_over_parent is not None and self.speedup_over_parent > 1.0


class OperatorPolicy(Protocol):
    """Chooses mutators by index and learns from outcomes; its state survives checkpoints."""

    def choose(self, rng: random.Random) -> int: ...

    def update(self, arm: int, outcome: Outcome) -> None: ...

    def state(self) -> dict[str, Any]: ...

    def load_state(self, state: dict[str, Any]) -> None: ...


class FixedWeights:
    """Draws mutators in proportion to fixed weights (ablations); learns nothing, counts outcomes."""

    def __init__(self, weights: Sequence[float]) -> None:
        if not weights:
            raise ValueError("operator selection needs at least one mutator")
        if any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"mutator weights must be >= 0 with a positive sum, got {list(weights)}")
        self.weights = [float(w) for w in weights]
        self.pulls = [0] * len(weights)
        self.improvements = [0] * len(weights)

    def choose(self, rng: random.Random) -> int:
        return rng.choices(range(len(self.weights)), weights=self.weights)[0]

    def update(self, arm: int, outcome: Outcome) -> None:
        self.pulls[arm] += 1
        self.improvements[arm] += int(outcome.improved)

    def state(self) -> dict[str, Any]:
        return {"pulls": list(self.pulls), "improvements": list(self.improvements)}

    def load_state(self, state: dict[str, Any]) -> None:
        self.pulls = list(state.get("pulls", self.pulls))
        self.improvements = list(state.get("improvements", self.improvements))


def build_policy(policy: str, weights: Sequence[float]) -> OperatorPolicy:
    """The policy a config names (`operator_selection.policy`)."""
    if policy == "fixed":
        return FixedWeights(weights)
    raise ValueError(f"unknown operator selection policy {policy!r}; valid: fixed")
