"""What one process per candidate costs (`fitness.sandbox.forkserver`): per-evaluation time on the demo's
task and settings, and the round trip of a load and one small run, in the tree this script is run from.

    PYTHONPATH=. python bench/infra/forkserver_cost.py [--config configs/demo.yaml] [--candidates 8] [--loads 20]

Run it from this checkout and from a checkout before the fork server (same command, that tree's
``PYTHONPATH``) on the same machine, one after the other, to compare: the load round trip isolates the
fork (a child forked from the pre-imported worker, the candidate imported in it) from the rest of an
evaluation, which also carries whatever else the check does in that tree.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.infra.verification_cost import space_points, spread
from evo.contracts.candidate import Candidate
from evo.contracts.config_file import load_config
from evo.contracts.task_loader import build_task
from evo.contracts.verdict import FULL, QUICK
from fitness.evaluate import Evaluator


def row(label: str, values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return f"{label:<34} {statistics.median(values):8.3f} {p90:8.3f}   (n={len(values)})"


def load_round_trips(ev: Evaluator, candidates: list[Candidate], n: int) -> list[float]:
    """Seconds of a ``load`` request and the ping that confirms it, for `n` loads of different candidates."""
    times = []
    for i in range(n):
        cand = candidates[i % len(candidates)]
        t0 = time.perf_counter()
        reply = ev.worker.request({"op": "load", "source": cand.source, "params": cand.params,
                                   "name": f"{cand.id}{i}"}, 60.0)
        times.append(time.perf_counter() - t0)
        assert reply.get("ok"), reply
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--loads", type=int, default=20)
    args = ap.parse_args()

    cfg = load_config(args.config)
    task = build_task(cfg.task, args.config.parent)
    assert task.seed_source is not None, "the task has no seed"
    seed = Candidate.from_source(task.seed_source)
    picked = spread([c for c in space_points(task) if c.id != seed.id], args.candidates)
    print(f"tree: {ROOT}")
    print(f"{'':<34} {'median':>8} {'p90':>8}   seconds")
    with Evaluator(task, cfg.evaluation, device="cpu") as ev:
        ev.evaluate(seed, level=FULL)  # warm: the worker's imports, the seed's modelled latency
        print(row("load round trip", load_round_trips(ev, picked, args.loads)))
        quick, full = [], []
        for cand in picked:
            t0 = time.perf_counter()
            ev.evaluate(cand, level=QUICK)
            quick.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            verdict = ev.evaluate(cand, level=FULL)
            full.append(time.perf_counter() - t0)
            print(f"  {cand.id}  {verdict.status.value:<12} quick {quick[-1]:6.2f} s  full {full[-1]:7.2f} s")
        print(row("quick evaluation (STOKE's check)", quick))
        print(row("full evaluation", full))
        print(f"forks: {'yes' if getattr(ev.worker, 'forks', False) else 'no'}")


if __name__ == "__main__":
    main()
