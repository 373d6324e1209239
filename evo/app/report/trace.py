"""A run's best-so-far speedup over its evaluations: the anytime curve and who made each gain.

The speedup of a correct, fully evaluated kernel is the seed's latency over its latency (both from
the same source, measured or modelled; modelled, by the seed's model version, so evaluators with other
model code compare nothing). The best so far starts at 1 when the seed is evaluated and rises at each
*step*: a full evaluation faster than every earlier one. A step's gain is
ln(new / previous); a mutator's share of the improvements is its steps' gain over all steps' gain
(the initial population's draws from the seed's SPACE count as `initial`). Quick evaluations (inside
a mutator, on fewer sizes) never count: they are not proof of correctness, and neither does a kernel
that failed verification (level ``verified``, a full run at every bench size) anywhere in the run.
Ties go to the earliest evaluation, as in `evo.contracts.records.best_of`, so the report, the summary
and ``best_kernel.py`` name one kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from evo.app.report.data import Record, RunData
from evo.contracts.verdict import VERIFIED
from fitness.latency.model_version import version_of

INITIAL = "initial"  # the generation-0 draws from the seed's SPACE (origin mutator "seed")


def credit(mutator: str) -> str:
    return INITIAL if mutator in ("seed", "") else mutator


@dataclass(frozen=True)
class Step:
    record: Record
    speedup: float
    previous: float

    @property
    def gain(self) -> float:
        return math.log(self.speedup / self.previous)

    @property
    def mutator(self) -> str:
        return credit(self.record.proposal.mutator)


@dataclass(frozen=True)
class Trace:
    """The best-so-far curve of one run; `None` speedups where the seed has no latency."""

    run: RunData
    seed_latency_ms: float | None
    latency_source: str  # "cuda", "model" or "" (no latency)
    start: Record | None  # the seed's evaluation (speedup 1)
    steps: tuple[Step, ...]
    model_version: str = ""  # the latency model that timed the seed (model source; "" if not recorded)

    @property
    def evaluations(self) -> int:
        return len(self.run.records)

    @property
    def wall_time_s(self) -> float:
        return self.run.wall_time_s

    @property
    def best_speedup(self) -> float | None:
        if self.start is None:
            return None
        return self.steps[-1].speedup if self.steps else 1.0

    def speedup(self, r: Record) -> float | None:
        """`r`'s speedup over this run's seed (`speedup_of` with the seed's latency, source and model version)."""
        return speedup_of(r, self.seed_latency_ms, self.latency_source, self.model_version)

    def first_reaching(self, speedup: float) -> Record | None:
        """The evaluation where the best so far first reached `speedup` (None: never)."""
        if self.start is not None and speedup <= 1.0:
            return self.start
        return next((s.record for s in self.steps if s.speedup >= speedup * (1 - 1e-12)), None)

    def best_at(self, xs: Sequence[float], *, by: str) -> list[float]:
        """The best so far after `x` evaluations (by="evaluations") or seconds (by="time"): 1 (the
        seed's) until the first improvement, the last value past the run's end; NaN without a timed seed."""
        if self.start is None:
            return [math.nan for _ in xs]
        pts = [(self._x(s.record, by), s.speedup) for s in self.steps]
        out = []
        for x in xs:
            value = 1.0
            for px, sp in pts:
                if px <= x:
                    value = sp
                else:
                    break
            out.append(value)
        return out

    def start_x(self, by: str) -> float:
        """Where the curve starts: the seed's evaluation."""
        return self._x(self.start, by) if self.start is not None else math.nan

    @staticmethod
    def _x(r: Record, by: str) -> float:
        return float(r.index) if by == "evaluations" else r.elapsed_s

    def shares(self) -> dict[str, float]:
        """Each mutator's share of the log-speedup gained (sums to 1; empty without a gain)."""
        gains: dict[str, float] = {}
        for s in self.steps:
            gains[s.mutator] = gains.get(s.mutator, 0.0) + s.gain
        total = sum(gains.values())
        return {m: g / total for m, g in sorted(gains.items())} if total > 0 else {}


def speedup_of(r: Record, seed_latency_ms: float | None, source: str, model_version: str = "") -> float | None:
    """The speedup over the seed of a correct, fully evaluated kernel timed like the seed (the same
    source; modelled, by the same model version)."""
    ev = r.evaluation
    if not (r.full and ev.ok) or ev.latency_ms is None or ev.latency_ms <= 0 or seed_latency_ms is None:
        return None
    if (ev.latency_source.value if ev.latency_source else "") != source:
        return None
    if source == "model" and model_version and version_of(ev.latency_detail) != model_version:
        return None  # (a seed without a recorded version, from before versions were kept, compares as it did)
    return seed_latency_ms / ev.latency_ms


def trace_of(run: RunData) -> Trace:
    seed = run.seed_record
    ev = seed.evaluation if seed else None
    if seed is None or ev is None or not ev.ok or ev.latency_ms is None:
        return Trace(run, None, "", None, ())
    source = ev.latency_source.value if ev.latency_source else ""
    version = version_of(ev.latency_detail) if source == "model" else ""
    # a kernel that failed verification left its island for good: it was never the run's best
    rejected = {r.candidate.id for r in run.records if r.evaluation.level == VERIFIED and not r.evaluation.ok}
    best, steps = 1.0, []
    for r in run.records:
        if r.index <= seed.index or r.candidate.id in rejected:
            continue
        s = speedup_of(r, ev.latency_ms, source, version)
        if s is not None and s > best * (1 + 1e-9):
            steps.append(Step(r, s, best))
            best = s
    return Trace(run, ev.latency_ms, source, seed, tuple(steps), version)
