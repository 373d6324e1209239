"""The mutator protocol: every mutator kind (llm, stoke, optuna) is a small object with two verbs.

``propose(parent, ctx)`` returns proposals (children of `parent`, or of several elites); it may
evaluate candidates itself through ``ctx.evaluate`` (a STOKE chain walks with cheap checks, an
Optuna study asks for several trials), but what it returns is evaluated in full by the island.
``observe(proposal, evaluation)`` feeds the full verdict back (Optuna's tell, the LLM's record of
recent failures, per-move statistics).

Rules every implementation follows (and `tests/contracts/` checks): the same seed gives the same
proposals; parents are never modified; a failure is observed without raising; every proposal records
its mutator, its parents' ids and a short note (move kind, trial number, model reply summary).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.task import Task
from evo.contracts.verdict import Evaluation


@dataclass(frozen=True)
class Scored:
    """A candidate with its (full) evaluation."""

    candidate: Candidate
    evaluation: Evaluation

    @property
    def latency_ms(self) -> float:
        e = self.evaluation
        return e.latency_ms if e.ok and e.latency_ms is not None else float("inf")


@dataclass(frozen=True)
class Proposal:
    """A child proposed by a mutator. `candidate` is None when the proposal failed before
    evaluation (an LLM reply that cannot be applied); `error` then says why."""

    candidate: Candidate | None
    mutator: str
    parents: tuple[str, ...]
    note: str = ""
    error: str = ""
    cost_s: float = 0.0  # seconds the mutator spent (inner evaluations included)
    cost_usd: float = 0.0  # dollars spent (LLM)
    inner_evaluations: int = 0  # evaluations done inside propose (chain steps, ...)
    meta: dict[str, Any] = field(default_factory=dict)  # mutator-private bookkeeping (trial number...)


EvaluateFn = Callable[[Candidate, str], Evaluation]  # (candidate, level "quick" | "full")


@dataclass
class MutationContext:
    """What a mutator may see and use while proposing."""

    task: Task
    rng: random.Random
    evaluate: EvaluateFn
    elites: Sequence[Scored] = ()
    recent_failures: Sequence[tuple[Proposal, Evaluation]] = ()
    seed: Scored | None = None
    hardware: str = ""


class Mutator(ABC):
    """One mutator kind. Subclasses are configured by keyword-only arguments.

    `kind` is the config's kind (llm, stoke, optuna); `name` labels proposals and reports (the
    kind unless the config names the entry, so two LLM entries can be told apart).
    """

    kind: str = "base"
    name: str = "base"

    @abstractmethod
    def propose(self, parent: Scored, ctx: MutationContext) -> list[Proposal]:
        """Children of `parent` (possibly empty). Must not modify `parent`."""

    def observe(self, proposal: Proposal, evaluation: Evaluation) -> None:  # noqa: B027
        """Feedback on one of this mutator's proposals (default: ignore)."""

    def state(self) -> dict[str, Any]:
        """Serializable state for checkpoints (statistics, chain positions...)."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:  # noqa: B027
        """Restore what `state()` returned."""

    def stats(self) -> dict[str, Any]:
        """Per-mutator figures for reports."""
        return {}

    def exhausted(self) -> bool:
        """True when this mutator will propose nothing more (an LLM whose budget is spent);
        operator selection then stops choosing it."""
        return False


def choose(rng: random.Random, items: Sequence[Any]) -> Any:
    return items[rng.randrange(len(items))]
