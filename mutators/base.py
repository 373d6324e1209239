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
from dataclasses import dataclass
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.records import Individual, Proposal
from evo.contracts.task import Task
from evo.contracts.verdict import Evaluation

EvaluateFn = Callable[[Candidate, str], Evaluation]  # (candidate, level "quick" | "full")


@dataclass
class MutationContext:
    """What a mutator may see and use while proposing."""

    task: Task
    rng: random.Random
    evaluate: EvaluateFn
    elites: Sequence[Individual] = ()
    population: Sequence[Individual] = ()  # the island's current population (inspirations of other structures)
    recent_failures: Sequence[Individual] = ()  # children that failed their full check, oldest first
    seed: Individual | None = None
    hardware: str = ""  # the target GPU, in words


class Mutator(ABC):
    """One mutator kind. Each kind is constructed from its config entry (`mutators.factory`).

    `kind` is the config's kind (llm, stoke, optuna); `name` labels proposals and reports (the
    kind unless the config names the entry, so two LLM entries can be told apart).
    """

    kind: str = "base"
    name: str = "base"

    @abstractmethod
    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
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
