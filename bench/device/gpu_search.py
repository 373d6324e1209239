"""A short search on one device: one island, Optuna and STOKE, fitness measured where it runs.

    PYTHONPATH=. python3 bench/device/gpu_search.py OUT_DIR [--tasks softmax,matmul] [--seconds 60] [--device cuda]

The island runs in this process (no Ray: `islands.island.Island` with a local evaluation service),
so the search can be tried on a lone GPU machine with only torch, triton, numpy, deap, optuna,
pydantic, msgpack and pyyaml. On CUDA every latency is measured (CUDA events, baselines timed in
the same worker); on a CPU it is the roofline model, and every figure says which. For each task it
prints the seed's and the best kernel's latency, the best kernel's speedups, its params, the STOKE
move table and Optuna's best config, and writes ``OUT_DIR/gpu_search.json``.
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

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, IslandsConfig
from evo.contracts.mutator_config import OptunaConfig, SelectionConfig, StokeConfig, entry_names
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from fitness.evaluate import Evaluator, device_for
from fitness.latency.stage import target_hardware
from islands.evaluation import EvaluationLedger, LocalEvaluationService
from islands.evaluator_actor import cuda_device_name
from islands.island import Island
from mutators.factory import build_mutator, build_selector


def search(name: str, out: Path, seconds: float, device: str, seed: int) -> dict[str, Any]:
    task = NativeTask(TASK_LIBRARY / name)
    run_dir = out / name
    run_dir.mkdir(parents=True, exist_ok=True)
    ev = Evaluator(task, EvaluationConfig(timeout_s=300.0), device=device)
    try:
        ledger = EvaluationLedger(task.key, device=ev.device)
        service = LocalEvaluationService(lambda c, level: ev.evaluate(c, level=level), ledger)
        configs: list[OptunaConfig | StokeConfig] = [OptunaConfig(trials_per_proposal=4), StokeConfig(chain_length=6)]
        mutators = [build_mutator(c, run_dir=run_dir, seed=seed + i) for i, c in enumerate(configs)]
        names = entry_names(configs)
        selector = build_selector(SelectionConfig(policy="ucb1"), dict.fromkeys(names, 1.0))
        cfg = IslandsConfig(count=1, population=6, offspring=3, tournament_size=2)
        island = Island(0, cfg, task=task, mutators=mutators, selector=selector, service=service, seed=seed,
                        hardware=target_hardware(ev.settings, ev.device, cuda_device_name()))
        start = time.monotonic()
        assert task.seed_source is not None
        report = island.initialize(Candidate.from_source(task.seed_source))
        if not report.seed_ok:
            return {"task": name, "error": f"the seed failed: {report.seed_reason}"}
        generations = 0
        while time.monotonic() - start < seconds:
            r = island.step()
            generations += 1
            print(f"  {name} gen {generations}: best {r.best_latency_ms:.4f} ms ({r.best_latency_source}), "
                  f"{ledger.stats.evaluations} evaluations, {time.monotonic() - start:.0f} s", flush=True)
        best = island.best()
        assert best is not None and island.seed is not None
        stats = {n: m.stats() for n, m in zip(names, mutators)}
        tables = {n: m.table_text() for n, m in zip(names, mutators) if hasattr(m, "table_text")}
        by_mutator: dict[str, Any] = {}
        for ind in [*island.population, *island.hof]:
            cur = by_mutator.get(ind.proposal.mutator)
            if ind.latency_ms is not None and (cur is None or ind.latency_ms < cur["ms"]):
                by_mutator[ind.proposal.mutator] = {"ms": ind.latency_ms, "params": dict(ind.candidate.params)}
        return {
            "task": name, "device": device, "seconds": round(time.monotonic() - start, 1),
            "generations": generations, "evaluations": ledger.stats.evaluations,
            "seed_ms": island.seed.evaluation.latency_ms, "best_ms": best.evaluation.latency_ms,
            "source": best.evaluation.latency_source.value if best.evaluation.latency_source else None,
            "best_speedups": dict(best.evaluation.speedups), "best_params": dict(best.candidate.params),
            "best_mutator": best.proposal.mutator, "best_id": best.id,
            "roofline_fraction": best.evaluation.roofline_fraction, "mutator_stats": stats,
            "move_tables": tables, "best_by_mutator": by_mutator,
        }
    finally:
        ev.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--tasks", default="softmax,matmul")
    ap.add_argument("--seconds", type=float, default=60.0, help="search time per task")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    device = device_for(args.device)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in [t for t in args.tasks.split(",") if t]:
        print(f"gpu_search: {name} on {device} for {args.seconds:.0f} s", flush=True)
        r = search(name, out, args.seconds, device, args.seed)
        results.append(r)
        (out / "gpu_search.json").write_text(json.dumps(results, indent=1, default=str))
        if "error" in r:
            print(f"  {name}: {r['error']}")
            continue
        sp = ", ".join(f"{k} {v:.2f}x" for k, v in r["best_speedups"].items())
        print(f"  {name}: seed {r['seed_ms'] * 1e3:.1f} us -> best {r['best_ms'] * 1e3:.1f} us ({r['source']}); "
              f"speedups {sp}; params {r['best_params']} by {r['best_mutator']}; "
              f"{r['evaluations']} evaluations in {r['seconds']} s")
        for mutator, best in r["best_by_mutator"].items():
            print(f"  best by {mutator}: {best['ms'] * 1e3:.1f} us with {best['params']}")
        for mutator, table in r["move_tables"].items():
            print(f"  {mutator} moves:\n{table}")
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
