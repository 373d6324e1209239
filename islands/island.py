"""One island: a population of evaluated kernels, its mutators, operator selection and RNG stream.

Plain Python (no Ray, no I/O): `islands.actors` wraps it in an actor. One generation:
1. draw `offspring` parents by tournament (DEAP `selTournament`);
2. for each parent the operator selector picks a mutator (one not exhausted), which proposes
   children (it may evaluate candidates itself through the context, e.g. a STOKE chain's quick checks);
3. children not already in the population are evaluated in full, as one batch, through the
   injected `EvaluationService` (which never evaluates an id twice);
4. each mutator observes the verdicts of its proposals; the selector records each pull's outcomes
   (a child already in the population counts as proposing nothing new);
5. replacement keeps the best `population` of parents and correct children (DEAP `selBest`),
   one copy per candidate id, at most `structure_share` of them of one kernel structure while other
   structures are left (`islands.diversity`); the hall of fame, statistics and logbook are DEAP's.
The RNG stream is seeded from the campaign seed and the island index; it survives checkpoints, so a
restored island proposes what the lost one would have, and the shared cache answers for free.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
from deap import tools

from evo.contracts.candidate import Candidate
from evo.contracts.config import IslandsConfig
from evo.contracts.mutator_config import entry_names
from evo.contracts.records import Individual, Proposal, Tier, same_id
from evo.contracts.task import Task
from evo.contracts.verdict import FULL, VERIFIED, Evaluation
from islands.checkpoint import island_state, load_island_state
from islands.diversity import diverse_best, structure_cap
from islands.evaluation import EvaluationService
from islands.report import GenerationReport, Tally
from mutators.base import EvaluateFn, MutationContext, Mutator
from mutators.selection import Outcome, Selector


class IslandError(RuntimeError):
    """The island cannot go on (no correct candidate to breed from)."""


@contextmanager
def _as_global_random(rng: random.Random) -> Iterator[None]:
    """DEAP's selectors draw from the `random` module; lend them this island's stream instead."""
    saved = random.getstate()
    random.setstate(rng.getstate())
    try:
        yield
    finally:
        rng.setstate(random.getstate())
        random.setstate(saved)


def _latency(ind: Individual) -> float:
    return float(ind.latency_ms) if ind.latency_ms is not None else float("inf")


class Island:
    """A population evolving by tournament selection, mutation and (mu + lambda) replacement."""

    def __init__(
        self, index: int, cfg: IslandsConfig, *, task: Task, mutators: Sequence[Mutator], selector: Selector,
        service: EvaluationService, seed: int, hardware: str = "",
    ) -> None:
        """`hardware` describes the target GPU to the mutators (the LLM's prompt)."""
        if not mutators:
            raise IslandError("an island needs at least one mutator")
        self.index = index
        self.cfg = cfg
        self.hardware = hardware
        self.task = task
        self.mutators = list(mutators)
        self.names = entry_names(self.mutators)
        self.by_name = dict(zip(self.names, self.mutators))
        self.selector = selector
        self.service = service
        self.rng = random.Random(f"evo-island:{seed}:{index}")
        self.generation = 0
        self.population: list[Individual] = []
        self.seed: Individual | None = None
        self.hof = tools.HallOfFame(cfg.hall_of_fame, similar=same_id)
        self.logbook = tools.Logbook()
        self.stats = tools.Statistics(key=_latency)
        for name, fn in (("min", np.min), ("median", np.median), ("max", np.max)):
            self.stats.register(name, lambda xs, fn=fn: float(fn(xs)))  # plain floats: checkpoints are msgpack
        self.recent_failures: deque[Individual] = deque(maxlen=cfg.recent_failures)
        self.verified: set[str] = set()  # ids that passed a full run at every bench size
        self.rejected: set[str] = set()  # ids that did not: never admitted again

    # -- generations ---------------------------------------------------------------------------

    def initialize(self, seed: Candidate) -> GenerationReport:
        """Generation 0: the seed and, if it passes, up to `population - 1` distinct draws from its SPACE."""
        tally = Tally()
        [first] = self._evaluate([self._stamp(Proposal(seed, "seed"))], FULL, tally)
        self.seed = first
        if not self.seed.evaluation.ok:
            return self._finish(tally)  # nothing to breed from; the report says why
        draws = self._space_draws(seed, self.cfg.population - 1)
        evaluated = [self.seed, *self._evaluate([self._stamp(Proposal(c, "seed")) for c in draws], FULL, tally)]
        self.population = self._survivors([i for i in evaluated if i.evaluation.ok])
        tally.accepted = len(self.population)
        return self._finish(tally)

    def step(self) -> GenerationReport:
        """One generation; see the module docstring."""
        if not self.population:
            raise IslandError(f"island {self.index} has no correct candidate to breed from")
        self.generation += 1
        tally = Tally()
        with _as_global_random(self.rng):
            parents = tools.selTournament(self.population, self.cfg.offspring, self.cfg.tournament_size)
        pulls: list[tuple[str, Individual, list[Proposal]]] = []
        for parent in parents:
            available = [n for n in self.names if not self.by_name[n].exhausted()]
            if not available:
                break  # every mutator is spent (e.g. an LLM budget): the population stands
            name = self.selector.choose(self.rng, available)
            pulls.append((name, parent, self._propose(name, parent, tally)))
        # one full evaluation per new candidate id, all of them as one batch
        members = {i.id: i for i in self.population}
        first: dict[str, Proposal] = {}
        for _, _, proposals in pulls:
            for p in proposals:
                if p.candidate is not None and p.candidate.id not in members:
                    first.setdefault(p.candidate.id, p)
        children = self._evaluate(list(first.values()), FULL, tally)
        verdicts = {c.id: c.evaluation for c in children}
        for name, parent, proposals in pulls:
            self.selector.record(name, [self._settle(name, parent, p, members, verdicts, first, tally)
                                        for p in proposals])
        self.population = self._survivors(self.population + [c for c in children
                                                             if c.evaluation.ok and c.id not in self.rejected])
        tally.accepted = sum(1 for i in self.population if i.id not in members)
        return self._finish(tally)

    def _propose(self, name: str, parent: Individual, tally: Tally) -> list[Proposal]:
        ctx = MutationContext(
            task=self.task, rng=self.rng, evaluate=self._inner_evaluate(name, parent, tally),
            elites=list(self.hof), population=list(self.population), recent_failures=list(self.recent_failures),
            seed=self.seed, hardware=self.hardware,
        )
        start = time.monotonic()
        try:
            proposals = list(self.by_name[name].propose(parent, ctx))
        except Exception as e:  # a mutator's bug is reported like any failed proposal, never fatal
            proposals = [Proposal(None, name, (parent.id,), error=f"{type(e).__name__}: {e}",
                                  cost_s=time.monotonic() - start)]
        tally.proposals += len(proposals)
        tally.llm_usd += sum(p.cost_usd for p in proposals)
        return [self._stamp(replace(p, mutator=name), parent) for p in proposals]

    def _stamp(self, p: Proposal, parent: Individual | None = None) -> Proposal:
        """`p` with this island, this generation and (when it names none) its parent. Proposals carry
        the island's name of their mutator (numbered when a kind repeats)."""
        parents = p.parents or ((parent.id,) if parent is not None else ())
        return replace(p, parents=parents, island=self.index, generation=self.generation)

    def _settle(
        self, name: str, parent: Individual, p: Proposal, members: dict[str, Individual],
        verdicts: dict[str, Evaluation], first: dict[str, Proposal], tally: Tally,
    ) -> Outcome:
        """Feed one proposal's verdict back to its mutator; its outcome for the selector."""
        if p.candidate is None:
            tally.failed_proposals.append(p)
            return Outcome.of(p, None, parent.latency_ms)
        cid = p.candidate.id
        evaluation = members[cid].evaluation if cid in members else verdicts[cid]
        try:
            self.by_name[name].observe(p, evaluation)
        except Exception:
            pass  # observing is feedback: a mutator's bug must not lose the verdict
        if cid in members or first[cid] is not p:
            tally.duplicates += 1
            return Outcome(True, evaluation.ok, parent.latency_ms, None, p.cost_s, p.cost_usd)
        if not evaluation.ok:
            self.recent_failures.append(Individual(p, evaluation))
        return Outcome.of(p, evaluation, parent.latency_ms)

    def _inner_evaluate(self, name: str, parent: Individual, tally: Tally) -> EvaluateFn:
        def evaluate(candidate: Candidate, level: str) -> Evaluation:
            proposal = self._stamp(Proposal(candidate, name, note="inner"), parent)
            [answer] = self.service.evaluate_many([proposal], level)
            tally.inner += int(answer.fresh)
            tally.hits += int(not answer.fresh)
            return answer.individual.evaluation

        return evaluate

    def _evaluate(self, proposals: list[Proposal], level: str, tally: Tally) -> list[Individual]:
        answers = self.service.evaluate_many(proposals, level) if proposals else []
        for a in answers:
            if a.fresh:
                tally.evaluations += 1
                if not a.individual.evaluation.ok:
                    status = a.individual.evaluation.status.value
                    tally.failures[status] = tally.failures.get(status, 0) + 1
            else:
                tally.hits += 1
        # the population holds this island's proposals: lineage as proposed here, the verdict as recorded
        return [Individual(p, a.individual.evaluation, seconds=a.individual.seconds,
                           evaluator=a.individual.evaluator, time=a.individual.time)
                for p, a in zip(proposals, answers)]

    def _space_draws(self, seed: Candidate, n: int) -> list[Candidate]:
        try:
            space = seed.space()
        except ValueError:
            return []  # an unreadable SPACE is the lint stage's to report, on the seed itself
        space = {k: v for k, v in space.items() if v}
        out: dict[str, Candidate] = {seed.id: seed}
        for _ in range(20 * n):
            if len(out) > n or not space:
                break
            c = seed.with_params(**{k: self.rng.choice(v) for k, v in sorted(space.items())})
            out.setdefault(c.id, c)
        return [c for cid, c in out.items() if cid != seed.id][:n]

    def _survivors(self, pool: Sequence[Individual]) -> list[Individual]:
        unique: dict[str, Individual] = {}
        for ind in pool:
            unique.setdefault(ind.id, ind)  # incumbents first: on equal fitness they stay
        cap = structure_cap(self.cfg.population, self.cfg.structure_share)
        return diverse_best(list(unique.values()), self.cfg.population, cap)

    def _admit_best(self, tally: Tally) -> None:
        """Update the hall of fame; its head, the island's best, must have passed a full run at every bench
        size (`VERIFIED`) before it counts. A best that fails it leaves the population and the hall of
        fame for good, and the next one is checked. The task's seed is the user's own kernel: trusted."""
        self.hof.update(self.population)
        while len(self.hof):
            best = self.hof[0]
            if best.id in self.verified or (self.seed is not None and best.id == self.seed.id):
                return
            [checked] = self._evaluate([best.proposal], VERIFIED, tally)
            if checked.evaluation.ok:
                self.verified.add(best.id)
                return
            self.rejected.add(best.id)
            self.population = [i for i in self.population if i.id != best.id]
            keep = [i for i in self.hof if i.id != best.id]
            self.hof.clear()
            self.hof.update(keep)
            self.recent_failures.append(checked)
            if not self.population and self.seed is not None:  # the seed (trusted) is what remains to breed from
                self.population = [self.seed]
                self.hof.update(self.population)

    def _finish(self, tally: Tally) -> GenerationReport:
        self._admit_best(tally)
        timed = [i for i in self.population if i.tier is Tier.TIMED]
        record: dict[str, Any] = self.stats.compile(timed) if timed else {}
        self.logbook.record(gen=self.generation, evals=tally.evaluations, inner=tally.inner, hits=tally.hits,
                            pop=len(self.population), accepted=tally.accepted, **record)
        best = self.best()
        seed = self.seed
        return GenerationReport(
            island=self.index, generation=self.generation, evaluations=tally.evaluations,
            inner_evaluations=tally.inner, cache_hits=tally.hits, proposals=tally.proposals,
            duplicates=tally.duplicates, accepted=tally.accepted, failures=dict(tally.failures),
            failed_proposals=tuple(tally.failed_proposals), population=len(self.population),
            best_id=best.id if best else None, best_latency_ms=best.latency_ms if best else None,
            best_latency_source=best.evaluation.latency_source.value
            if best and best.evaluation.latency_source and best.latency_ms is not None else "",
            seed_latency_ms=seed.latency_ms if seed else None, seed_ok=bool(seed and seed.evaluation.ok),
            seed_reason=seed.evaluation.reason if seed else "", llm_usd=tally.llm_usd,
        )

    # -- migration -----------------------------------------------------------------------------

    def best(self) -> Individual | None:
        return self.hof[0] if len(self.hof) else None

    def emigrants(self, k: int) -> list[Individual]:
        """The island's top `k` (copies travel; the island keeps its own)."""
        return list(tools.selBest(self.population, k))

    def immigrate(self, migrants: Sequence[Individual]) -> int:
        """Admit correct migrants not already here; the worst make room. Returns how many stayed."""
        members = {i.id for i in self.population}
        newcomers = [m for m in migrants if m.evaluation.ok and m.id not in members and m.id not in self.rejected]
        self.population = self._survivors(self.population + newcomers)
        self._admit_best(Tally())
        return sum(1 for i in self.population if i.id not in members)

    # -- checkpoints ---------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Everything needed to continue exactly where this island is (msgpack-friendly)."""
        return island_state(self)

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from `state()` of an island with the same index and mutators."""
        load_island_state(self, state)
