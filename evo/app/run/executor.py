"""Where a campaign's islands, broker and evaluators run: on Ray (the default: a cluster at
RAY_ADDRESS, else a local Ray), or in this process (`--executor local`, or when Ray is not
installed): islands and the broker as threads, each evaluator's candidates in its own sandboxed
worker subprocess, as on Ray. Same config, run directory and `--resume` either way."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from evo.app.run.setup import (
    CampaignError,
    EvaluatorPlan,
    ahead_words,
    compile_ahead,
    connect_ray,
    evaluator_plan,
    release_ray,
)
from evo.contracts.config import Config
from fitness.evaluate import device_for
from islands.local_runtime import LocalRuntime
from islands.runtime import Runtime

EXECUTORS = ("ray", "local")


def ray_installed() -> bool:
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        return False


def choose(executor: str | None) -> str:
    """The executor asked for, else Ray where it is installed."""
    if executor is None:
        return "ray" if ray_installed() else "local"
    if executor not in EXECUTORS:
        raise CampaignError(f"executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    if executor == "ray" and not ray_installed():
        raise CampaignError("--executor ray: Ray is not installed (pip install 'ray[default]'); "
                            "--executor local runs the campaign on this machine without it")
    return executor


@dataclass(frozen=True)
class Session:
    runtime: Runtime
    plan: EvaluatorPlan
    started_ray: bool = False

    def close(self) -> None:
        release_ray(self.started_ray)


def local_plan(cfg: Config) -> EvaluatorPlan:
    """Evaluators of the local executor: one per CPU share, or one for the machine's GPU (its
    timings would be disturbed by a second one)."""
    e = cfg.evaluators
    device = device_for(cfg.evaluation.device)
    placement = e.placement if e.placement != "auto" else ("gpu" if device == "cuda" else "cpu")
    if placement == "gpu":
        if device != "cuda":
            raise CampaignError("evaluators.placement is gpu but this machine has no CUDA device")
        if e.count and e.count > 1:
            raise CampaignError(f"evaluators.count {e.count}: the local executor times on one GPU with one "
                                "evaluator; use Ray for several GPUs")
        ahead = compile_ahead(cfg, True, (os.cpu_count() or 1) - e.cpus_per_evaluator - 1)
        return EvaluatorPlan(1, e.cpus_per_evaluator, 1.0, f"1 GPU evaluator (local executor){ahead_words(ahead)}",
                             ahead)
    cpus = os.cpu_count() or 1
    count = e.count or max(1, int(cpus // e.cpus_per_evaluator))
    ahead = compile_ahead(cfg, False, 0)
    return EvaluatorPlan(count, e.cpus_per_evaluator, 0.0,
                         f"{count} CPU evaluator(s) (local executor, {cpus} CPU){ahead_words(ahead)}", ahead)


def open_session(executor: str, cfg: Config) -> Session:
    if executor == "local":
        return Session(LocalRuntime(), local_plan(cfg))
    from islands.ray_runtime import RayRuntime

    started = connect_ray(cfg)
    try:
        return Session(RayRuntime(), evaluator_plan(cfg), started)
    except BaseException:
        release_ray(started)
        raise
