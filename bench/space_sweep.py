"""The sweep any search must beat: every point of a task's seed SPACE evaluated once, the best kept.

    PYTHONPATH=. python3 bench/space_sweep.py softmax [layernorm ...] [--target-gpu h100] [--device cpu]

Each point runs the full evaluation (`fitness.evaluate.Evaluator`, level ``full``: the check, then the
latency, modelled without a GPU) in SPACE order. Prints the table and records, per task key, latency
source and GPU, the best speedup over the seed, its params, the points, the evaluations and seconds
it took, and how many uniform random draws from the SPACE reach 95% of the best on average
((N + 1) / (m + 1) for m of N points within 95%), in ``bench/data/space_sweeps.json``, which a
campaign on the same task reads to say how its result compares (`evo.app.sweep_ref`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evo.app.sweep_ref import SWEEPS, load_sweeps, sweep_key
from evo.contracts.candidate import Candidate, space_point, space_size
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from fitness.evaluate import Evaluator, device_for


def points(seed: Candidate) -> list[dict[str, Any]]:
    space = seed.space()
    return [{**seed.params, **space_point(space, i)} for i in range(space_size(space))]


def draws_to_95(speedups: list[float]) -> float:
    best = max(speedups)
    m = sum(1 for s in speedups if s >= 0.95 * best)
    return (len(speedups) + 1) / (m + 1)


def sweep(name: str, settings: EvaluationConfig) -> dict[str, Any]:
    task = NativeTask(TASK_LIBRARY / name)
    assert task.seed_source is not None, f"{name} has no seed"
    seed = Candidate.from_source(task.seed_source)
    start = time.monotonic()
    rows: list[tuple[dict[str, Any], float]] = []
    source, gpu = "", ""
    with Evaluator(task, settings, device=device_for(settings.device)) as ev:
        for i, params in enumerate(points(seed)):
            verdict = ev.evaluate(seed.with_params(**params))
            x = verdict.speedups.get("seed") if verdict.ok else None
            print(f"  {name} {i + 1:3d} {params}: {verdict.status.value}"
                  + (f" {verdict.latency_ms:.4g} ms, {x:.3f}x" if x and verdict.latency_ms else ""), flush=True)
            if x:
                rows.append((params, float(x)))
                source = verdict.latency_source.value if verdict.latency_source else ""
                gpu = verdict.latency_gpu
    seconds = time.monotonic() - start
    best_params, best = max(rows, key=lambda r: r[1])
    return {"task": name, "task_key": task.key, "latency_source": source, "gpu": gpu, "points": len(points(seed)),
            "evaluations": len(points(seed)), "correct": len(rows), "best_speedup": round(best, 4),
            "best_params": best_params, "seconds": round(seconds, 1),
            "draws_to_95": round(draws_to_95([x for _, x in rows]), 2), "measured": time.strftime("%Y-%m-%d")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--target-gpu", default="h100")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--output", type=Path, default=SWEEPS)
    args = ap.parse_args()
    settings = EvaluationConfig(device=args.device, latency=LatencyMode.AUTO, target_gpu=args.target_gpu)
    sweeps = load_sweeps(args.output)
    for name in args.tasks:
        r = sweep(name, settings)
        sweeps[sweep_key(r["task_key"], r["latency_source"], r["gpu"])] = r
        print(f"{name}: best {r['best_speedup']:.3f}x over the seed at {r['best_params']} "
              f"({r['correct']}/{r['points']} points correct, {r['seconds']:.0f} s; random draws reach 95% of it "
              f"in {r['draws_to_95']:.1f} on average)", flush=True)
        args.output.write_text(json.dumps(sweeps, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
