"""Optuna tunes a kernel's meta-parameters by ask/tell: one study per kernel structure.

A study is named after the task and the candidate's structure (its source without params), so
every candidate sharing a kernel body shares one study, across islands and across a resume (the
storage keeps it; `load_if_exists`). `propose` asks `trials_per_proposal` trials and returns one
child per trial (the parent's source with the asked params); the island evaluates them in full and
`observe` tells the study: the latency when the child is correct, `TrialState.FAIL` when it is not,
`TrialState.PRUNED` when it is correct but no latency was measured (no objective to report).

With the NSGA-II sampler the study has two objectives, both minimized: latency and the child's
worst error relative to the tolerance (`Evaluation.max_error_ratio`, in [0, 1] for correct
children). That exposes the speed/accuracy trade-off of tile shapes (a longer K block changes the
order of accumulation) as a Pareto front instead of a single best.

Before any sampler draw, a new study receives the parent's own result as a completed trial and is
queued the fastest configs this mutator measured on the task's other structures (`transfer`: a
structure that differs by a hint or a fused loop runs fastest near where its parent did, and
starting it again from the seed's slow PARAMS wastes evaluations), then the module's PARAMS and the
known-good configs whose names match (`known_configs`). A config already tried in the study is told
its known result at once and not proposed again.

A sampler that keeps asking for configs the study has measured has settled; on a small grid TPE
can settle on one of two near-equal points and never ask the point beside them (layer norm: BLOCK
8192 with 8 and 16 warps, never 4 warps, the SPACE's best). Each such repeat is answered by asking
instead an untried grid neighbour (one step along one parameter) of the study's `polish` best
configs, so a settled study walks to a local optimum of the grid around its best few points.

The studies read on their own in optuna-dashboard: a study's user attrs name its task, structure
and the run directory that created it, its objectives are named, and every trial told from an
evaluation carries the candidate's id, the verdict's status and the island that proposed it.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning, UpdateFinishedTrialError
from optuna.trial import TrialState, create_trial

from evo.contracts.candidate import Candidate, Params, module_literal
from evo.contracts.mutator_config import OptunaConfig, Sampler
from evo.contracts.records import Individual, Proposal
from evo.contracts.task import Task
from evo.contracts.verdict import Evaluation
from mutators.base import MutationContext, Mutator
from mutators.optuna.known_configs import known_configs
from mutators.optuna.space import Encoding, make_sampler, open_storage

__all__ = ["OptunaMutator"]

_Result = tuple[float, ...] | None  # objective values, None for a failed trial
_KEPT = 8  # the fastest configs per task kept for `transfer`, also across a resume (`state`)


def _key(encoded: dict[str, Any]) -> str:
    """A config's identity inside its study: the trial params (the space is fixed per structure)."""
    return json.dumps(encoded, sort_keys=True, separators=(",", ":"))


class OptunaMutator(Mutator):
    """Ask/tell tuning of `Candidate.space()` with a configurable sampler."""

    kind = "optuna"

    def __init__(self, cfg: OptunaConfig, *, journal_path: Path, seed: int) -> None:
        self.sampler = cfg.sampler
        self.seed = seed
        self.trials_per_proposal = cfg.trials_per_proposal
        self.enqueue_known = cfg.enqueue_known
        self.polish = cfg.polish
        self.transfer = cfg.transfer
        self.name = cfg.name or self.kind
        self.storage = open_storage(cfg.storage, journal_path)
        self.run = journal_path.parent.name  # the run directory: "<campaign name>-<start time>"
        self._studies: dict[str, optuna.Study] = {}
        self._results: dict[str, dict[str, _Result]] = {}  # study -> params key -> result
        self._waiting: dict[tuple[str, str], list[int]] = {}  # duplicates asked before the first was told
        self._in_flight: dict[str, set[str]] = {}  # study -> keys proposed by this process, not yet observed
        self._fastest: dict[str, list[tuple[float, Params]]] = {}  # task key -> fastest measured configs
        self.counts = {"proposals": 0, "told_complete": 0, "told_fail": 0, "told_pruned": 0, "duplicates": 0,
                       "polished": 0, "transferred": 0}

    @property
    def objectives(self) -> int:
        return 2 if self.sampler is Sampler.NSGA2 else 1

    def study_name(self, task_key: str, candidate: Candidate) -> str:
        return f"evo:{task_key}:{candidate.structure}"

    def _study(self, name: str, structure: str) -> optuna.Study:
        if name not in self._studies:
            digest = hashlib.sha256(f"{self.seed}:{structure}".encode()).digest()
            self._studies[name] = optuna.create_study(
                study_name=name, storage=self.storage, load_if_exists=True,
                sampler=make_sampler(self.sampler, int.from_bytes(digest[:4], "little")),
                directions=["minimize"] * self.objectives,
            )
            self._results.setdefault(name, {})
        return self._studies[name]

    def _refresh(self, study: optuna.Study) -> dict[str, _Result]:
        """Results told so far by anyone sharing the storage (other islands, a previous run)."""
        results = self._results.setdefault(study.study_name, {})
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
            results.setdefault(_key(t.params), tuple(t.values) if t.state is TrialState.COMPLETE else None)
        return results

    def _values(self, evaluation: Evaluation) -> _Result:
        if not evaluation.ok or evaluation.latency_ms is None or not math.isfinite(evaluation.latency_ms):
            return None
        if self.objectives == 1:
            return (evaluation.latency_ms,)
        ratio = evaluation.max_error_ratio if math.isfinite(evaluation.max_error_ratio) else 1.0
        return (evaluation.latency_ms, ratio)

    def _remember(self, task_key: str, params: Params, result: _Result) -> None:
        """Keep `params` among the task's fastest measured configs (first objective: latency)."""
        if result is None:
            return
        kept = [(v, p) for v, p in self._fastest.get(task_key, []) if p != params]
        kept.append((result[0], dict(params)))
        self._fastest[task_key] = sorted(kept, key=lambda vp: vp[0])[:_KEPT]

    def _transferred(self, task_key: str, enc: Encoding, results: dict[str, _Result],
                     base: Params) -> list[dict[str, Any]]:
        """The encodings of the task's fastest measured configs that lie in `enc`'s space, untried here; a
        param they lack (one the new structure added, such as a split's SPLIT) keeps its value in `base`."""
        out: list[dict[str, Any]] = []
        for _, params in self._fastest.get(task_key, []):
            e = enc.encode({**base, **params})
            if e is not None and _key(e) not in results and e not in out:
                out.append(e)
        return out[: self.transfer]

    def _seed_study(self, study: optuna.Study, enc: Encoding, parent: Individual, task: Task) -> None:
        """Record the parent's result; once per study, describe it and queue the task's fastest configs
        measured elsewhere, PARAMS and known-good configs."""
        results = self._refresh(study)
        encoded = enc.encode(parent.candidate.params)
        values = self._values(parent.evaluation)
        self._remember(task.key, parent.candidate.params, values)
        if encoded is not None and values is not None and _key(encoded) not in results:
            study.add_trial(create_trial(
                params=encoded, distributions=enc.distributions(), values=list(values),
                user_attrs={"source": "parent", "candidate": parent.candidate.id,
                            "status": parent.evaluation.status.value, "island": parent.proposal.island}))
            results[_key(encoded)] = values
        if study.user_attrs.get("seeded"):
            return
        for attr, value in (("task", task.name), ("task_key", task.key), ("structure", parent.candidate.structure),
                            ("run", self.run)):
            study.set_user_attr(attr, value)
        with warnings.catch_warnings():  # experimental since optuna 3.2; the dashboard labels its axes with them
            warnings.simplefilter("ignore", ExperimentalWarning)
            study.set_metric_names(["latency_ms", "max_error_ratio"][: self.objectives])
        study.set_user_attr("seeded", True)
        transferred = self._transferred(task.key, enc, results, parent.candidate.params)
        for fast in transferred:
            study.enqueue_trial(fast, skip_if_exists=True)
        self.counts["transferred"] += len(transferred)
        if not self.enqueue_known:
            return
        defaults = module_literal(parent.candidate.source, "PARAMS") or {}
        queue = [{**parent.candidate.params, **defaults}, *known_configs(parent.candidate.params, enc.values)]
        for params in queue:
            e = enc.encode(params)
            if e is not None:
                study.enqueue_trial(e, skip_if_exists=True)

    def _polish(self, study: optuna.Study, enc: Encoding, results: dict[str, _Result], taken: set[str]) -> None:
        """Queue the first untried grid neighbour of the study's `polish` fastest configs, if any."""
        if not self.polish:
            return
        ranked = sorted((values[0], key) for key, values in results.items() if values is not None)
        for _, key in ranked[: self.polish]:
            for n in enc.neighbours(json.loads(key)):
                if _key(n) not in results and _key(n) not in taken:
                    study.enqueue_trial(n)
                    self.counts["polished"] += 1
                    return

    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
        started = time.monotonic()
        enc = Encoding.of(parent.candidate)
        if enc.empty:
            return []
        name = self.study_name(ctx.task.key, parent.candidate)
        study = self._study(name, parent.candidate.structure)
        self._seed_study(study, enc, parent, ctx.task)
        results = self._refresh(study)
        out: list[Proposal] = []
        in_flight = self._in_flight.setdefault(name, set())
        batch: set[str] = set()
        for _ in range(self.trials_per_proposal * 8):
            if len(out) == self.trials_per_proposal:
                break
            trial = study.ask(enc.distributions())
            params = {**parent.candidate.params, **enc.decode(trial.params)}
            key = _key(trial.params)
            if key in results:  # already tried: tell what it gave, ask a neighbour of the best instead
                self._tell(study, trial.number, results[key])
                self.counts["duplicates"] += 1
                self._polish(study, enc, results, batch | in_flight)
                continue
            if key in batch or key in in_flight:  # asked already, not measured yet: told with that one
                self._waiting.setdefault((name, key), []).append(trial.number)
                self.counts["duplicates"] += 1
                self._polish(study, enc, results, batch | in_flight)
                continue
            batch.add(key)
            child = Candidate(parent.candidate.source, params)
            changed = ", ".join(f"{k}={v}" for k, v in sorted(params.items()) if parent.candidate.params.get(k) != v)
            out.append(Proposal(
                candidate=child, mutator=self.name, parents=(parent.candidate.id,),
                note=f"optuna {self.sampler.value} trial {trial.number}: {changed or 'same params'}",
                meta={"study": name, "task": ctx.task.key, "trial": trial.number, "key": key},
            ))
        spent = time.monotonic() - started
        self.counts["proposals"] += len(out)
        in_flight |= batch
        return [replace(p, cost_s=spent / len(out)) for p in out]

    def _tell(self, study: optuna.Study, number: int, result: _Result) -> None:
        if result is None:
            study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
            self.counts["told_fail"] += 1
        else:
            study.tell(number, list(result), skip_if_finished=True)
            self.counts["told_complete"] += 1

    def _label(self, study: optuna.Study, numbers: list[int], attrs: dict[str, Any]) -> None:
        """Set `attrs` on each trial, before its tell: a finished trial takes no more attrs."""
        study_id = self.storage.get_study_id_from_name(study.study_name)
        for n in numbers:
            trial_id = self.storage.get_trial_id_from_study_id_trial_number(study_id, n)
            try:
                for attr, value in attrs.items():
                    self.storage.set_trial_user_attr(trial_id, attr, value)
            except UpdateFinishedTrialError:  # told already: the tell below skips it too
                continue

    def observe(self, proposal: Proposal, evaluation: Evaluation) -> None:
        meta = proposal.meta
        if proposal.candidate is None or "study" not in meta:
            return
        name, key = str(meta["study"]), str(meta["key"])
        study = self._study(name, proposal.candidate.structure)
        result = self._values(evaluation)
        numbers = [int(meta["trial"]), *self._waiting.pop((name, key), [])]
        self._in_flight.get(name, set()).discard(key)
        self._remember(str(meta["task"]), proposal.candidate.params, result)
        self._label(study, numbers, {"candidate": proposal.candidate.id, "status": evaluation.status.value,
                                     "island": proposal.island})
        if evaluation.ok and result is None:  # correct, but nothing measured: no objective to report
            for n in numbers:
                study.tell(n, state=TrialState.PRUNED, skip_if_finished=True)
            self.counts["told_pruned"] += 1
            return
        self._results.setdefault(name, {})[key] = result
        for n in numbers:
            self._tell(study, n, result)

    def best(self, task_key: str, candidate: Candidate) -> dict[str, Any] | None:
        """The best completed trial of `candidate`'s study (params decoded), None before any."""
        name = self.study_name(task_key, candidate)
        study = self._study(name, candidate.structure)
        done = [t for t in study.get_trials(deepcopy=False) if t.state is TrialState.COMPLETE]
        if not done:
            return None
        enc = Encoding.of(candidate)
        top = min(done, key=lambda t: tuple(t.values))
        return {"params": {**candidate.params, **enc.decode(top.params)}, "values": list(top.values),
                "trial": top.number, "trials": len(done)}

    def stats(self) -> dict[str, Any]:
        return {**self.counts, "sampler": self.sampler.value, "studies": len(self._studies)}

    def state(self) -> dict[str, Any]:
        # Studies live in the storage; the counters and the fastest configs (for `transfer`) are ours.
        return {"counts": dict(self.counts),
                "fastest": {task: [[v, p] for v, p in kept] for task, kept in self._fastest.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        self.counts.update({k: int(v) for k, v in dict(state.get("counts", {})).items() if k in self.counts})
        for task, kept in dict(state.get("fastest", {})).items():
            self._fastest[str(task)] = [(float(v), dict(p)) for v, p in kept]
