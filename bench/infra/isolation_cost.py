"""What the worker's OS isolation (Landlock + seccomp, `fitness.sandbox.isolation`) costs: worker start-up
and per-evaluation time with ``evaluation.isolation`` on and off (CPU, Triton interpreter).

    PYTHONPATH=. python bench/infra/isolation_cost.py [--config configs/demo.yaml] [--candidates 8] [--starts 3]

For each setting: the seconds from a fresh worker's start to its first answer (the imports of torch and
triton dominate; the isolation is applied before them), then the median and 90th percentile of a full
evaluation (equivalence check and modelled latency, the config's ``evaluation:`` settings) over points
of the seed's SPACE, each evaluated once with isolation on and once off, alternating so that both see
the same machine load. Prints what the worker reported (`sandbox`) and any part of the isolation it
lacked.
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
from evo.contracts.verdict import FULL
from fitness.evaluate import Evaluator
from fitness.sandbox.process import Worker


def startup_seconds(isolation: bool, starts: int) -> list[float]:
    """Seconds from a fresh worker's start to its first ping answer, `starts` times."""
    times = []
    for _ in range(starts):
        worker = Worker(device="cpu", memory_mb=4096, isolation=isolation)
        t0 = time.perf_counter()
        worker.request({"op": "ping"}, 180.0)
        times.append(time.perf_counter() - t0)
        worker.close()
    return times


def row(label: str, values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return f"{label:<28} {statistics.median(values):8.3f} {p90:8.3f}   (n={len(values)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--starts", type=int, default=3)
    args = ap.parse_args()

    print(f"{'':<28} {'median':>8} {'p90':>8}   seconds")
    for isolation in (True, False):
        print(row(f"worker start, isolation {'on' if isolation else 'off'}", startup_seconds(isolation, args.starts)))

    cfg = load_config(args.config)
    task = build_task(cfg.task, args.config.parent)
    assert task.seed_source is not None, "the task has no seed"
    seed = Candidate.from_source(task.seed_source)
    picked = spread([c for c in space_points(task) if c.id != seed.id], args.candidates)
    evaluators = {flag: Evaluator(task, cfg.evaluation.model_copy(update={"isolation": flag}), device="cpu")
                  for flag in (True, False)}
    times: dict[bool, list[float]] = {True: [], False: []}
    try:
        for flag, ev in evaluators.items():
            sandbox, problems = ev.isolation()
            lacks = f" ({'; '.join(problems)})" if problems else ""
            print(f"isolation {'on ' if flag else 'off'}: sandbox {sandbox}{lacks}")
            ev.evaluate(seed, level=FULL)  # warm: the seed's baselines and the workers' first imports
        for cand in picked:
            for flag, ev in evaluators.items():
                t0 = time.perf_counter()
                verdict = ev.evaluate(cand, level=FULL)
                times[flag].append(time.perf_counter() - t0)
                if flag:
                    print(f"  {cand.id}  {verdict.status.value:<12} {times[flag][-1]:7.2f} s isolated")
    finally:
        for ev in evaluators.values():
            ev.close()
    print(row("full evaluation, isolation on", times[True]))
    print(row("full evaluation, isolation off", times[False]))
    ratios = [a / b for a, b in zip(times[True], times[False], strict=True) if b > 0]
    print(f"{'ratio on/off, median':<28} {statistics.median(ratios):8.3f}")


if __name__ == "__main__":
    main()
