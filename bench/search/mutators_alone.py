"""Drive the STOKE and Optuna mutators alone, each on a single island, on one library task.

    .venv/bin/python -m bench.search.mutators_alone --task softmax --generations 6

Everything is the product's own: the island (`islands.island.Island`, without Ray) with one
mutator, lint and equivalence in a worker, and the evaluator's latency source: measured on a CUDA
device, else the roofline model of the target GPU (figures labelled ``model``). Prints, per
mutator, the seed's and the best kernel's latency, STOKE's move table and Optuna's best config.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, IslandsConfig
from evo.contracts.mutator_config import OptunaConfig, SelectionConfig, StokeConfig, entry_names
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.records import Individual
from evo.contracts.task import Task
from fitness.evaluate import Evaluator
from fitness.latency.stage import target_hardware
from islands.evaluation import EvaluationLedger, LocalEvaluationService
from islands.island import Island
from mutators.base import Mutator
from mutators.factory import build_mutator
from mutators.optuna.tuner import OptunaMutator
from mutators.selection import FixedWeights
from mutators.stoke.mutator import StokeMutator


@dataclass(frozen=True)
class Solo:
    """A single-island run of one mutator: the island after the run, its seed and best kernel."""

    island: Island
    seed: Individual
    best: Individual
    generations: int
    evaluations: int  # new to the island's service, inner checks included (the evaluator caches too)
    seconds: float

    @property
    def improved(self) -> bool:
        s, b = self.seed.latency_ms, self.best.latency_ms
        return s is not None and b is not None and b < s


def run_alone(mutator: Mutator, task: Task, evaluator: Evaluator, *, generations: int, offspring: int = 1,
              until_improved: bool = False) -> Solo:
    """Evolve an island of population 1 from the task's seed with `mutator` alone.

    With population 1, generation 0 is the seed only (no draws from its SPACE), so anything that
    beats it was proposed by the mutator. `until_improved` stops at the first generation that does.
    """
    start = time.monotonic()
    ledger = EvaluationLedger(task.key, device=evaluator.device)
    service = LocalEvaluationService(lambda c, level: evaluator.evaluate(c, level=level), ledger)
    hardware = target_hardware(evaluator.settings, evaluator.device)
    cfg = IslandsConfig(count=1, population=1, offspring=offspring, tournament_size=1)
    names = entry_names([mutator])
    island = Island(0, cfg, task=task, mutators=[mutator], selector=FixedWeights({names[0]: 1.0}, SelectionConfig()),
                    service=service, seed=0, hardware=hardware)
    report = island.initialize(Candidate.from_source(task.seed_source or ""))
    if not report.seed_ok or island.seed is None:
        raise RuntimeError(f"the seed of {task.name} does not pass: {report.seed_reason}")
    done = 0
    for _ in range(generations):
        island.step()
        done += 1
        solo = Solo(island, island.seed, island.best() or island.seed, done, ledger.stats.evaluations,
                    time.monotonic() - start)
        if until_improved and solo.improved:
            return solo
    return Solo(island, island.seed, island.best() or island.seed, done, ledger.stats.evaluations,
                time.monotonic() - start)


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f} us"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="softmax", choices=sorted(p.parent.name for p in TASK_LIBRARY.glob("*/task.py")))
    ap.add_argument("--generations", type=int, default=6)
    ap.add_argument("--offspring", type=int, default=2, help="parents drawn (so proposals made) per generation")
    ap.add_argument("--chain", type=int, default=6)
    ap.add_argument("--trials", type=int, default=4)
    args = ap.parse_args()
    task = NativeTask(TASK_LIBRARY / args.task)
    run_dir = Path(tempfile.mkdtemp(prefix="evo-bench-"))
    with Evaluator(task, EvaluationConfig(memory_mb=4096)) as ev:
        for cfg in (StokeConfig(chain_length=args.chain), OptunaConfig(trials_per_proposal=args.trials)):
            m = build_mutator(cfg, run_dir=run_dir, seed=0)
            solo = run_alone(m, task, ev, generations=args.generations, offspring=args.offspring)
            source = solo.best.evaluation.latency_source
            unit = f"{source.value if source else 'no latency'}, {solo.best.evaluation.latency_gpu or ev.device}"
            speedup = (f"{solo.seed.latency_ms / solo.best.latency_ms:.2f}x"
                       if solo.improved and solo.seed.latency_ms and solo.best.latency_ms else "no gain")
            print(f"\n== {cfg.kind} alone on {task.name}: {solo.generations} generations, "
                  f"{solo.island.selector.table[solo.island.names[0]].proposals} proposals, "
                  f"{solo.evaluations} evaluations in {solo.seconds:.1f} s; seed {_us(solo.seed.latency_ms)} -> best "
                  f"{_us(solo.best.latency_ms)} ({unit}; {speedup})")
            print("best params:", solo.best.candidate.params, "|", solo.best.candidate.id,
                  "| proposed by", solo.best.proposal.mutator)
            if isinstance(m, StokeMutator):
                print(m.table_text())
            if isinstance(m, OptunaMutator):
                print("optuna best config:", m.best(task.key, solo.seed.candidate))


if __name__ == "__main__":
    main()
