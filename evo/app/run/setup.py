"""Everything a campaign needs before its first generation: the config (new or resumed), the run
directory, the task and its seed, a Ray connection, and how many evaluators of which kind."""

from __future__ import annotations

import logging
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo.app.run import inputs as run_inputs
from evo.app.run import ray_auth
from evo.app.run.inputs import seed_of
from evo.app.run.lowering import llm_entry, lower
from evo.app.run.store import RESUMABLE_CHANGES, RunStore
from evo.contracts.candidate import Candidate
from evo.contracts.check_cases import full_cases
from evo.contracts.config import BUDGET_KEYS, BudgetConfig, Config
from evo.contracts.config_file import ConfigError, load_config, read_text
from evo.contracts.mutator_config import MUTATOR_KINDS, AnyMutatorConfig, LLMConfig
from evo.contracts.task import Task
from evo.contracts.task_files import TaskFiles
from evo.contracts.verdict import LatencySource
from fitness.check.reach import MAX_SIZES as MAX_REACH_SIZES
from fitness.sandbox.process import STALLED_CPU_FRACTION
from islands.actors import MutatorFactory
from islands.evaluator_actor import (
    EvaluatorFactory,
    PreparerFactory,
    default_evaluator_factory,
    default_preparer_factory,
)
from mutators.factory import build_mutator

PROJECT_ROOT = Path(__file__).resolve().parents[3]


class CampaignError(RuntimeError):
    """The campaign cannot start or go on; the message says why."""


@dataclass(frozen=True)
class CampaignHooks:
    """The parts a campaign builds its mutators and evaluators with (tests inject fakes)."""

    mutator_factory: MutatorFactory = build_mutator
    evaluator_factory: EvaluatorFactory = default_evaluator_factory
    preparer_factory: PreparerFactory = default_preparer_factory


@dataclass(frozen=True)
class Prepared:
    cfg: Config  # as recorded in the run directory
    store: RunStore
    task: Task
    seed: Candidate
    task_files: TaskFiles  # the task by content (kept in RUN_DIR/inputs), as islands and evaluators build it
    mutators: tuple[AnyMutatorConfig, ...]  # cfg.mutators with replayed LLM records read from the run's copies
    resumed: bool
    notes: list[str] = field(default_factory=list)


def _dump(cfg: Config) -> dict[str, Any]:
    return cfg.model_dump(mode="json")


def budget_of(cfg: Config) -> BudgetConfig:
    """The campaign's budget: a campaign with no limit at all would never stop."""
    if cfg.budget is None:
        raise ConfigError(f"the config has no budget: add `budget:` with at least one of {', '.join(BUDGET_KEYS)}")
    return cfg.budget


def prepare(config_path: str | None, *, resume: str | None = None, output: str | None = None,
            hooks: CampaignHooks | None = None) -> Prepared:
    """Load the config and task, check the mutators build, and create (or reopen, for `resume`) the
    run directory."""
    if resume:
        return _reopen(config_path, resume, hooks)
    if not config_path:
        raise ConfigError("give a config file (or --resume RUN_DIR)")
    return prepare_config(load_config(config_path), Path(config_path).resolve().parent, output=output, hooks=hooks,
                          given_text=read_text(config_path))


def prepare_config(cfg: Config, config_dir: Path, *, output: str | Path | None = None,
                   hooks: CampaignHooks | None = None, given_text: str | None = None) -> Prepared:
    """A new run of an already parsed config whose relative paths are relative to `config_dir`
    (`evo ablate` builds its runs' configs this way). The run directory keeps a copy of every file
    the run reads (`run_inputs`), so `--resume` needs none of them."""
    cfg = with_resolved_paths(cfg, config_dir)
    check_runnable(cfg)
    hooks = hooks or CampaignHooks()
    files = TaskFiles.collect(cfg.task, config_dir)
    task = files.build()
    entry = llm_entry(cfg, task) if not task.seed_source else None  # no seed: an llm mutator writes one
    out = Path(output or cfg.output_dir).expanduser()
    store = RunStore.create(out.resolve(), cfg, config_dir=config_dir)
    notes: list[str] = []
    try:
        check_mutators(cfg, hooks.mutator_factory, store.path)
        if entry is not None:
            lowered = lower(task, entry, run_dir=store.path, cfg=cfg, factory=hooks.evaluator_factory,
                            say=lambda line: print(f"evo: {line}", file=sys.stderr, flush=True))
            seed = lowered.seed
            store.events.append({**lowered.event(), "time": time.time()})
            notes.append(lowered.note())
        else:
            seed = seed_of(task)
        files = files.with_seed(seed.source)
        run_inputs.keep(store.path, files, cfg, given_text)
    except ConfigError:
        shutil.rmtree(store.path, ignore_errors=True)  # nothing ran: leave no run behind
        raise
    mutators = run_inputs.mutators(cfg, store.path)
    return Prepared(cfg, store, files.build(run_inputs.task_root(store.path)), seed, files, mutators, False, notes)


def _reopen(config_path: str | None, resume: str, hooks: CampaignHooks | None) -> Prepared:
    notes: list[str] = []
    store = RunStore.open(Path(resume))
    cfg = store.config()
    if config_path:
        given_dir = Path(config_path).resolve().parent
        given = with_resolved_paths(load_config(config_path), given_dir)
        # compared as each reads from its own folder: the same record in a moved checkout is no edit
        old, new = _dump(with_relative_paths(cfg, store.config_dir())), _dump(with_relative_paths(given, given_dir))
        differ = sorted(k for k in old if old[k] != new[k] and k not in RESUMABLE_CHANGES)
        if differ:
            raise ConfigError(f"{config_path} differs from the run's config in {', '.join(differ)}; "
                              f"only {', '.join(RESUMABLE_CHANGES)} may change on --resume")
        if old["budget"] != new["budget"]:
            cfg = cfg.model_copy(update={"budget": given.budget})
    budget = _dump(cfg)["budget"]
    budget_changed = store.recorded_config().get("budget", budget) != budget
    summary = store.summary() or {}
    if summary.get("status") == "finished" and not budget_changed:
        raise ConfigError(f"{store.path} is finished ({summary.get('stop_reason') or 'its budget was reached'}); "
                          "resuming it would change nothing. To extend it, raise its budget: evo run CONFIG "
                          f"--resume {store.path}, with a config that differs from the run's only in `budget`")
    check_model_version(store.path)
    check_runnable(cfg)
    files = run_inputs.task_files(store, cfg)
    task = files.build(run_inputs.task_root(store.path))
    seed = seed_of(task)
    mutators = run_inputs.mutators(cfg, store.path)
    check_mutators(cfg.model_copy(update={"mutators": list(mutators)}), (hooks or CampaignHooks()).mutator_factory,
                   store.path)
    if budget_changed:  # the only write a resume makes before it runs, once nothing can refuse it
        store.write_config(cfg)
        notes.append(f"budget changed to {budget}")
    return Prepared(cfg, store, task, seed, files, mutators, True, notes)


def check_model_version(run_dir: Path) -> None:
    """Refuse to resume a run whose seed another version of the latency model timed: the run's
    modelled latencies and the new ones would not compare (`fitness.latency.model_version`)."""
    from evo.app.report.data import load_run
    from fitness.latency.model_version import model_version, version_of

    seed = load_run(run_dir).seed_record
    if seed is None or seed.evaluation.latency_source is not LatencySource.MODEL:
        return
    then, now = version_of(seed.evaluation.latency_detail), model_version()
    if then and then != now:
        raise ConfigError(f"{run_dir}: its latencies were modelled by latency model version {then}, and this "
                          f"code models with version {now} (the model's code changed since the run started), so "
                          "new latencies would not compare with the run's; start a new run (its best kernel so far "
                          "stays in this directory), or resume with the code that started it")


def task_and_seed(cfg: Config, config_dir: Path) -> tuple[Task, Candidate]:
    """The task and seed `cfg` names (paths relative to `config_dir`), checked as a new run would."""
    check_runnable(cfg)
    task = TaskFiles.collect(cfg.task, config_dir).build()
    return task, seed_of(task)


def check_runnable(cfg: Config) -> None:
    if not cfg.mutators:
        raise ConfigError(f"the config has no mutators: add a `mutators:` list (kinds: {', '.join(MUTATOR_KINDS)})")
    budget_of(cfg)


def with_resolved_paths(cfg: Config, config_dir: Path) -> Config:
    """`cfg` with the LLM record paths made absolute (relative ones are relative to the config's
    folder), so the island actors, whatever their working directory, find the same file."""
    entries = []
    for m in cfg.mutators:
        if isinstance(m, LLMConfig) and m.record_path and not Path(m.record_path).expanduser().is_absolute():
            m = m.model_copy(update={"record_path": str((config_dir / m.record_path).resolve())})
        entries.append(m)
    return cfg.model_copy(update={"mutators": entries})


def with_relative_paths(cfg: Config, config_dir: Path) -> Config:
    """`cfg` with absolute LLM record paths made relative to `config_dir` (the inverse of
    `with_resolved_paths`): the config as it reads wherever the checkout lives, to compare or hash."""
    entries = []
    for m in cfg.mutators:
        if isinstance(m, LLMConfig) and m.record_path and Path(m.record_path).is_absolute():
            m = m.model_copy(update={"record_path": os.path.relpath(m.record_path, config_dir)})
        entries.append(m)
    return cfg.model_copy(update={"mutators": entries})


def check_mutators(cfg: Config, factory: MutatorFactory, run_dir: Path) -> None:
    """Build every mutator once here, so a bad entry is a clear error before any actor starts."""
    for i, entry in enumerate(cfg.mutators):
        try:
            factory(entry, run_dir=run_dir, seed=cfg.seed)
        except Exception as e:
            raise ConfigError(f"mutators.{i} (kind {entry.kind}): {type(e).__name__}: {e}") from None


def actor_timeout_s(cfg: Config, task: Task) -> float:
    """Longest an evaluator may take before it counts as hung: every case at the longest its worker waits
    for it, plus the worker's start-up, twice over (an evaluation that hangs inside a case already times
    out there). On a GPU (`device: cuda`) a case's timeout is wall seconds, doubled here as a margin; in
    the interpreter it is CPU seconds, and on a busy machine the worker waits up to 1/STALLED_CPU_FRACTION
    times it in wall time before it calls the case a timeout, so the actor must wait that long too."""
    if cfg.evaluators.actor_timeout_s is not None:
        return cfg.evaluators.actor_timeout_s
    # a full check's cases (with the special values and bench-shaped ones), and the sizes it may add to
    # reach code they left unrun
    cases = len(full_cases(task, draws=cfg.evaluation.draws)) + MAX_REACH_SIZES
    timeout = cfg.evaluation.timeout_s
    per_case = 2.0 * timeout if cfg.evaluation.device == "cuda" else timeout / STALLED_CPU_FRACTION
    return per_case * (cases + 1) + 2.0 * 180.0


def connect_ray(cfg: Config) -> bool:
    """Join the cluster at RAY_ADDRESS (as under `ray job submit`), else start a local Ray here.
    Returns True when this process started Ray (and so must shut it down)."""
    import ray

    if ray.is_initialized():
        return False
    quiet: dict[str, Any] = {"logging_level": logging.WARNING, "configure_logging": True}
    address = os.environ.get("RAY_ADDRESS")
    if address:
        # under `ray job submit` the job's runtime_env already ships the code; a driver that joins a
        # cluster by itself ships this project the same way, so actors on every node import it
        in_job = "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ
        runtime_env = None if in_job else {"working_dir": str(PROJECT_ROOT)}
        try:
            ray.init(address=address, runtime_env=runtime_env, **quiet)
        except Exception as e:
            if type(e).__name__ == "AuthenticationError":
                raise CampaignError(f"the Ray cluster at RAY_ADDRESS={address} wants its token: "
                                    f"{ray_auth.HOW}") from None
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise CampaignError(f"cannot join the Ray cluster at RAY_ADDRESS={address}: {first}") from None
        return False
    wanted = (cfg.evaluators.count or 1) * cfg.evaluators.cpus_per_evaluator
    ray_auth.use_private_token()
    ray.init(
        address="local", num_cpus=max(os.cpu_count() or 1, math.ceil(wanted)), include_dashboard=False,
        # the actors import this project from the same tree as the driver
        runtime_env={"env_vars": {"PYTHONPATH": str(PROJECT_ROOT)}}, **quiet,
    )
    return True


def release_ray(started: bool) -> None:
    """Stop the Ray `connect_ray` started (a cluster joined is left running)."""
    if started:
        import ray

        ray.shutdown()
        ray_auth.restore()


@dataclass(frozen=True)
class EvaluatorPlan:
    count: int
    num_cpus: float
    num_gpus: float
    why: str
    compile_ahead: int = 0  # preparers per evaluator node
    follow: str = ""  # "GPU" when the count was not set: nodes with GPUs that join get evaluators too


def compile_ahead(cfg: Config, gpu: bool, free_cpus_per_node: float) -> int:
    """Preparers per evaluator node: as configured, else up to 4 from the CPUs a GPU node's evaluators
    leave free (none for CPU evaluators)."""
    asked = cfg.evaluators.compile_ahead
    if asked is not None:
        return asked
    return max(0, min(4, int(free_cpus_per_node))) if gpu else 0


def evaluator_plan(cfg: Config) -> EvaluatorPlan:
    """How many evaluator actors, with which resources, given what the cluster has."""
    import ray

    res = ray.cluster_resources()
    gpus, cpus = int(res.get("GPU", 0)), int(res.get("CPU", 0))
    e = cfg.evaluators
    placement = e.placement if e.placement != "auto" else ("gpu" if gpus else "cpu")
    if placement == "gpu":
        if not gpus:
            raise CampaignError("evaluators.placement is gpu but the Ray cluster has no GPU")
        count = e.count or gpus
        gpu_nodes = max(1, sum(1 for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("GPU")))
        ahead = compile_ahead(cfg, True, (cpus - count * e.cpus_per_evaluator - 1) / gpu_nodes)
        follows = "" if e.count else "; more for GPUs that join"
        return EvaluatorPlan(count, e.cpus_per_evaluator, 1.0, f"{count} GPU evaluator(s), one GPU each "
                             f"(cluster: {gpus} GPU, {cpus} CPU){ahead_words(ahead)}{follows}", ahead,
                             follow="" if e.count else "GPU")
    count = e.count or max(1, int(cpus // e.cpus_per_evaluator))
    ahead = compile_ahead(cfg, False, 0)
    return EvaluatorPlan(count, e.cpus_per_evaluator, 0.0, f"{count} CPU evaluator(s) (cluster: {cpus} CPU, no GPU "
                                                           f"used){ahead_words(ahead)}", ahead)


def ahead_words(ahead: int) -> str:
    return f", {ahead} compile-ahead preparer(s) per evaluator node" if ahead else ""

