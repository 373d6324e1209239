"""Drive the STOKE and Optuna mutators alone on one library task and print what they found.

    .venv/bin/python -m bench.mutators_alone --task softmax --rounds 6

Correctness is the real equivalence checker. Latency is the evaluator's own when it reports one
(the latency stage); until then, or with ``--standin``, it is the TEST STAND-IN of
``tests/fakes/standin.py``, which is not a performance model: figures printed under it only show
that the search machinery works, never how fast a kernel is.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from evo.candidate import Candidate
from evo.native_task import TASK_LIBRARY, NativeTask
from fitness.evaluate import EvalSettings, Evaluator
from fitness.status import Evaluation
from mutators.base import MutationContext, Mutator, Scored
from mutators.config import OptunaConfig, StokeConfig, build_mutator
from mutators.optuna_tuner import OptunaMutator
from mutators.stoke import StokeMutator
from tests.fakes.standin import with_standin_latency


def drive(m: Mutator, task: NativeTask, evaluate: object, rounds: int) -> tuple[Scored, Scored, int]:
    assert callable(evaluate)
    seed_c = Candidate.from_source(task.seed_source or "")
    seed = best = Scored(seed_c, evaluate(seed_c, "full"))
    ctx = MutationContext(task=task, rng=random.Random(0), evaluate=evaluate, hardware="CPU interpreter")
    n = 0
    for _ in range(rounds):
        for p in m.propose(best, ctx):
            n += 1
            if p.candidate is not None:
                e = evaluate(p.candidate, "full")
                m.observe(p, e)
                if e.ok and e.latency_ms is not None and e.latency_ms < best.latency_ms:
                    best = Scored(p.candidate, e)
    return seed, best, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="softmax", choices=sorted(p.name for p in TASK_LIBRARY.glob("*/task.py")
                                                                 for p in [p.parent]))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--chain", type=int, default=6)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--standin", action="store_true", help="use the test stand-in latency even if one is measured")
    args = ap.parse_args()
    task = NativeTask(TASK_LIBRARY / args.task)
    ev = Evaluator(task, EvalSettings(memory_mb=2048))
    label = {"standin": False}

    def evaluate(c: Candidate, level: str) -> Evaluation:
        e = ev.evaluate(c, level=level)
        if e.ok and (args.standin or e.latency_ms is None):
            label["standin"] = True
            return with_standin_latency(e, c)
        return e

    run_dir = Path(tempfile.mkdtemp(prefix="evo-bench-"))
    for cfg in (StokeConfig(chain_length=args.chain), OptunaConfig(trials_per_proposal=args.trials)):
        m = build_mutator(cfg, run_dir=run_dir, seed=0)
        t0 = time.monotonic()
        seed, best, n = drive(m, task, evaluate, args.rounds)
        unit = "ms (TEST STAND-IN, not a measurement)" if label["standin"] else f"ms ({ev.device})"
        print(f"\n== {cfg.kind} on {task.name}: {n} proposals in {time.monotonic() - t0:.1f} s; "
              f"seed {seed.latency_ms:.4g} -> best {best.latency_ms:.4g} {unit}")
        if isinstance(m, StokeMutator):
            print(m.table_text())
            print("best:", best.candidate.params, "|", best.candidate.id)
        if isinstance(m, OptunaMutator):
            print("optuna best config:", m.best(task.key, seed.candidate))
    ev.close()


if __name__ == "__main__":
    main()
