"""STOKE: random local moves walked as a short Metropolis-Hastings chain (Schkufza et al., 2013).

From the parent, each step draws a move kind (by weight) and applies it to a copy of the current
state. A move with no site, a result that does not parse or fails `fitness.check.lint.lint`, or one that
changes nothing is skipped: it is not an evaluation and not a step. A valid state is checked
cheaply (``ctx.evaluate(c, "quick")``) and costs

    cost = error_weight * graded_error + log(latency_ms)

(`Evaluation.error` is 0 iff correct, so a chain can walk through wrong programs back to right
ones). Where an evaluation has no latency the log-latency term is the parent's (a constant), so
the chain still works, steered by correctness alone, on an evaluator without a latency stage.

Acceptance is Metropolis with inverse temperature `beta` (on the log-latency scale a state r times
slower is accepted with probability r**-beta: the default 3 takes a 10% slower state 75% of the
time and a 2x slower one 12%), drawn in STOKE's order: u ~ U(0, 1] first,
then the largest acceptable cost ``bound = cost(current) - ln(u) / beta``, so a checker could stop
as soon as the bound is exceeded.

What leaves the chain, to be checked in full by the island: the cheapest correct state that beats
the parent, else the final state when it differs from the parent, else nothing.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import StokeConfig
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import Evaluation
from fitness.check.lint import lint
from mutators.base import MutationContext, Mutator
from mutators.stoke.moves.catalog import DEFAULT_WEIGHTS, MOVE_NAMES, Move, move_named
from mutators.stoke.stats import MoveStats, format_table

__all__ = ["StokeMutator", "cost"]


def cost(evaluation: Evaluation, *, error_weight: float, fallback_log_latency: float) -> float:
    """STOKE's cost of one (quick or full) evaluation; inf for programs that do not run."""
    error = evaluation.error
    if not math.isfinite(error):
        return math.inf
    lat = evaluation.latency_ms
    log_lat = math.log(lat) if lat is not None and lat > 0 and math.isfinite(lat) else fallback_log_latency
    return error_weight * error + log_lat


@dataclass(frozen=True)
class State:
    """A chain position: candidate, cost, and the accepted moves that led there from the parent."""

    candidate: Candidate
    cost: float
    path: tuple[str, ...]


@dataclass(frozen=True)
class Step:
    """One evaluated step of a chain: the move, the bound drawn before evaluating, and the outcome."""

    move: str
    status: str
    cost: float
    bound: float
    accepted: bool


@dataclass(frozen=True)
class Chain:
    """A walked chain: where it started, its steps, its best correct state below the start and where
    it ended."""

    start: State
    steps: tuple[Step, ...]
    best: State | None
    final: State

    def outcome(self) -> tuple[State, str] | None:
        """What leaves the chain (see the module docstring) and why, None when nothing does."""
        if self.best is not None:
            return self.best, "best correct state"
        if self.final.candidate.id != self.start.candidate.id:
            return self.final, "final state"
        return None


class StokeMutator(Mutator):
    """Proposes the outcome of one short Metropolis-Hastings chain per call."""

    kind = "stoke"

    def __init__(self, cfg: StokeConfig) -> None:
        weights = dict(DEFAULT_WEIGHTS if cfg.move_weights is None else cfg.move_weights)
        unknown = sorted(set(weights) - set(MOVE_NAMES))
        if unknown:
            raise ValueError(f"unknown STOKE move(s) {unknown}; valid: {', '.join(MOVE_NAMES)}")
        self.moves: list[Move] = [move_named(n) for n, w in weights.items() if w > 0]
        self.weights = [weights[m.name] for m in self.moves]
        self.chain_length = cfg.chain_length
        self.beta = cfg.beta
        self.error_weight = cfg.error_weight
        self.attempts_per_step = cfg.attempts_per_step
        self.name = cfg.name or self.kind
        self.table: dict[str, MoveStats] = {m.name: MoveStats() for m in self.moves}
        self.proposals = 0
        self.full_ok = 0
        self.steps = 0

    def walk(self, parent: Individual, ctx: MutationContext) -> Chain:
        """One Metropolis-Hastings chain from `parent` (quick checks through `ctx.evaluate`)."""
        rng = ctx.rng
        lat = parent.evaluation.latency_ms
        fallback = math.log(lat) if lat is not None and lat > 0 and math.isfinite(lat) else 0.0

        def cost_of(e: Evaluation) -> float:
            return cost(e, error_weight=self.error_weight, fallback_log_latency=fallback)

        start = State(parent.candidate, cost_of(parent.evaluation), ())
        current, best = start, None
        steps: list[Step] = []
        attempts = 0
        while len(steps) < self.chain_length and attempts < self.chain_length * self.attempts_per_step:
            attempts += 1
            move = rng.choices(self.moves, self.weights)[0]
            row = self.table[move.name]
            row.proposed += 1
            applied = move.apply(current.candidate, rng)
            if applied is None or applied.candidate.id == current.candidate.id or not lint(
                    applied.candidate.source).ok:
                continue
            row.valid += 1
            u = 1.0 - rng.random()  # in (0, 1]: ln(u) is finite
            bound = current.cost - math.log(u) / self.beta
            evaluation = ctx.evaluate(applied.candidate, "quick")
            c = cost_of(evaluation)
            accepted = c <= bound
            steps.append(Step(move.name, evaluation.status.value, c, bound, accepted))
            row.correct += evaluation.ok
            row.accepted += accepted
            row.improved += evaluation.ok and c < current.cost
            state = State(applied.candidate, c, (*current.path, f"{move.name}: {applied.detail}"))
            if evaluation.ok and c < (best.cost if best else start.cost) and state.candidate.id != start.candidate.id:
                best = state
            if accepted:
                current = state
        self.steps += len(steps)
        return Chain(start, tuple(steps), best, current)

    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
        started = time.monotonic()
        chain = self.walk(parent, ctx)
        outcome = chain.outcome()
        if outcome is None:
            return []
        chosen, what = outcome
        self.proposals += 1
        note = f"stoke {what} of a {len(chain.steps)}-step chain: " + "; ".join(chosen.path)
        return [Proposal(candidate=chosen.candidate, mutator=self.name, parents=(parent.candidate.id,), note=note,
                         cost_s=time.monotonic() - started)]

    def observe(self, proposal: Proposal, evaluation: Evaluation) -> None:
        if proposal.candidate is not None and evaluation.ok:
            self.full_ok += 1

    def stats(self) -> dict[str, Any]:
        return {"proposals": self.proposals, "full_ok": self.full_ok, "chain_steps": self.steps,
                "moves": {name: row.as_dict() for name, row in self.table.items()}}

    def table_text(self) -> str:
        """STOKE's move table (proposed, valid, correct, accepted, improved per move kind)."""
        return format_table(self.table)

    def state(self) -> dict[str, Any]:
        return self.stats()

    def load_state(self, state: dict[str, Any]) -> None:
        self.proposals = int(state.get("proposals", 0))
        self.full_ok = int(state.get("full_ok", 0))
        self.steps = int(state.get("chain_steps", 0))
        for name, row in dict(state.get("moves", {})).items():
            if name in self.table:
                self.table[name] = MoveStats.from_dict(row)
