"""Baselines inside every comparison: random search and an exhaustive sweep of the seed's SPACE.

Each pull proposes the next `per_proposal` points of the seed's SPACE (the seed's own structure,
whatever the parent is), each point once per island: in a random order drawn from the mutator's
seed (`order: random`, random search) or in the SPACE's own order (`order: grid`, the sweep). Once
every point is out the mutator is exhausted. Run alone in an ablation variant, it says what the
search adds over tuning the seed's parameters blindly, at the same evaluations and wall time.
"""

from __future__ import annotations

import random
from typing import Any

from evo.contracts.candidate import Candidate, CandidateError, ParamValue, space_point, space_size
from evo.contracts.mutator_config import SweepConfig
from evo.contracts.records import Individual, Proposal
from mutators.base import MutationContext, Mutator

MAX_SHUFFLED = 1_000_000  # larger spaces are drawn at random with a seen-set instead of a shuffled list


class SweepMutator(Mutator):
    kind = "sweep"

    def __init__(self, cfg: SweepConfig, *, seed: int) -> None:
        self.cfg = cfg
        self.name = cfg.name or cfg.kind
        self.seed = seed
        self.position = 0  # points handed out so far
        self.total: int | None = None  # points in the seed's SPACE (None: not seen yet)
        self._order: list[int] | None = None
        self._seen: set[int] = set()

    def _space(self, seed: Candidate) -> dict[str, list[ParamValue]]:
        try:
            return seed.space()
        except CandidateError:
            return {}

    def _index(self, k: int) -> int:
        """The k-th point to hand out (an index into the SPACE's grid)."""
        assert self.total is not None
        if self.cfg.order == "grid":
            return k
        if self.total <= MAX_SHUFFLED:
            if self._order is None:
                self._order = list(range(self.total))
                random.Random(f"evo-sweep:{self.seed}").shuffle(self._order)
            return self._order[k]
        rng = random.Random(f"evo-sweep:{self.seed}:{k}")
        while True:
            i = rng.randrange(self.total)
            if i not in self._seen:
                self._seen.add(i)
                return i

    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
        seed = ctx.seed.candidate if ctx.seed is not None else parent.candidate
        space = self._space(seed)
        self.total = space_size(space)
        out: list[Proposal] = []
        while len(out) < self.cfg.per_proposal and self.position < self.total:
            point = space_point(space, self._index(self.position))
            self.position += 1
            params = {**seed.params, **point}
            if params == seed.params:
                continue  # the seed itself is evaluated already
            out.append(Proposal(seed.with_params(**point), self.name, (seed.id,),
                                note=f"sweep ({self.cfg.order}) point {self.position} of {self.total}"))
        return out

    def exhausted(self) -> bool:
        return self.total is not None and self.position >= self.total

    def state(self) -> dict[str, Any]:
        return {"position": self.position, "total": self.total}

    def load_state(self, state: dict[str, Any]) -> None:
        self.position = int(state.get("position", 0))
        total = state.get("total")
        self.total = int(total) if total is not None else None

    def stats(self) -> dict[str, Any]:
        return {"proposed": self.position, "space": self.total, "order": self.cfg.order}
