"""Latency model benchmark: modelled latency of each library task's seed and known-better kernel,
and what the model costs per candidate next to the equivalence check.

    PYTHONPATH=. python bench/model/model_bench.py [--target h100] [--tasks softmax,matmul]

Runs on the CPU (no GPU needed). Model times are wall time per candidate with warm workers
(interpreter profile and cross-compile run in parallel; a kernel Triton has compiled before comes
from its cache): the first candidate of a task (the seed) also allocates the bench-size tensors,
the second (known-better) shows the steady state. The equivalence time is the full check of the
known-better kernel (10 cases). ``compared`` is how many output elements of the known-better
kernel the model verified against the reference at the bench size (sampled programs run in full),
``full s`` its estimate of a full interpreted run (what `verified` costs on a CPU).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evo.contracts.candidate import Candidate
from evo.contracts.config import (
    EvaluationConfig,
    LatencyMode,
)
from evo.contracts.native_task import TASK_LIBRARY, NativeTask, library_tasks
from fitness.evaluate import Evaluator
from fitness.latency.model import ModelLatency
from fitness.sandbox.process import Worker


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=EvaluationConfig().target_gpu)
    ap.add_argument("--tasks", default=",".join(library_tasks()))
    args = ap.parse_args(argv)
    interp = Worker(device="cpu", memory_mb=8192, isolation=True)
    compiler = Worker(compile_only=True, memory_mb=8192, isolation=True)
    off = EvaluationConfig(memory_mb=8192, latency=LatencyMode.OFF)
    print(f"{'task':11s} {'seed us':>10s} {'better us':>10s} {'model x':>8s} {'bound (better)':>15s} "
          f"{'model s, 1st':>12s} {'model s':>8s} {'equiv s':>8s} {'compared':>9s} {'full s':>7s}")
    try:
        for name in [t for t in args.tasks.split(",") if t]:
            task = NativeTask(TASK_LIBRARY / name)
            model = ModelLatency(task, EvaluationConfig(latency=LatencyMode.MODEL, target_gpu=args.target),
                                 interp_worker=interp, compile_worker=compiler)
            model.data()  # the bench case and its reference are made once per task, not per candidate
            seed = Candidate.from_file(TASK_LIBRARY / name / "seed.py")
            better = Candidate.from_file(TASK_LIBRARY / name / "known_better.py")
            t0 = time.monotonic()
            s = model.measure(seed)  # the first candidate of a task also allocates the bench tensors
            t1 = time.monotonic()
            b = model.measure(better)
            first, per_candidate = t1 - t0, time.monotonic() - t1
            with Evaluator(task, off, device="cpu", worker=interp) as ev:
                check = ev.evaluate(better).check_seconds
            bound = ",".join(str(x.get("bound")) for x in b.detail.get("launches", []))
            verification = b.detail.get("verification") or {}
            speed = s.latency_ms / b.latency_ms if s.latency_ms and b.latency_ms else None
            print(f"{name:11s} {_us(s.latency_ms):>10s} {_us(b.latency_ms):>10s} "
                  f"{'-' if speed is None else f'{speed:.2f}':>8s} {bound:>15s} {first:12.2f} {per_candidate:8.2f} "
                  f"{check:8.2f} {verification.get('elements_compared', '-'):>9} "
                  f"{verification.get('full_run_estimate_s', '-'):>7}")
            for r in (s, b):
                if r.latency_ms is None:
                    print(f"    {r.status.value}: {r.reason}")
    finally:
        interp.close()
        compiler.close()
    return 0


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f}"


if __name__ == "__main__":
    sys.exit(main())
