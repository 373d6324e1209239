"""The campaign driver: islands on Ray (or in this process, `evo.app.run.executor`), generation by
generation, until a budget is reached.

Each round brings every island actor to the next generation (in parallel; the islands' evaluations
share the broker's evaluator actors). After a round: progress, migration every `interval`
generations, a checkpoint every `checkpoint_interval`, the budget check. An island actor that dies
is restarted from the last checkpoint and caught up (its RNG stream is restored, so it re-proposes
what it had proposed and the broker's cache answers without evaluating again); an evaluator actor
that dies is replaced by the broker. A killed driver resumes with `evo run --resume RUN_DIR`.
"""

from __future__ import annotations

import contextlib
import random
import re
import secrets
import time
from typing import Any

from evo.app.run.executor import Session, open_session
from evo.app.run.metrics import CampaignMetrics
from evo.app.run.placement import wait_for_evaluators
from evo.app.run.progress import Display, IslandRow, Totals, duration_words
from evo.app.run.results import individual_summary, standalone_kernel
from evo.app.run.setup import (
    CampaignError,
    CampaignHooks,
    Prepared,
    actor_timeout_s,
    budget_of,
)
from evo.app.run.signals import is_termination, terminate_as_interrupt
from evo.app.run.sweep_ref import sweep_words
from evo.contracts.records import Individual, best_of
from evo.contracts.workload import weighted_shapes_text
from fitness.evaluate import isolation_message
from fitness.latency.stage import target_hardware
from fitness.sandbox.isolation import FULL as FULL_ISOLATION
from islands.actors import IslandSpec, start_broker, start_island
from islands.broker import BrokerSpec
from islands.evaluation import EvaluationStats, nodes_table
from islands.evaluator_actor import EvaluatorSpec
from islands.migration import route, targets
from islands.report import GenerationReport
from islands.runtime import Runtime
from mutators.llm.mutator import NO_REPLY

MAX_RESTORES_PER_ROUND = 3
# A generation without news for this long says what is still in evaluation (a full run at the bench size
# in Triton's interpreter can take many minutes on a CPU)
HEARTBEAT_S = 180.0
CUT_PATIENCE_S = 2.0  # an evaluator busy when the wall-time budget runs out is killed after this
START_TIMEOUT_S = 600.0  # the longest the campaign waits for its first evaluator to start
LEVEL_WORDS = {"quick": "in a quick check", "full": "in its check and latency",
               "verified": "in a full run at the bench size (a new best is verified before it counts)"}
# causes of proposals that never became a candidate, as the progress lines and summary.json count them
PROPOSAL_FAILURE_KINDS = ("llm_request_failed", "no_candidate")
MAX_FAILURES_SAID = 5  # distinct proposal failure reasons shown per session (all are in events.msgpack)


def busy_summary(stats: EvaluationStats, device: str) -> dict[str, Any]:
    """How busy the evaluators' device was in this session: the summary's ``evaluator_busy``."""
    fraction = stats.busy_fraction
    return {"device": device, "busy_fraction": None if fraction is None else round(fraction, 4),
            "slot_s": round(stats.slot_s, 3), "slot_compile_s": round(stats.slot_compile_s, 3),
            "queued_s": round(stats.queued_s, 3), "evaluators": stats.slots, "prepared": stats.prepared,
            "compiled_ahead": stats.warmed, "prepare_s": round(stats.prepare_s, 3)}


def busy_words(busy: dict[str, Any]) -> str:
    """'GPU busy 87% of the time it had work (...)', or '' before any work."""
    fraction = busy.get("busy_fraction")
    if fraction is None:
        return ""
    what = "GPU" if busy.get("device") == "cuda" else "evaluators"
    ahead = f", {busy['compiled_ahead']} of {busy['prepared']} compiled ahead" if busy.get("prepared") else ""
    return (f"{what} busy {100 * fraction:.0f}% of the time they had work (compiling in the timing slot "
            f"{busy['slot_compile_s']:.0f} s{ahead})")


_OOM_USE = re.compile(r"was running was ([\d.]+ ?[KMGT]?B ?/ ?[\d.]+ ?[KMGT]?B)")


def _last_line(e: BaseException) -> str:
    """The error's last line; a built-in exception keeps its type (a KeyError's message alone is a key).
    Ray's out-of-memory kill ends with advice on its settings: its first line and the memory figures say
    what happened."""
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    if type(e).__name__ == "OutOfMemoryError" or "running low on memory" in lines[0]:
        use = _OOM_USE.search(str(e))
        return (f"out of memory: {lines[0].strip()}" + (f" (node memory {use.group(1)} in use)" if use else "")
                + "; give the run more memory or fewer evaluators per node, or stop what else runs there")
    return f"{type(e).__name__}: {lines[-1]}" if type(e).__module__ == "builtins" else lines[-1]


class BudgetCut(Exception):
    """The wall-time budget ran out during a generation (`Campaign._round`)."""

    def __init__(self, generation: int, waited_s: float) -> None:
        super().__init__(f"wall-time budget reached during generation {generation}")
        self.generation, self.waited_s = generation, waited_s


class Campaign:
    """One run of islands on an executor (`ray` or `local`); `run()` returns the summary it wrote."""

    rt: Runtime  # from start()

    def __init__(self, prepared: Prepared, hooks: CampaignHooks, display: Display, executor: str = "ray") -> None:
        self.p, self.cfg, self.store = prepared, prepared.cfg, prepared.store
        self.hooks, self.display = hooks, display
        n = self.cfg.islands.count
        self.generation = 0
        self.elapsed_before = 0.0
        self.llm_usd = 0.0
        self.said_failures: set[str] = set()  # proposal failure reasons already shown (each once, a few)
        self.migration_rng = random.Random(f"evo-migration:{self.cfg.seed}")
        self.rows = [IslandRow(i) for i in range(n)]
        self.initialized = [False] * n
        self.checkpointed = -1
        self.seed_latency_ms: float | None = None
        self.latency_source = ""
        self.executor = executor
        self.session: Session | None = None
        self.broker: Any = None
        self.actors: list[Any] = []
        self.specs: list[IslandSpec] = []
        self.stats = EvaluationStats()
        self.budget = budget_of(self.cfg)
        self.device = ""
        self.status, self.reason = "running", ""
        self.stop_requested = False
        self.abandoned = False  # quit at once (abandon()): the generation in progress is dropped
        self.summary: dict[str, Any] = {}
        self.sandbox = ""  # the evaluation workers' OS isolation, as they reported it
        self.t0 = time.monotonic()
        self.metrics: CampaignMetrics | None = None  # Ray's view of the progress, from start()

    # -- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        self.session = open_session(self.executor, self.cfg)
        self.rt = self.session.runtime
        if self.executor == "ray":
            self.metrics = CampaignMetrics(self.cfg.name, self.store.path.name, warn=self.display.message)
        plan = self.session.plan
        task_spec = self.p.task_files
        ev_spec = EvaluatorSpec(task_spec, self.cfg.evaluation, self.hooks.evaluator_factory,
                                self.hooks.preparer_factory, secrets.token_hex(8) if plan.compile_ahead else "")
        self.broker = start_broker(BrokerSpec(
            ev_spec, plan.count, plan.num_cpus, plan.num_gpus, self.p.task.key, str(self.store.history.path),
            actor_timeout_s(self.cfg, self.p.task), compile_ahead=plan.compile_ahead, follow=plan.follow), self.rt)
        try:
            self.rt.get(self.broker.start.remote())
            infos, _ = wait_for_evaluators(lambda s, known: self.rt.get(self.broker.wait_started.remote(s, known)),
                                           START_TIMEOUT_S, self.display.message)
            self.rt.get(self.broker.begin.remote())
        except TimeoutError as e:
            raise CampaignError(str(e)) from None
        except Exception as e:
            if self.rt.failed(e) or self.rt.died(e):
                raise CampaignError(_last_line(e)) from None
            raise
        self.device = infos[0].device
        self.sandbox = ",".join(sorted({i.sandbox for i in infos if i.sandbox}))
        self.display.message(f"{plan.why}; evaluating on {self.device}; run directory {self.store.path}")
        task = self.p.task
        if task.workload:
            self.display.message(f"workload {task.workload}: fitness over {len(task.fitness_sizes())} shapes, "
                                 f"{weighted_shapes_text(task)}")
        weak = next((i for i in infos if i.sandbox and i.sandbox != FULL_ISOLATION), None)
        if weak is not None:
            self.display.message(isolation_message(weak.sandbox, list(weak.sandbox_problems)))
        self.store.events.repair()
        self.store.events.append({"kind": "resume" if self.p.resumed else "start", "time": time.time(),
                                  "evaluators": [vars(i) for i in infos], "notes": self.p.notes})
        isl = self.cfg.islands
        hardware = target_hardware(self.cfg.evaluation, self.device, infos[0].gpu_name)
        self.specs = [IslandSpec(
            i, isl, hardware, task_spec, self.p.mutators, self.cfg.selection, self.cfg.seed,
            str(self.store.path), self.hooks.mutator_factory) for i in range(isl.count)]
        cp = self.store.latest_checkpoint() if self.p.resumed else None
        if cp is not None:
            d = cp.driver
            self.generation, self.elapsed_before, self.llm_usd = d["generation"], d["elapsed_s"], d["llm_usd"]
            version, internal, gauss = d["migration_rng"]
            self.migration_rng.setstate((version, tuple(internal), gauss))
            self.rows = [IslandRow(**r) for r in d["rows"]]
            self.seed_latency_ms, self.latency_source = d["seed_latency_ms"], d["latency_source"]
            self.checkpointed = cp.generation
            self.display.message(f"resuming from the checkpoint of generation {cp.generation}")
        self.actors = [start_island(spec, self.broker, self.rt, cp.islands.get(i) if cp else None)
                       for i, spec in enumerate(self.specs)]
        self.initialized = [cp is not None and i in cp.islands for i in range(isl.count)]

    # -- rounds --------------------------------------------------------------------------------

    def _advance(self, i: int) -> Any:
        actor = self.actors[i]
        return actor.step.remote() if self.initialized[i] else actor.initialize.remote(self.p.seed)

    def _restore(self, i: int, error: BaseException) -> None:
        cp = self.store.latest_checkpoint()
        state = cp.islands.get(i) if cp else None
        self.actors[i] = start_island(self.specs[i], self.broker, self.rt, state)
        self.initialized[i] = state is not None
        self.rows[i].restored += 1
        origin = f"the checkpoint of generation {cp.generation}" if state is not None and cp else "scratch"
        self.display.message(f"island {i} died ({_last_line(error)}); restored from {origin}")
        self.store.events.append({"kind": "island_restored", "island": i, "time": time.time(),
                                  "from_generation": cp.generation if state is not None and cp else None,
                                  "error": _last_line(error)})

    def _round(self, target: int) -> list[GenerationReport]:
        """Bring every island to generation `target` (0: initialize)."""
        pending = {self._advance(i): i for i in range(len(self.actors))}
        reports: dict[int, GenerationReport] = {}
        restores = [0] * len(self.actors)
        since = time.monotonic()
        heartbeat = since + HEARTBEAT_S
        while pending:
            left = self._time_left()
            if left is not None and left <= 0:
                raise BudgetCut(target, time.monotonic() - since)
            wait = heartbeat - time.monotonic() if left is None else min(heartbeat - time.monotonic(), left)
            ref = self.rt.wait_one(list(pending), timeout=max(0.05, wait))
            if ref is None:
                if time.monotonic() >= heartbeat:
                    self._heartbeat(target, sorted(pending.values()), time.monotonic() - since)
                    heartbeat = time.monotonic() + HEARTBEAT_S
                continue
            i = pending.pop(ref)
            try:
                report: GenerationReport = self.rt.get(ref)
            except Exception as e:
                if self.abandoned:
                    raise KeyboardInterrupt from None  # its actors were killed on purpose: restore nothing
                if self.rt.died(e):
                    restores[i] += 1
                    if restores[i] > MAX_RESTORES_PER_ROUND:
                        why = f"island {i} died {restores[i]} times in one generation: {_last_line(e)}"
                        raise CampaignError(why) from None
                    self._restore(i, e)
                    pending[self._advance(i)] = i
                    continue
                if self.rt.failed(e):
                    raise CampaignError(f"island {i}: {_last_line(e)}") from None
                raise
            self.initialized[i] = True
            self._on_report(report)
            if report.generation < target:  # catching up after a restore
                pending[self._advance(i)] = i
            else:
                reports[i] = report
        return [reports[i] for i in range(len(self.actors))]

    def _time_left(self) -> float | None:
        """Seconds left of the wall-time budget (None without one)."""
        if self.budget.wall_time_s is None:
            return None
        return self.budget.wall_time_s - self.elapsed()

    def _cut(self, cut: BudgetCut) -> str:
        """End the generation the wall-time budget ran out in: its evaluations in flight are cut short (the
        actors are ended) and the campaign's results stay those of the last checkpoint; what was evaluated
        meanwhile is in the history, so a resume with a larger budget does not evaluate it again. The
        stop reason."""
        self._final_stats()
        if self.broker is not None:
            with contextlib.suppress(Exception):  # busy evaluators are killed after a moment
                self.rt.get(self.broker.shutdown.remote(CUT_PATIENCE_S), timeout=CUT_PATIENCE_S + 30)
        self._kill_actors()
        self.broker, self.actors = None, []
        budget = self.budget.wall_time_s
        kept = (f"the results are those of generation {self.checkpointed} (its checkpoint)"
                if self.checkpointed >= 0 else "no generation had finished, so there is no result yet")
        self.generation = max(self.checkpointed, 0)
        return (f"wall-time budget reached ({self.elapsed():.0f} s of {budget:.0f} s): generation {cut.generation}, "
                f"{duration_words(cut.waited_s)} in, was cut short; {kept}; evaluations made meanwhile are kept "
                "for --resume")

    def _heartbeat(self, target: int, islands: list[int], waited: float) -> None:
        """Say what a long generation is waiting for."""
        try:
            running = self.rt.get(self.broker.in_flight.remote(), timeout=30)
        except Exception:  # the broker is busy or gone: the round's own waiting will tell
            running = []
        which = f"island{'s' if len(islands) > 1 else ''} {', '.join(map(str, islands))}"
        text = f"generation {target} in progress for {duration_words(waited)} ({which}): "
        if running:
            cid, level, seconds, estimate = running[0]
            text += (f"{len(running)} candidate{'s' if len(running) > 1 else ''} in evaluation; the longest, {cid}, "
                     f"{LEVEL_WORDS.get(level, level)}, for {duration_words(seconds)}")
            if estimate:
                text += f" (the latency model estimated about {duration_words(estimate)} of CPU for it)"
        else:
            text += "no candidate in evaluation (the islands are proposing: mutators, LLM requests)"
        self.display.message(text)

    def _on_report(self, r: GenerationReport) -> None:
        row = self.rows[r.island]
        row.generation, row.population = r.generation, r.population
        row.best_latency_ms, row.best_speedup = r.best_latency_ms, r.best_speedup
        row.evaluations += r.evaluations + r.inner_evaluations
        for k, v in r.failures.items():
            row.failures[k] = row.failures.get(k, 0) + v
        self.llm_usd += r.llm_usd
        self.seed_latency_ms = r.seed_latency_ms
        self.latency_source = r.best_latency_source or self.latency_source
        self.stats = self.rt.get(self.broker.get_stats.remote())
        for f in r.failed_proposals:
            key = PROPOSAL_FAILURE_KINDS[0] if f.note == NO_REPLY else PROPOSAL_FAILURE_KINDS[1]
            row.failures[key] = row.failures.get(key, 0) + 1
            self.store.events.append({"kind": "proposal_failed", "island": r.island, "generation": r.generation,
                                      "mutator": f.mutator, "parents": list(f.parents), "error": f.error})
            if f.error not in self.said_failures and len(self.said_failures) < MAX_FAILURES_SAID:
                self.said_failures.add(f.error)  # the counts say how often; this says why (an endpoint down)
                self.display.message(f"island {r.island}: {f.mutator} proposal failed: {f.error}")
        totals = self._totals()
        self.display.update(row, self.rows, totals)
        if self.metrics is not None:
            self.metrics.record(totals)

    def _totals(self) -> Totals:
        speedups = [r.best_speedup for r in self.rows if r.best_speedup is not None]
        latencies = [r.best_latency_ms for r in self.rows if r.best_latency_ms is not None]
        failures = {**self.stats.failures, **self.proposal_failures()}
        return Totals(self.stats.evaluations, failures, self.stats.cache_hits, self.llm_usd, self.elapsed(),
                      min(latencies, default=None), max(speedups, default=None),
                      self.latency_source, len(self.stats.evaluators), self.stats.replaced, self.stats.busy_fraction)

    def proposal_failures(self) -> dict[str, int]:
        """Proposals that never became a candidate, by cause (an LLM request that failed, or a reply or
        edit that gave no module), counted with the evaluation failures in the progress lines."""
        out: dict[str, int] = {}
        for row in self.rows:
            for k in PROPOSAL_FAILURE_KINDS:
                if row.failures.get(k):
                    out[k] = out.get(k, 0) + row.failures[k]
        return out

    def elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self.t0

    # -- between generations -------------------------------------------------------------------

    def _migrate(self) -> None:
        m = self.cfg.islands.migration
        if len(self.actors) < 2 or m.top_k == 0 or self.generation == 0 or self.generation % m.interval:
            return
        emigrants: list[list[Individual]] = self.rt.get([a.emigrants.remote(m.top_k) for a in self.actors])
        to = targets(m.topology, len(self.actors), self.migration_rng)
        inbound = route(emigrants, to, key=lambda ind: ind.id)
        stayed = self.rt.get([a.immigrate.remote(arrivals) for a, arrivals in zip(self.actors, inbound)])
        self.store.events.append({"kind": "migration", "generation": self.generation, "time": time.time(),
                                  "topology": m.topology, "targets": to,
                                  "arrivals": [[ind.id for ind in a] for a in inbound], "stayed": stayed})

    def _best(self) -> Individual | None:
        return best_of(b for b in self.rt.get([a.best.remote() for a in self.actors]) if b is not None)

    def _checkpoint(self) -> None:
        states = self.rt.get([a.checkpoint.remote() for a in self.actors])
        self.store.write_checkpoint(self.generation, {
            "generation": self.generation, "elapsed_s": self.elapsed(), "llm_usd": self.llm_usd,
            "migration_rng": [self.migration_rng.getstate()[0], list(self.migration_rng.getstate()[1]), None],
            "rows": [vars(r).copy() for r in self.rows], "seed_latency_ms": self.seed_latency_ms,
            "latency_source": self.latency_source,
        }, dict(enumerate(states)))
        self.checkpointed = self.generation
        self._write_results()

    def stop_reason(self) -> str | None:
        b, t = self.budget, self._totals()
        if b.generations is not None and self.generation >= b.generations:
            return f"generation budget reached ({b.generations})"
        if b.evaluations is not None and t.evaluations >= b.evaluations:
            return f"evaluation budget reached ({t.evaluations} >= {b.evaluations})"
        if b.wall_time_s is not None and t.elapsed_s >= b.wall_time_s:
            return f"wall-time budget reached ({t.elapsed_s:.0f} s >= {b.wall_time_s:.0f} s)"
        if b.llm_usd is not None and self.llm_usd >= b.llm_usd:
            return f"LLM budget reached (${self.llm_usd:.2f} >= ${b.llm_usd:.2f})"
        if b.target_speedup is not None and t.best_speedup is not None and t.best_speedup >= b.target_speedup:
            return f"target speedup reached ({t.best_speedup:.2f}x >= {b.target_speedup}x)"
        return None

    def _after_generation(self) -> None:
        for event in self.rt.get(self.broker.drain_events.remote()):
            self.store.events.append(event)
            if event.get("kind") == "evaluator_replaced":
                self.display.message(f"{event['dead']} replaced by {event['replacement']}: {event['why']}")
            elif event.get("kind") == "node_lost":
                had = ", ".join(event.get("evaluators") or []) or "no evaluator"
                self.display.message(f"node {str(event['node'])[:8]} lost (it had {had}); its work runs elsewhere")
            elif event.get("kind") == "evaluator_joined":
                self.display.message(f"{event['name']} joined on node {str(event['node'])[:8]} "
                                     f"({event['evaluators']} evaluator(s) now)")
            else:  # a compile-ahead preparer that did not start or was dropped: evaluation goes on without it
                self.display.message(f"{event.get('kind', 'event')}: {event.get('name')}: {event.get('why')}")
        self._migrate()
        self.store.events.append({"kind": "generation", "generation": self.generation, "time": time.time(),
                                  "evaluations": self.stats.evaluations, "best_speedup": self._totals().best_speedup,
                                  "llm_usd": self.llm_usd, "elapsed_s": self.elapsed()})
        if self.generation % self.cfg.checkpoint_interval == 0:
            self._checkpoint()

    # -- the run -------------------------------------------------------------------------------

    def advance(self) -> None:
        """One generation on every island (the first: the seed and draws from its SPACE)."""
        if all(self.initialized):
            self.generation += 1
        reports = self._round(self.generation)
        bad = next((r for r in reports if not r.seed_ok), None)
        if bad is not None:
            raise CampaignError(f"the task's seed kernel is rejected on {self.device}: {bad.seed_reason}")
        self._after_generation()

    def run(self) -> dict[str, Any]:
        """Start, advance until a budget is reached, finish; returns the summary."""
        if self.abandoned:  # quit before it started: nothing to write (its run directory stays as it was)
            self.status, self.reason = "interrupted", "quit before it started; continue with --resume"
            return {"status": self.status, "stop_reason": self.reason}
        try:
            self.start()
            if self.abandoned:
                raise KeyboardInterrupt  # abandoned while starting
            with terminate_as_interrupt():  # in the main thread (`evo run`), after start()'s ray.init
                if not all(self.initialized):
                    self.advance()
                while (reason := self.stop_reason()) is None:
                    if self.stop_requested:
                        raise KeyboardInterrupt
                    self.advance()
            self.finish("finished", reason)
        except BudgetCut as cut:
            self.finish("finished", self._cut(cut))
        except BaseException as e:
            if self.abandoned:  # whatever the killed actors made of the generation in progress
                self.finish("interrupted", f"quit during generation {self.generation}; continue with --resume "
                            "(from the last checkpoint)")
            elif is_termination(e):
                self.finish("interrupted", f"terminated (SIGTERM) during generation {self.generation}; continue "
                            "with --resume (from the last checkpoint)")
            elif isinstance(e, KeyboardInterrupt):
                self.finish("interrupted", "interrupted; continue with --resume")
            else:
                self.finish("failed", _last_line(e))
                raise
        return self.summary

    def request_stop(self) -> None:
        """Stop after the generation in progress, as an interrupt does (from another thread; the run
        continues with --resume)."""
        self.stop_requested = True

    def abandon(self) -> None:
        """Quit now, as a second Ctrl-C does (from another thread): the run's actors are killed, so the
        generation in progress is dropped and `run()` ends "interrupted"; the run resumes from its last
        checkpoint, and evaluations already written are not done again."""
        self.stop_requested = self.abandoned = True
        if self.session is None:
            return  # not started: run() sees the request before it starts anything more
        self._kill_actors()

    def _kill_actors(self) -> None:
        """End the broker and the island actors at once (the generation in progress is dropped)."""
        for handle in [self.broker, *self.actors]:
            if handle is not None:
                with contextlib.suppress(Exception):  # dead already, or Ray gone
                    self.rt.kill(handle)

    def finish(self, status: str, reason: str) -> None:
        """Write the final checkpoint (when finished), summary and stop event; end the actors."""
        if self.status != "running":
            return  # finished already (an error while finishing lands here a second time)
        self.status, self.reason = status, reason
        try:
            if status == "finished" and self.checkpointed != self.generation and self.actors:
                self._checkpoint()  # also writes the best kernel
            # when interrupted, islands may be mid-generation: the last checkpoint stands
            self._final_stats()
            self.summary = self._summary(None)
            self.store.write_summary(self.summary)
            self.store.events.append({"kind": "stop", "status": status, "reason": reason,
                                      "generation": self.generation, "time": time.time()})
            busy = busy_words(self.summary["evaluator_busy"])
            self.display.message(f"{status}: {reason}; {busy + '; ' if busy else ''}results in {self.store.path}")
            if compared := sweep_words(self.summary):
                self.display.message(compared)
        finally:
            self.display.close()
            self._shutdown()

    def _over_budget(self) -> float | None:
        """Seconds the session ran past its wall-time budget (0 when within it; None without one)."""
        left = self._time_left()
        return None if left is None else round(max(0.0, -left), 3)

    def _final_stats(self) -> None:
        """The broker's figures as the session ends (the last island report may predate work other islands
        did since); the last ones known when the broker is gone or does not answer."""
        if self.broker is None or self.abandoned:
            return
        try:
            self.stats = self.rt.get(self.broker.get_stats.remote(), timeout=30)
        except Exception:  # killed or hung: the figures of the last report stand
            pass

    def _write_results(self) -> None:
        best = self._best()
        if best is not None:
            self.store.write_best(standalone_kernel(best, campaign=self.cfg.name, task=self.p.task.name,
                                                    seed_latency_ms=self.seed_latency_ms))
        self.store.write_summary(self._summary(best))

    def _summary(self, best: Individual | None) -> dict[str, Any]:
        previous = self.store.summary() or {}
        best_d = individual_summary(best, self.seed_latency_ms) if best else previous.get("best")
        return {
            "name": self.cfg.name, "status": self.status, "stop_reason": self.reason,
            "task": self.p.task.name, "task_key": self.p.task.key, "workload": self.p.task.workload,
            "bench_tag": self.p.task.bench_tag, "device": self.device, "sandbox": self.sandbox,
            "latency_source": self.latency_source or None, "generation": self.generation,
            "islands": len(self.rows), "evaluations": self.stats.evaluations,
            "evaluations_by_level": dict(self.stats.fresh), "failures": dict(self.stats.failures),
            "proposal_failures": self.proposal_failures(),
            "cache_hits": self.stats.cache_hits, "llm_usd": self.llm_usd, "wall_time_s": round(self.elapsed(), 3),
            "wall_time_over_budget_s": self._over_budget(),
            "seed": {"id": self.p.seed.id, "latency_ms": self.seed_latency_ms}, "best": best_d,
            "evaluators": [vars(e) for e in self.stats.evaluators], "evaluators_replaced": self.stats.replaced,
            "evaluator_busy": busy_summary(self.stats, self.device),
            "nodes": nodes_table(self.stats.tallies, time.time()),
            "islands_restored": sum(r.restored for r in self.rows),
            "per_island": [vars(r).copy() for r in self.rows], "run_dir": str(self.store.path),
        }

    def _shutdown(self) -> None:
        if self.session is None:
            return
        if self.broker is not None:
            try:
                self.rt.get(self.broker.shutdown.remote(), timeout=60)
            except Exception:
                pass  # killed below either way
            self.rt.kill(self.broker)
        for a in self.actors:
            self.rt.kill(a)
        self.session.close()
