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
as soon as the bound is exceeded. The bound of every step is recorded in the proposal's trace.

What leaves the chain, to be checked in full by the island: the cheapest correct state that beats
the parent, else the final state when it differs from the parent, else nothing.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.verdict import Evaluation
from fitness.check.lint import lint
from mutators.base import MutationContext, Mutator, Proposal, Scored
from mutators.moves import DEFAULT_WEIGHTS, Move, move_named
from mutators.stoke_stats import MoveStats, format_table

__all__ = ["StokeMutator", "cost"]


def cost(evaluation: Evaluation, *, error_weight: float, fallback_log_latency: float) -> float:
    """STOKE's cost of one (quick or full) evaluation; inf for programs that do not run."""
    error = evaluation.error
    if not math.isfinite(error):
        return math.inf
    lat = evaluation.latency_ms
    log_lat = math.log(lat) if lat is not None and lat > 0 and math.isfinite(lat) else fallback_log_latency
    return error_weight * error + log_lat


def _finite(x: float) -> float | None:
    """Costs in proposal metadata stay JSON-safe: None stands for an infinite cost (a crash)."""
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class _State:
    """A chain position: candidate, cost, and the accepted moves that led there from the parent."""

    candidate: Candidate
    cost: float
    path: tuple[str, ...]


class StokeMutator(Mutator):
    """Proposes the outcome of one short Metropolis-Hastings chain per call."""

    kind = "stoke"

    def __init__(self, *, chain_length: int = 8, beta: float = 3.0, error_weight: float = 10.0,
                 move_weights: dict[str, float] | None = None, attempts_per_step: int = 20,
                 name: str | None = None) -> None:
        if chain_length < 1 or beta <= 0 or error_weight < 0 or attempts_per_step < 1:
            raise ValueError("stoke: chain_length >= 1, beta > 0, error_weight >= 0, attempts_per_step >= 1")
        weights = dict(DEFAULT_WEIGHTS if move_weights is None else move_weights)
        self.moves: list[Move] = [move_named(n) for n, w in weights.items() if w > 0]
        if not self.moves:
            raise ValueError("stoke: move_weights gives no move a positive weight")
        self.weights = [weights[m.name] for m in self.moves]
        self.chain_length = chain_length
        self.beta = beta
        self.error_weight = error_weight
        self.attempts_per_step = attempts_per_step
        self.name = name or self.kind
        self.table: dict[str, MoveStats] = {m.name: MoveStats() for m in self.moves}
        self.proposals = 0
        self.full_ok = 0
        self.steps = 0

    def propose(self, parent: Scored, ctx: MutationContext) -> list[Proposal]:
        started = time.monotonic()
        rng = ctx.rng
        lat = parent.evaluation.latency_ms
        fallback = math.log(lat) if lat is not None and lat > 0 and math.isfinite(lat) else 0.0

        def cost_of(e: Evaluation) -> float:
            return cost(e, error_weight=self.error_weight, fallback_log_latency=fallback)

        start = _State(parent.candidate, cost_of(parent.evaluation), ())
        current, best = start, None
        trace: list[dict[str, Any]] = []
        steps = attempts = 0
        while steps < self.chain_length and attempts < self.chain_length * self.attempts_per_step:
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
            steps += 1
            c = cost_of(evaluation)
            accepted = c <= bound
            row.correct += evaluation.ok
            row.accepted += accepted
            row.improved += evaluation.ok and c < current.cost
            trace.append({"move": move.name, "detail": applied.detail, "status": evaluation.status.value,
                          "cost": _finite(c), "bound": _finite(bound), "accepted": accepted})
            state = _State(applied.candidate, c, (*current.path, f"{move.name}: {applied.detail}"))
            if evaluation.ok and c < (best.cost if best else start.cost) and state.candidate.id != start.candidate.id:
                best = state
            if accepted:
                current = state
        self.steps += steps
        chosen = best or (current if current.candidate.id != start.candidate.id else None)
        if chosen is None:
            return []
        self.proposals += 1
        what = "best correct state" if chosen is best else "final state"
        note = f"stoke {what} of a {steps}-step chain: " + "; ".join(chosen.path)
        return [Proposal(
            candidate=chosen.candidate, mutator=self.name, parents=(parent.candidate.id,), note=note,
            cost_s=time.monotonic() - started, inner_evaluations=steps,
            meta={"moves": [p.split(":")[0] for p in chosen.path], "chain_cost": _finite(chosen.cost),
                  "parent_cost": _finite(start.cost), "trace": trace},
        )]

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
