"""`evo ablate ABLATION.yaml`: every variant x seed as a campaign, several at once on one Ray cluster.

The ablation directory (<output_dir>/<name>/) holds `ablation.json` (the state: each run's status
and run directory), `runs/` (one campaign run directory per variant and seed) and the results
(`evo.app.ablation.report`). Running the same command again continues: finished runs are not redone,
interrupted and failed ones resume from their run directory, pending ones start. A variant whose
config changed under existing runs is an error (use another `name` or `--output`).

Runs go to the cluster (RAY_ADDRESS, else a local Ray) as its resources allow: a run needs the CPUs
(or GPUs) of its evaluators, and a run starts when they are free, at most `parallel` at a time. The
campaign drivers are threads of this process; their actors are spread over the cluster. Ctrl-C
stops every run after its current generation (Ctrl-C again: at once); run the command again to
continue. Runs that fail one after another as soon as they start stop it starting more.
"""

from __future__ import annotations

import datetime as dt
import json
import queue
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import IO, Any

import yaml

from evo.app.ablation.config import Ablation, RunSpec, config_hash
from evo.app.run import inputs as run_inputs
from evo.app.run.progress import IslandRow, Totals
from evo.app.run.setup import CampaignHooks, prepare, prepare_config
from evo.app.run.signals import is_termination, terminate_as_interrupt
from evo.app.run.store import RunStore
from evo.contracts.config_file import ConfigError, parse_config
from evo.contracts.history import write_atomic
from evo.contracts.mutator_config import LLMConfig

STATE_FILE = "ablation.json"
QUIT_WAIT_S = 30.0  # how long a quit waits for the runs to write that they were interrupted
# This many runs in a row failing within FAST_FAIL_S of their start look like the machine or the cluster
# (Ray gone, a disk full), not the runs: no further run starts (they would fail the same way).
FAST_FAILS = 3
FAST_FAIL_S = 120.0


class RunStatus(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    FINISHED = "finished"
    FAILED = "failed"


@dataclass
class RunEntry:
    variant: str
    seed: int
    config_hash: str
    status: RunStatus = RunStatus.PENDING
    run_dir: str = ""
    error: str = ""
    started: str = ""
    ended: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunEntry:
        return cls(**{**d, "status": RunStatus(d["status"])})


@dataclass
class AblationState:
    path: Path
    source: str
    runs: dict[str, RunEntry] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path, ablation: Ablation) -> AblationState:
        path = directory / STATE_FILE
        state = cls(path, str(ablation.source))
        if path.is_file():
            data = json.loads(path.read_text())
            state.runs = {k: RunEntry.from_dict(v) for k, v in data.get("runs", {}).items()}
        made = [(spec, state.runs[spec.key]) for spec in ablation.runs()
                if spec.key in state.runs and state.runs[spec.key].status is not RunStatus.PENDING]
        changed = [spec.key for spec, entry in made if not _same_config(entry, spec)]
        if changed:
            raise ConfigError(f"{ablation.source}: the config of {', '.join(changed)} changed since those runs were "
                              f"made in {directory}; give the ablation another name or --output")
        replayed = [f"{spec.key} ({record})" for spec, entry in made for record in _changed_records(entry, spec)]
        if replayed:
            raise ConfigError(f"{ablation.source}: the replay record of {', '.join(replayed)} is not the one those "
                              f"runs replayed (kept in their inputs/llm/) in {directory}; its answers changed, so "
                              "give the ablation another name or --output")
        for spec in ablation.runs():
            entry = state.runs.get(spec.key)
            if entry is None or entry.status is RunStatus.PENDING:
                state.runs[spec.key] = RunEntry(spec.variant, spec.seed, spec.config_hash(),
                                                run_dir=entry.run_dir if entry else "")
        return state

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"source": self.source, "updated": _now(), "runs": {k: e.to_dict() for k, e in self.runs.items()}}
        write_atomic(self.path, (json.dumps(data, indent=2) + "\n").encode())


def _same_config(entry: RunEntry, spec: RunSpec) -> bool:
    """Whether a run was made with `spec`'s config: the same hash, or else its saved config.yaml, read by
    today's schema with its paths relative to the folder its run.json names, hashes the same (a run
    from before a config key was added, at its default, or made from another checkout, is the same
    run). A match by the file takes the new hash."""
    if entry.config_hash == spec.config_hash():
        return True
    saved = Path(entry.run_dir) / "config.yaml" if entry.run_dir else None
    if saved is None or not saved.is_file():
        return False
    try:
        cfg = parse_config(yaml.safe_load(saved.read_text()), source=str(saved))
    except (OSError, yaml.YAMLError, ConfigError):
        return False
    if config_hash(cfg, _config_dir(saved.parent) or spec.config_dir) != spec.config_hash():
        return False
    entry.config_hash = spec.config_hash()
    return True


def _changed_records(entry: RunEntry, spec: RunSpec) -> list[str]:
    """The replay records of `spec` whose bytes differ from the copy the run kept at its start (a
    resumed run replays its copy, so a changed record would mix two sets of answers in one variant)."""
    if not entry.run_dir:
        return []
    out = []
    for i, m in enumerate(spec.config.mutators):
        if isinstance(m, LLMConfig) and m.mode == "replay" and m.record_path:
            kept, now = run_inputs.record_copy(Path(entry.run_dir), i, m.record_path), Path(m.record_path)
            if kept.is_file() and now.is_file() and kept.read_bytes() != now.read_bytes():
                out.append(m.record_path)
    return out


def _config_dir(run_dir: Path) -> Path | None:
    """The folder a run's config paths were resolved from, as its run.json records it."""
    try:
        return RunStore(run_dir).config_dir()
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _now() -> str:
    return dt.datetime.now().isoformat(timespec="seconds")


class RunLog:
    """Progress of one run among several: a line per island generation, prefixed with the run."""

    def __init__(self, key: str, stream: IO[str]) -> None:
        self.key, self.stream = key, stream

    def update(self, row: IslandRow, rows: list[IslandRow], totals: Totals) -> None:
        best = f"{totals.best_speedup:.2f}x" if totals.best_speedup else "-"
        print(f"[{self.key}] island {row.index} gen {row.generation}: best {best}, evals {totals.evaluations}, "
              f"llm ${totals.llm_usd:.4f}, {totals.elapsed_s:.0f} s", file=self.stream, flush=True)

    def message(self, text: str) -> None:
        print(f"[{self.key}] {text}", file=self.stream, flush=True)

    def close(self) -> None:
        self.stream.flush()


@dataclass(frozen=True)
class Demand:
    cpus: float
    gpus: float


def demand(spec: RunSpec, cluster: dict[str, float]) -> Demand:
    """What a run's evaluators take from the cluster (as `evo.app.run.setup.evaluator_plan` places them)."""
    e = spec.config.evaluators
    gpus, cpus = cluster.get("GPU", 0.0), cluster.get("CPU", 1.0)
    placement = e.placement if e.placement != "auto" else ("gpu" if gpus else "cpu")
    if placement == "gpu":
        n = e.count or int(gpus) or 1
        return Demand(min(n * e.cpus_per_evaluator, cpus), min(float(n), gpus))
    n = e.count or max(1, int(cpus // e.cpus_per_evaluator))
    return Demand(min(n * e.cpus_per_evaluator, cpus), 0.0)


class AblationRunner:
    """Runs what is left of an ablation (of `only`, some of its runs, if given); `stop()` (from any
    thread) ends it after the current generations."""

    def __init__(self, ablation: Ablation, directory: Path, *, hooks: CampaignHooks | None = None,
                 stream: IO[str] | None = None, only: Sequence[RunSpec] | None = None) -> None:
        self.ablation, self.directory = ablation, directory
        self.selected = list(ablation.runs() if only is None else only)
        self.partial = only is not None and len(self.selected) < len(ablation.runs())
        self.hooks = hooks or CampaignHooks()
        self.stream = stream or sys.stdout
        self.state = AblationState.load(directory, ablation)
        self.events: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        self.campaigns: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.stopping = False
        self.quitting = False
        self.halted = ""  # why no further run starts (runs failing one after another), if so
        self.threads: list[threading.Thread] = []

    def say(self, text: str) -> None:
        print(f"evo ablate: {text}", file=self.stream, flush=True)

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            for c in self.campaigns.values():
                c.request_stop()

    def quit(self) -> None:
        """Stop every run now (a second Ctrl-C): each drops its generation in progress and ends
        "interrupted"; waits a little for them to say so."""
        with self.lock:
            self.stopping = self.quitting = True
            for c in self.campaigns.values():
                c.abandon()
        deadline = time.monotonic() + QUIT_WAIT_S
        for t in self.threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        while True:  # what the runs said while ending
            try:
                self._apply(*self.events.get_nowait())
            except queue.Empty:
                break
        self.state.save()

    def todo(self) -> list[RunSpec]:
        return [s for s in self.selected if self.state.runs[s.key].status is not RunStatus.FINISHED]

    def run(self) -> AblationState:
        """Run every selected run not finished; returns the state (also in ablation.json)."""
        import ray

        from evo.app.run.setup import connect_ray, release_ray

        self.state.save()
        todo = self.todo()
        done = len(self.selected) - len(todo)
        which = "selected run" if self.partial else "run"
        if not todo:
            self.say(f"all {_count(done, which)} {'is' if done == 1 else 'are'} finished; nothing to run")
            return self.state
        left_out = len(self.ablation.runs()) - len(self.selected)
        self.say(f"{_count(len(todo), which)} to go ({done} finished already" +
                 (f"; {left_out} not selected" if self.partial else "") + f"); ablation directory {self.directory}")
        started_ray = connect_ray(todo[0].config)
        try:
            with terminate_as_interrupt():  # after ray.init, which installs a SIGTERM handler of its own
                self._schedule(todo, {k: float(v) for k, v in ray.cluster_resources().items()})
        finally:
            release_ray(started_ray)
        return self.state

    def _schedule(self, todo: list[RunSpec], cluster: dict[str, float]) -> None:
        free = {"CPU": cluster.get("CPU", 1.0), "GPU": cluster.get("GPU", 0.0)}
        cap = self.ablation.cfg.parallel or len(todo)
        pending, active = list(todo), dict[str, Demand]()
        started: dict[str, float] = {}
        fast_fails: list[str] = []  # the reasons of the runs that failed soon after starting, in a row
        while pending or active:
            while pending and not self.stopping and not self.halted and len(active) < cap:
                spec, need = pending[0], demand(pending[0], cluster)
                if active and (need.cpus > free["CPU"] + 1e-9 or need.gpus > free["GPU"] + 1e-9):
                    break  # wait for resources (a run that needs the whole cluster runs alone)
                pending.pop(0)
                free["CPU"] -= need.cpus
                free["GPU"] -= need.gpus
                active[spec.key] = need
                started[spec.key] = time.monotonic()
                self._start(spec)
            if (self.stopping or self.halted) and pending and not active:
                break
            kind, key, payload = self._next_event()
            if kind == "end":
                need = active.pop(key)
                free["CPU"] += need.cpus
                free["GPU"] += need.gpus
                status, error = payload
                if status == RunStatus.FAILED.value and time.monotonic() - started[key] < FAST_FAIL_S:
                    fast_fails.append(f"{key}: {error}")
                elif status != RunStatus.INTERRUPTED.value:
                    fast_fails.clear()
            self._apply(kind, key, payload)
            self.state.save()
            if len(fast_fails) >= FAST_FAILS and not self.halted:
                self.halted = fast_fails[-1]
                self.say(f"{len(fast_fails)} runs in a row failed within {FAST_FAIL_S:.0f} s of starting (the last, "
                         f"{fast_fails[-1]}): that looks like the machine or the cluster, not the runs; no further run "
                         f"starts ({_count(len(pending), 'run')} left pending). Mend it and run the same command again")

    def _apply(self, kind: str, key: str, payload: Any) -> None:
        entry = self.state.runs[key]
        if kind == "dir":
            entry.run_dir, entry.status, entry.started = str(payload), RunStatus.RUNNING, _now()
        else:
            status, error = payload
            entry.status, entry.error, entry.ended = RunStatus(status), error, _now()  # campaign statuses
            self.say(f"{key}: {status}" + (f" ({error})" if error else "") + f"; {self._tally()}")

    def _next_event(self) -> tuple[str, str, Any]:
        while True:  # a timeout keeps the main thread responsive to Ctrl-C
            try:
                return self.events.get(timeout=0.5)
            except queue.Empty:
                continue
            except KeyboardInterrupt as e:
                if self.stopping or is_termination(e):  # a second Ctrl-C or SIGTERM: quit at once
                    why = "terminated (SIGTERM)" if is_termination(e) else "quitting"
                    self.say(f"{why}: every run drops the generation in progress (they resume next time)")
                    self.quit()
                    raise
                self.say("stopping every run after its current generation (Ctrl-C again to quit at once); "
                         "run the same command again to continue")
                self.stop()

    def _tally(self) -> str:
        counts: dict[str, int] = {}
        for e in self.state.runs.values():
            counts[e.status.value] = counts.get(e.status.value, 0) + 1
        return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))

    def _start(self, spec: RunSpec) -> None:
        entry = self.state.runs[spec.key]
        self.say(f"{spec.key}: {'resuming ' + entry.run_dir if entry.run_dir else 'starting'}")
        thread = threading.Thread(target=self._execute, args=(spec, entry.run_dir), name=f"ablate-{spec.key}",
                                  daemon=True)
        self.threads.append(thread)
        thread.start()

    def _existing(self, spec: RunSpec, run_dir: str) -> str:
        """The run's directory: the recorded one, else one made for it by a run killed before it was recorded."""
        if run_dir and (Path(run_dir) / "config.yaml").is_file():
            return run_dir
        for p in sorted((self.directory / "runs").glob(f"{spec.key}-*")):
            if (p / "config.yaml").is_file() and RunStore(p).config().name == spec.key:
                return str(p)
        return ""

    def _execute(self, spec: RunSpec, run_dir: str) -> None:
        from evo.app.run.campaign import Campaign

        try:
            existing = self._existing(spec, run_dir)
            done = RunStore(Path(existing)).summary() if existing else None
            if done is not None and done.get("status") == RunStatus.FINISHED.value:
                # finished before the ablation could record it (killed in between): nothing to resume
                self.events.put(("dir", spec.key, Path(existing)))
                self.events.put(("end", spec.key, (RunStatus.FINISHED.value, "")))
                return
            if existing:
                prepared = prepare(None, resume=existing, hooks=self.hooks)
            else:
                prepared = prepare_config(spec.config, self.ablation.base_dir, output=self.directory / "runs",
                                          hooks=self.hooks)
            self.events.put(("dir", spec.key, prepared.store.path))
            campaign = Campaign(prepared, self.hooks, RunLog(spec.key, self.stream))
            with self.lock:
                self.campaigns[spec.key] = campaign
                if self.quitting:
                    campaign.abandon()
                elif self.stopping:
                    campaign.request_stop()
            summary = campaign.run()
            status = summary.get("status", "failed")
            error = str(summary.get("stop_reason", "")) if status == "failed" else ""
            self.events.put(("end", spec.key, (status, error)))
        except BaseException as e:  # a run's failure is recorded; the others go on
            msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            self.events.put(("end", spec.key, (RunStatus.FAILED.value, msg)))
        finally:
            with self.lock:
                self.campaigns.pop(spec.key, None)


def preflight(ablation: Ablation, hooks: CampaignHooks | None = None, variants: Sequence[str] | None = None) -> None:
    """Build every variant's (or these variants') task and mutators once, so a bad entry (an LLM key
    not set, a record file missing) is an error naming the variant before any run starts."""
    import tempfile

    from evo.app.run.setup import check_mutators, task_and_seed

    factory = (hooks or CampaignHooks()).mutator_factory
    tasks: dict[str, str] = {}
    for name, cfg in ablation.variants.items():
        if variants is not None and name not in variants:
            continue
        where = f"{ablation.source}: variants.{name}"
        key = cfg.task.model_dump_json()
        try:
            if key not in tasks:
                tasks[key] = task_and_seed(cfg, ablation.base_dir)[0].name
            with tempfile.TemporaryDirectory(prefix="evo-ablate-") as tmp:
                check_mutators(cfg, factory, Path(tmp))
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
