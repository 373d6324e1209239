"""Operator selection inside an island: which mutator proposes next (pure logic, no I/O).

One *pull* of a mutator is one `propose` call; its outcomes are the proposals it returned, each
with its full evaluation. The reward of a pull is

    reward = sum_i improvement_i / max(sum_i cost_i, 1 ms)

where, for proposal i with parent latency P and child latency C (ms),

    improvement_i = ln(P / C)  if the child is correct and C < P (a 2x speedup is ln 2 = 0.69)
                  = 1          if the child is correct with a latency and the parent had none
                                (a fix of a failing or unmeasured parent counts as an e-fold gain)
                  = 0          otherwise (wrong, invalid, slower, or unmeasured)
    cost_i        = evaluation seconds (the proposal's own time, its inner checks, its full
                    check) + dollars * seconds_per_usd (so LLM spending weighs like device time).

A pull that proposes nothing has reward 0. Policies:

- fixed: each mutator chosen with probability proportional to its configured weight (ablations);
- ucb1: the mutator with the highest mean reward / r_max + c * sqrt(ln N / n), where r_max is the
  largest pull reward seen so far (so values lie in [0, 1]), N all pulls, n this mutator's pulls;
  every mutator is pulled once first, in the given order;
- thompson: Beta-Bernoulli sampling with fractional updates: a pull adds r / r_max to the
  mutator's alpha and 1 - r / r_max to its beta (priors `prior_alpha`, `prior_beta`); every
  mutator is pulled once first, as with ucb1.

A pull counts from the moment it is chosen: an island chooses a whole generation's pulls before it
records their outcomes, and a mutator chosen but not yet recorded is not "never pulled".

`OperatorStats` keeps the per-mutator figures for reports (proposals, valid, correct,
improvements, cost); `elite_share` computes each mutator's share of the elite from lineage.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from evo.contracts.mutator_config import SelectionConfig
from evo.contracts.records import Proposal
from evo.contracts.verdict import Evaluation, Status

MIN_COST_S = 1e-3


@dataclass(frozen=True)
class Outcome:
    """What one proposal came to: validity, correctness, latencies and cost."""

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
        if not self.correct or self.child_latency_ms is None or not math.isfinite(self.child_latency_ms):
            return 0.0
        p = self.parent_latency_ms
        if p is None or not math.isfinite(p) or p <= 0:
            return 1.0
        return math.log(p / self.child_latency_ms) if self.child_latency_ms < p else 0.0

    def cost(self, seconds_per_usd: float) -> float:
        return self.cost_s + self.cost_usd * seconds_per_usd


def pull_reward(outcomes: Sequence[Outcome], seconds_per_usd: float) -> float:
    """The reward of one pull (see the module docstring)."""
    if not outcomes:
        return 0.0
    cost = sum(o.cost(seconds_per_usd) for o in outcomes)
    return sum(o.improvement() for o in outcomes) / max(cost, MIN_COST_S)


@dataclass
class OperatorStats:
    """Per-mutator figures for reports and for the bandit."""

    pulls: int = 0
    proposals: int = 0
    valid: int = 0
    correct: int = 0
    improvements: int = 0
    cost_s: float = 0.0
    cost_usd: float = 0.0
    reward_sum: float = 0.0
    alpha: float = 0.0  # Thompson's successes (fractional)
    beta: float = 0.0  # and failures

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OperatorStats:
        return cls(**{f.name: type(getattr(cls(), f.name))(d[f.name]) for f in fields(cls) if f.name in d})


class Selector(ABC):
    """Chooses a mutator by name and learns from the outcomes of its pulls."""

    def __init__(self, names: Sequence[str], cfg: SelectionConfig) -> None:
        if not names:
            raise ValueError("operator selection needs at least one mutator")
        if len(set(names)) != len(names):
            raise ValueError(f"mutator names must be unique (got {list(names)}); set `name:` on repeated kinds")
        self.names = list(names)
        self.seconds_per_usd = cfg.seconds_per_usd
        self.table = {n: OperatorStats() for n in names}
        self.r_max = 0.0
        self.pending: Counter[str] = Counter()  # chosen, outcome not yet recorded (a generation's batch)

    def choose(self, rng: random.Random, available: Sequence[str] | None = None) -> str:
        """The next mutator among `available` (default all; pass the ones not exhausted). Pulls chosen but
        not yet recorded count as pulls, so a generation that chooses several times before it records
        spreads its first choices over the mutators never pulled."""
        pool = [n for n in (self.names if available is None else available) if n in self.table]
        if not pool:
            raise ValueError(f"no mutator available to choose from (known: {', '.join(self.names)})")
        name = self._choose(rng, pool)
        self.pending[name] += 1
        return name

    def pulls(self, name: str) -> int:
        """Recorded and pending pulls of `name`."""
        return self.table[name].pulls + self.pending[name]

    def never_pulled(self, pool: Sequence[str]) -> str | None:
        """The first mutator of `pool` with no pull at all, recorded or pending."""
        return next((n for n in pool if self.pulls(n) == 0), None)

    @abstractmethod
    def _choose(self, rng: random.Random, pool: list[str]) -> str: ...

    def record(self, name: str, outcomes: Sequence[Outcome]) -> float:
        """Account one pull of `name`; returns its reward."""
        s = self.table[name]
        if self.pending[name] > 0:
            self.pending[name] -= 1
        reward = pull_reward(outcomes, self.seconds_per_usd)
        self.r_max = max(self.r_max, reward)
        s.pulls += 1
        s.proposals += len(outcomes)
        s.valid += sum(o.valid for o in outcomes)
        s.correct += sum(o.correct for o in outcomes)
        s.improvements += sum(o.improvement() > 0 for o in outcomes)
        s.cost_s += sum(o.cost_s for o in outcomes)
        s.cost_usd += sum(o.cost_usd for o in outcomes)
        s.reward_sum += reward
        scaled = reward / self.r_max if self.r_max > 0 else 0.0
        s.alpha += scaled
        s.beta += 1.0 - scaled
        return reward

    def state(self) -> dict[str, Any]:
        return {"r_max": self.r_max, "table": {n: s.as_dict() for n, s in self.table.items()}}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.r_max = float(state.get("r_max", 0.0))
        for n, d in dict(state.get("table", {})).items():
            if n in self.table:
                self.table[n] = OperatorStats.from_dict(d)


class FixedWeights(Selector):
    def __init__(self, weights: Mapping[str, float], cfg: SelectionConfig) -> None:
        super().__init__(list(weights), cfg)
        if any(w < 0 for w in weights.values()):
            raise ValueError(f"mutator weights must be >= 0 (got {dict(weights)})")
        self.weights = dict(weights)

    def _choose(self, rng: random.Random, pool: list[str]) -> str:
        w = [self.weights[n] for n in pool]
        if sum(w) <= 0:
            raise ValueError(f"every available mutator ({', '.join(pool)}) has weight 0")
        return rng.choices(pool, w)[0]


class UCB1(Selector):
    def __init__(self, names: Sequence[str], cfg: SelectionConfig) -> None:
        super().__init__(names, cfg)
        self.exploration = cfg.exploration

    def _choose(self, rng: random.Random, pool: list[str]) -> str:
        fresh = self.never_pulled(pool)
        if fresh is not None:
            return fresh
        total = sum(self.pulls(n) for n in pool)
        scale = self.r_max if self.r_max > 0 else 1.0

        def score(n: str) -> float:
            s = self.table[n]
            mean = s.reward_sum / s.pulls / scale if s.pulls else 0.0  # only pending pulls: no reward seen yet
            return mean + self.exploration * math.sqrt(math.log(total) / self.pulls(n))

        return max(pool, key=score)


class Thompson(Selector):
    def __init__(self, names: Sequence[str], cfg: SelectionConfig) -> None:
        super().__init__(names, cfg)
        self.prior = (cfg.prior_alpha, cfg.prior_beta)

    def _choose(self, rng: random.Random, pool: list[str]) -> str:
        fresh = self.never_pulled(pool)
        if fresh is not None:
            return fresh
        draws = [rng.betavariate(self.prior[0] + self.table[n].alpha, self.prior[1] + self.table[n].beta)
                 for n in pool]
        return pool[max(range(len(pool)), key=draws.__getitem__)]


def elite_share(creators: Iterable[str]) -> dict[str, float]:
    """Each mutator's share of the elite, given the mutator that created each elite (from lineage;
    the seed and migrants count under whatever name the caller gives them)."""
    counts = Counter(creators)
    total = sum(counts.values())
    return {n: c / total for n, c in sorted(counts.items())} if total else {}


def format_table(selector: Selector, elite: Mapping[str, float] | None = None) -> str:
    """Per-mutator figures as aligned text."""
    cols = ("pulls", "proposals", "valid", "correct", "improvements", "cost_s", "cost_usd")
    width = max(len("mutator"), *map(len, selector.table))
    head = f"{'mutator':<{width}}" + "".join(f"{c:>13}" for c in cols) + ("   elite share" if elite else "")
    lines = [head]
    for n, s in selector.table.items():
        row = "".join(f"{getattr(s, c):>13.4g}" if isinstance(getattr(s, c), float) else f"{getattr(s, c):>13}"
                      for c in cols)
        lines.append(f"{n:<{width}}{row}" + (f"{elite.get(n, 0.0):>14.1%}" if elite else ""))
    return "\n".join(lines)
