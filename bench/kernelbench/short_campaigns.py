"""Short CPU campaigns on KernelBench problems, their best kernels modelled at the problems' own sizes.

    python -m bench.kernelbench.short_campaigns [--problems 2,4,21] [--generations 3]
                                                [--wall-time-s 90] [--workdir DIR]

For each problem a seed ships for (or those given), what a user does: ``evo init kbN --kernelbench FILE
--device cpu`` (the shipped seed, the CPU check and bench sizes `evo init` picks), the budget cut to
``--generations`` and ``--wall-time-s``, then
the command it prints (``evo run``: Optuna and STOKE mutators, no LLM, the interpreter, latency modelled at
the small CPU bench size). The campaign's best kernel (checked by the campaign, status ``ok``) is then
modelled at KernelBench's own size like the seed (`bench.kernelbench.model_at_size`) and added to the
problem's row in bench/data/kernelbench_model_h100.jsonl as ``campaign``. Its figure is, like every modelled
one there, an unverified estimate of an honest kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.kernelbench.model_at_size import OUT, Modeller, layout, read_rows, shipped_problems, write_rows
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.gpus import get_profile

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")}, "PYTHONPATH": str(ROOT)}


def campaign(problem: Path, workdir: Path, generations: int, wall_time_s: int) -> dict[str, Any]:
    """Run the short campaign `evo init` sets up for `problem`; its summary and best kernel's path."""
    name = f"kb{problem.name.split('_')[0]}"
    init = subprocess.run([sys.executable, "-m", "evo", "init", name, "--kernelbench", str(problem), "--device",
                           "cpu"], cwd=workdir, capture_output=True, text=True, env=_env(), timeout=900)
    if init.returncode != 0:
        return {"error": f"evo init failed: {init.stderr.strip()[-300:]}"}
    config = workdir / name / "campaign.yaml"
    text = config.read_text().replace("  generations: 4\n", f"  generations: {generations}\n")
    config.write_text(text.replace("  wall_time_s: 240\n", f"  wall_time_s: {wall_time_s}\n"))
    command = init.stderr.strip().splitlines()[-1]  # the command `evo init` prints last starts the campaign
    started = time.monotonic()
    run = subprocess.run(command, shell=True, cwd=workdir, capture_output=True, text=True, env=_env(), timeout=1800)
    if run.returncode != 0:
        return {"error": f"the campaign failed: {run.stderr.strip()[-300:]}"}
    runs = sorted((workdir / "runs").glob(f"{name}-*"), key=lambda p: p.stat().st_mtime)
    if not runs or not (runs[-1] / "summary.json").is_file():
        return {"error": "the campaign left no summary.json"}
    summary = json.loads((runs[-1] / "summary.json").read_text())
    return {"summary": summary, "best": summary.get("best") or {}, "seconds": time.monotonic() - started,
            "kernel": runs[-1] / "best_kernel.py"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="", help="problem numbers, comma-separated (default: every shipped seed's)")
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--wall-time-s", type=int, default=90)
    ap.add_argument("--workdir", type=Path, default=None, help="where the campaigns run (default: a temporary folder)")
    ap.add_argument("--data", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = read_rows(args.data)
    numbers = {int(n) for n in args.problems.split(",") if n}
    problems = shipped_problems(numbers)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="evo-kb-campaigns-"))
    workdir.mkdir(parents=True, exist_ok=True)
    modeller = Modeller(get_profile("h100"), EvaluationConfig())
    try:
        for i, problem in enumerate(problems, 1):
            found = campaign(problem, workdir, args.generations, args.wall_time_s)
            entry: dict[str, Any] = {"generations": args.generations, "wall_time_s": args.wall_time_s}
            if "error" in found:
                entry["error"] = found["error"]
            elif found["best"].get("status") != "ok" or not found["kernel"].is_file():
                entry["error"] = f"no checked best kernel (best: {found['best'].get('status')})"
            else:
                kernel = found["kernel"]
                params = dict(Candidate.from_file(kernel).params)
                summary = found["summary"]
                entry.update(params=params, checked=True, campaign_s=round(found["seconds"], 1),
                             evaluations=summary.get("evaluations"), mutator=found["best"].get("mutator"),
                             cpu_bench_speedup_over_seed=found["best"].get("speedup_over_seed"),
                             source=kernel.read_text(), **modeller.model(kernel, params, layout(problem)))
            rows[problem.name]["campaign"] = entry
            write_rows(args.data, rows)
            figure = f"{entry['ms']:.3f} ms" if "ms" in entry else entry.get("error", "")[:100]
            print(f"[{i}/{len(problems)}] {problem.stem:38s} campaign best {figure} "
                  f"(seed {rows[problem.name]['seed'].get('ms', float('nan')):.3f} ms, "
                  f"tuned {rows[problem.name].get('tuned', {}).get('ms', float('nan')):.3f} ms)", flush=True)
    finally:
        modeller.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
