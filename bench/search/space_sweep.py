"""The sweep any search must beat: every point of a task's seed SPACE evaluated once, the best kept.

    PYTHONPATH=. python3 bench/search/space_sweep.py softmax [layernorm ...] [--target-gpu h100] [--device cpu]
    PYTHONPATH=. python3 bench/search/space_sweep.py examples/row_moments     # a task folder outside the library

Each point runs the full evaluation (`fitness.evaluate.Evaluator`, level ``full``: the check, then the
latency, modelled without a GPU) in SPACE order. Prints the table and records, per task key, latency
source and GPU, the best speedup over the seed, its params, the points, the evaluations and seconds
it took, how many uniform random draws from the SPACE reach 95% of the best on average
((N + 1) / (m + 1) for m of N points within 95%) and, where modelled, the latency model's version, in
``bench/data/space_sweeps.json``, which a campaign on the same task reads to say how its result compares
(`evo.app.run.sweep_ref`; only with runs the same model version timed).

The task's known-better kernel (``known_better.py``, where there is one) is evaluated the same way and
its speedup recorded beside the sweep's, so a table can say how far from a known good kernel both are.
A SPACE larger than ``--max-points`` is not swept (its entry records the known-better kernel only);
``--known-better-only`` adds that figure to an entry without sweeping again. ``--workload NAME``
benches at one of the task's named shape lists (``evo/tasks/<task>/workloads.yaml``); its entry is kept
apart from the default bench sizes' (`Task.bench_tag`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evo.app.run.sweep_ref import KNOWN_VERSION, SWEEP_VERSION, SWEEPS, load_sweeps, sweep_key, with_earlier
from evo.contracts.candidate import Candidate, space_point, space_size
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from fitness.evaluate import Evaluator, device_for
from fitness.latency.model_version import version_of


def points(seed: Candidate) -> list[dict[str, Any]]:
    space = seed.space()
    return [{**seed.params, **space_point(space, i)} for i in range(space_size(space))]


def draws_to_95(speedups: list[float]) -> float:
    best = max(speedups)
    m = sum(1 for s in speedups if s >= 0.95 * best)
    return (len(speedups) + 1) / (m + 1)


def _speedup(ev: Evaluator, candidate: Candidate, label: str) -> tuple[float | None, str, str, str]:
    """(speedup over the seed or None, latency source, GPU, latency model version or '') of one full
    evaluation, printed."""
    verdict = ev.evaluate(candidate)
    x = verdict.speedups.get("seed") if verdict.ok else None
    print(f"  {label}: {verdict.status.value}"
          + (f" {verdict.latency_ms:.4g} ms, {x:.3f}x" if x and verdict.latency_ms else ""), flush=True)
    source = verdict.latency_source.value if verdict.latency_source else ""
    return (float(x) if x else None), source, verdict.latency_gpu, version_of(verdict.latency_detail)


def task_folder(name: str) -> Path:
    """A library task's folder, or `name` itself where it is a folder holding a task.py."""
    given = Path(name)
    return given if (given / "task.py").is_file() else TASK_LIBRARY / name


def sweep(name: str, settings: EvaluationConfig, *, max_points: int | None = None,
          do_sweep: bool = True, workload: str | None = None) -> dict[str, Any]:
    """The sweep's entry for one task; without `do_sweep` (or past `max_points`) the known-better only."""
    folder = task_folder(name)
    given, name = name, folder.name
    task = NativeTask(folder)
    if workload:
        task.use_workload(workload)
    assert task.seed_source is not None, f"{name} has no seed"
    seed = Candidate.from_source(task.seed_source)
    grid = points(seed)
    do_sweep = do_sweep and (max_points is None or len(grid) <= max_points)
    start = time.monotonic()
    rows: list[tuple[dict[str, Any], float]] = []
    source, gpu, known = "", "", None
    versions: dict[str, str] = {}  # SWEEP_VERSION / KNOWN_VERSION: the model version of each modelled figure
    with Evaluator(task, settings, device=device_for(settings.device)) as ev:
        for i, params in enumerate(grid if do_sweep else []):
            x, x_source, x_gpu, x_version = _speedup(ev, seed.with_params(**params), f"{name} {i + 1:3d} {params}")
            if x:  # a failed point has no latency source: it must not blank the key's
                rows.append((params, x))
                source, gpu = x_source, x_gpu
                if x_version:
                    versions[SWEEP_VERSION] = x_version
        better = folder / "known_better.py"
        if better.is_file():
            known, k_source, k_gpu, k_version = _speedup(ev, Candidate.from_file(better), f"{name} known-better")
            source, gpu = source or k_source, gpu or k_gpu
            if known and k_version:
                versions[KNOWN_VERSION] = k_version
    out: dict[str, Any] = {"task": name, "task_key": task.key, "latency_source": source, "gpu": gpu,
                           **({"source": given} if given != name else {}),  # a folder outside the library
                           **({"workload": workload, "bench_tag": task.bench_tag} if workload else {}),
                           "points": len(grid), "known_better_speedup": round(known, 4) if known else None,
                           "measured": time.strftime("%Y-%m-%d"), **versions}
    if do_sweep and rows:
        best_params, best = max(rows, key=lambda r: r[1])
        out.update(evaluations=len(grid), correct=len(rows), best_speedup=round(best, 4), best_params=best_params,
                   seconds=round(time.monotonic() - start, 1), draws_to_95=round(draws_to_95([x for _, x in rows]), 2))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--target-gpu", default="h100")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--output", type=Path, default=SWEEPS)
    ap.add_argument("--max-points", type=int, default=100, help="do not sweep a larger SPACE (default 100)")
    ap.add_argument("--profile-memory-mb", type=int, default=EvaluationConfig().profile_memory_mb,
                    help="address space for bench-size buffers on a CPU (the attention seeds need 12288)")
    ap.add_argument("--known-better-only", action="store_true",
                    help="evaluate the known-better kernel and keep the entry's sweep as it is")
    ap.add_argument("--workload", help="bench at this named shape list of each task (evo/tasks/<task>/workloads.yaml)")
    args = ap.parse_args()
    settings = EvaluationConfig(device=args.device, latency=LatencyMode.AUTO, target_gpu=args.target_gpu,
                                profile_memory_mb=args.profile_memory_mb)
    for name in args.tasks:
        r = sweep(name, settings, max_points=args.max_points, do_sweep=not args.known_better_only,
                  workload=args.workload)
        key = sweep_key(r["task_key"], r["latency_source"], r["gpu"], r.get("bench_tag", ""))
        sweeps = load_sweeps(args.output)  # read again: another sweep may have written its task meanwhile
        old = sweeps.get(key, {})
        sweeps[key] = {**old, **r} if "best_speedup" not in r else with_earlier(old, r)
        known = f"known-better {r['known_better_speedup']:.3f}x" if r["known_better_speedup"] else "no known-better"
        if "best_speedup" in r:
            print(f"{name}: best {r['best_speedup']:.3f}x over the seed at {r['best_params']} "
                  f"({r['correct']}/{r['points']} points correct, {r['seconds']:.0f} s; random draws reach 95% of it "
                  f"in {r['draws_to_95']:.1f} on average); {known}", flush=True)
        else:
            kept = "the sweep kept as it was" if args.known_better_only else f"not swept ({r['points']} points)"
            print(f"{name}: {kept}; {known}", flush=True)
        args.output.write_text(json.dumps(sweeps, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
