"""Throughput of the campaign machinery: evaluations per second with 1 and with 2 evaluator actors,
and the overhead of islands, broker and driver per evaluation.

    python -m bench.search.campaign_bench [--task softmax] [--generations 4]

Each campaign runs on an embedded local Ray with real evaluations (lint + equivalence in worker
subprocesses) of candidates drawn from the seed's SPACE by a bench-only mutator (no search: the
point is the plumbing). Generation 0 (which also starts the workers) is not timed. The overhead of
the machinery is the time the single evaluator of the 1-evaluator campaign spends waiting for work
(wall time minus its busy time), per evaluation; the cost of the actor wrapper itself is measured by
evaluating the same candidates alternately in an evaluator actor and in a bare `Evaluator`.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evo.contracts.candidate import Candidate
from evo.contracts.history import MsgpackLog
from evo.contracts.records import Individual, Proposal
from mutators.base import MutationContext, Mutator


class RandomParams(Mutator):
    """Proposes points of the parent's SPACE it has not proposed before (bench only)."""

    kind = "random-params"

    def __init__(self, seed: int) -> None:
        self.seen: set[str] = set()

    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
        space = {k: v for k, v in sorted(parent.candidate.space().items()) if v}
        for _ in range(50):
            child = parent.candidate.with_params(**{k: ctx.rng.choice(v) for k, v in space.items()})
            if child.id not in self.seen:
                self.seen.add(child.id)
                return [Proposal(child, self.kind, (parent.candidate.id,))]
        return []


def random_params_factory(cfg: Any, *, run_dir: Path, seed: int) -> Mutator:
    return RandomParams(seed)


@dataclass(frozen=True)
class Measured:
    evaluators: int
    evaluations: int
    seconds: float
    busy_s: float
    run_dir: Path

    @property
    def per_second(self) -> float:
        return self.evaluations / self.seconds if self.seconds else 0.0


def run_campaign(task: str, evaluators: int, generations: int, out: Path) -> Measured:
    import ray

    from evo.app.run.campaign import Campaign
    from evo.app.run.progress import PlainLog
    from evo.app.run.setup import CampaignHooks, prepare

    cfg = {
        "name": f"bench-{evaluators}", "seed": 1, "task": {"name": task},
        "evaluation": {"device": "auto"},
        "islands": {"count": 2, "population": 4, "offspring": 4, "migration": {"interval": 2, "top_k": 1}},
        "evaluators": {"count": evaluators}, "mutators": [{"kind": "optuna"}],
        "budget": {"generations": generations}, "output_dir": str(out),
    }
    path = out / f"bench-{evaluators}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    hooks = CampaignHooks(mutator_factory=random_params_factory)
    campaign = Campaign(prepare(str(path), hooks=hooks), hooks, PlainLog(io.StringIO()))
    campaign.start()
    campaign.advance()  # generation 0: the workers start here; not timed
    stats0 = ray.get(campaign.broker.get_stats.remote())
    start = time.monotonic()
    while campaign.stop_reason() is None:
        campaign.advance()
    seconds = time.monotonic() - start
    stats = ray.get(campaign.broker.get_stats.remote())
    campaign.finish("finished", "bench")
    return Measured(evaluators, stats.evaluations - stats0.evaluations, seconds, stats.busy_s - stats0.busy_s,
                    campaign.store.path)


def actor_vs_bare(run_dir: Path, task_name: str) -> tuple[float, float, int]:
    """Seconds per evaluation of the same candidates (those evaluated after generation 0) in an
    evaluator actor and in a bare in-process `Evaluator`, alternating one and the other so that other
    load on the machine hits both alike."""
    import ray

    from evo.contracts.config import EvaluationConfig, TaskConfig
    from evo.contracts.native_task import TASK_LIBRARY, NativeTask
    from evo.contracts.task_files import TaskFiles
    from fitness.evaluate import Evaluator
    from islands.evaluator_actor import EvaluatorActor, EvaluatorSpec

    records = [r for r in MsgpackLog(run_dir / "history.msgpack").read()
               if r["kind"] == "evaluation" and r["origin"]["generation"] > 0]
    candidates = [Candidate.from_dict(r["candidate"]) for r in records]
    task = NativeTask(TASK_LIBRARY / task_name)
    seed = Candidate.from_source(task.seed_source or "")
    spec = EvaluatorSpec(TaskFiles.collect(TaskConfig(name=task_name), TASK_LIBRARY), EvaluationConfig())
    actor: Any = ray.remote(EvaluatorActor).remote(spec, "bench")
    with Evaluator(task, spec.settings, device=ray.get(actor.info.remote()).device) as bare:
        ray.get(actor.evaluate.remote(seed, "full"))  # start both workers: not timed
        bare.evaluate(seed)
        in_actor = in_process = 0.0
        for c in candidates:
            start = time.monotonic()
            ray.get(actor.evaluate.remote(c, "full"))
            in_actor += time.monotonic() - start
            start = time.monotonic()
            bare.evaluate(c)
            in_process += time.monotonic() - start
    ray.get(actor.close.remote())
    ray.kill(actor)
    n = max(len(candidates), 1)
    return in_actor / n, in_process / n, len(candidates)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="softmax")
    ap.add_argument("--generations", type=int, default=6)
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local bench: no token file in the home directory
    import ray

    ray.init(address="local", num_cpus=max(os.cpu_count() or 1, 2), include_dashboard=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}},
             logging_level=logging.ERROR)
    load = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory(prefix="evo-bench-") as tmp:
            results = [run_campaign(args.task, n, args.generations, Path(tmp)) for n in (1, 2)]
            for r in results:
                print(f"evaluators={r.evaluators}: {r.evaluations} evaluations in {r.seconds:.1f} s "
                      f"-> {r.per_second:.2f} evaluations/s (evaluator busy {r.busy_s:.1f} s)")
            one, two = results
            print(f"2 vs 1 evaluator actors: {two.per_second / one.per_second:.2f}x evaluations/s "
                  f"({os.cpu_count()} CPU cores; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after: "
                  "other work on the machine takes cores from the evaluators)")
            outside = (one.seconds - one.busy_s) / max(one.evaluations, 1)
            print(f"machinery overhead (islands, broker, driver, Ray calls: the time the one evaluator waits "
                  f"for work) {outside * 1000:.0f} ms/evaluation, "
                  f"{outside / (one.seconds / max(one.evaluations, 1)):.1%} of the campaign's time")
            actor, bare, n = actor_vs_bare(one.run_dir, args.task)
            print(f"one evaluation in an evaluator actor {actor * 1000:.0f} ms vs in a bare Evaluator "
                  f"{bare * 1000:.0f} ms ({n} candidates, alternated)")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
