"""The calibration sweep: every kernel of the committed list measured (one device timing slot) and
modelled (CPU threads, in parallel with the timing), one JSON line per kernel.

    PYTHONPATH=. python bench/model/calibration_sweep.py OUT.jsonl [--seconds 150] [--tasks ...] [--model-only]

Used by `bench/device/device_check.py` (step b). Measured: `fitness.evaluate.Evaluator` on the device at the
``quick`` level (the first check sizes, then the CUDA timer at the first bench size, no baselines: only
the kernel's own time is wanted). Modelled: `fitness.latency.model.ModelLatency` for the target GPU.
On a machine without CUDA the "measurement" is the model itself and every row says so in
``measured_by`` ("modelled (rehearsal, no GPU)"); `fitness.latency.calibration` ignores such rows.

The file is resumable: kernels already measured (by the same ``measured_by``) are skipped, so a run cut
short continues where it stopped. ``--model-only`` fills the modelled figures of rows that lack them
(or, with ``--remodel``, all of them, after the model changed) on a CPU, with no GPU needed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.model.calibration_kernels import CalibrationKernel, load, rebuild
from evo.contracts.config import EvaluationConfig, LatencyMode, TimerConfig
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.verdict import QUICK
from fitness.evaluate import Evaluator, detect_device
from fitness.latency.calibration import MEASURED_BY_CUDA
from fitness.latency.model import ModelLatency
from fitness.latency.model_version import version_of
from fitness.latency.result import LatencyResult
from fitness.sandbox.process import Worker

REHEARSAL = "modelled (rehearsal, no GPU)"
MEMORY_MB = 8192
_DETAIL_KEYS = ("median_ms", "min_ms", "max_ms", "reps", "copies", "size")


def measured_by(device: str) -> str:
    return MEASURED_BY_CUDA if device == "cuda" else REHEARSAL


def measure_settings(device: str, target: str, isolation: bool = True) -> EvaluationConfig:
    """The evaluator's settings for a sweep measurement: no baselines, a short timer (2 input copies)."""
    return EvaluationConfig(timeout_s=300.0, memory_mb=MEMORY_MB, latency=LatencyMode.AUTO if device == "cuda"
                            else LatencyMode.MODEL, target_gpu=target, baselines=[], latency_timeout_s=300.0,
                            quick_timer=TimerConfig(warmup_reps=3, rep_ms=40.0, min_reps=5, max_reps=200, copies=2),
                            profile_memory_mb=12288, isolation=isolation)


def model_summary(r: LatencyResult) -> dict[str, Any]:
    """The modelled figure and the parts of the model's detail worth keeping in a small data file."""
    launches = [{k: v for k, v in x.items() if not isinstance(v, (dict, list))}
                for x in r.detail.get("launches", [])]
    return {"modelled_ms": r.latency_ms, "model_status": r.status.value, "model_reason": r.reason[:300],
            "model_version": version_of(r.detail), "model_detail": {"launches": launches, "gpu": r.gpu}}


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows))
    tmp.replace(path)


@dataclass
class Modeller:
    """CPU threads modelling kernels while the device measures others; each with its own workers."""

    target: str
    threads: int
    isolation: bool = True
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    todo: queue.Queue[CalibrationKernel | None] = field(default_factory=queue.Queue)
    stop_at: float = float("inf")

    def start(self) -> list[threading.Thread]:
        ts = [threading.Thread(target=self._run, daemon=True) for _ in range(self.threads)]
        for t in ts:
            t.start()
        return ts

    def _run(self) -> None:
        interp = Worker(device="cpu", memory_mb=MEMORY_MB, bench_memory_mb=12288, isolation=self.isolation)
        compiler = Worker(compile_only=True, memory_mb=MEMORY_MB, isolation=self.isolation)
        models: dict[str, ModelLatency] = {}
        settings = EvaluationConfig(latency=LatencyMode.MODEL, target_gpu=self.target, profile_memory_mb=12288,
                                    isolation=self.isolation)
        try:
            while (k := self.todo.get()) is not None and time.monotonic() < self.stop_at:
                if k.task not in models:
                    models[k.task] = ModelLatency(NativeTask(TASK_LIBRARY / k.task), settings,
                                                  interp_worker=interp, compile_worker=compiler)
                t0 = time.monotonic()
                try:
                    found = model_summary(models[k.task].measure(rebuild(k)))
                except Exception as e:  # one kernel's failure must not end the sweep; the row says why
                    found = {"modelled_ms": None, "model_status": "error", "model_reason": f"{type(e).__name__}: {e}"}
                self.results[k.id] = {**found, "model_target": self.target, "model_s": round(time.monotonic() - t0, 2)}
        finally:
            interp.close()
            compiler.close()


def _ordered(kernels: list[CalibrationKernel]) -> list[list[CalibrationKernel]]:
    by_task: dict[str, list[CalibrationKernel]] = {}
    for k in kernels:
        by_task.setdefault(k.task, []).append(k)
    return list(by_task.values())


def sweep(kernels: list[CalibrationKernel], out: Path, *, device: str, target: str, seconds: float,
          model_threads: int, isolation: bool = True) -> dict[str, Any]:
    """Measure and model `kernels` into `out` for about `seconds` (each task an equal share of what is
    left); returns counts. Kernels measured before (same `measured_by`) are skipped."""
    label = measured_by(device)
    earlier = read_rows(out)
    others = [r for r in earlier if r.get("measured_by") != label or not r.get("status")]  # kept as they are
    rows = {r["id"]: r for r in earlier if r.get("measured_by") == label and r.get("status")}
    todo = [k for k in kernels if k.id not in rows]
    start = time.monotonic()
    deadline = start + seconds
    modeller = Modeller(target, model_threads, isolation, stop_at=deadline + 60.0)
    for k in [*(k for k in kernels if k.id in rows and rows[k.id].get("model_status") is None), *todo]:
        modeller.todo.put(k)  # first what an earlier run measured but did not model
    for _ in range(model_threads):
        modeller.todo.put(None)
    threads = modeller.start()
    settings = measure_settings(device, target, isolation)
    worker = Worker(device=device, memory_mb=MEMORY_MB, bench_memory_mb=0 if device == "cuda" else 12288,
                    isolation=isolation)
    groups = _ordered(todo)
    measured: list[dict[str, Any]] = []
    try:
        for i, group in enumerate(groups):
            task_deadline = time.monotonic() + (deadline - time.monotonic()) / (len(groups) - i)
            with Evaluator(NativeTask(TASK_LIBRARY / group[0].task), settings, device=device, worker=worker) as ev:
                for k in group:
                    if time.monotonic() >= task_deadline:
                        break
                    t0 = time.monotonic()
                    verdict = ev.evaluate(rebuild(k), level=QUICK)
                    timing = {x: verdict.latency_detail.get(x) for x in _DETAIL_KEYS if x in verdict.latency_detail}
                    row = {"task": k.task, "id": k.id, "variant": k.variant, "params": k.params, "measured_by": label,
                           "measured_ms": verdict.latency_ms, "status": verdict.status.value,
                           "reason": verdict.reason[:300], "timing": timing, "gpu": verdict.latency_gpu,
                           "evaluate_s": round(time.monotonic() - t0, 2)}
                    measured.append(row)
                    rows[k.id] = row
                    print(f"  sweep {k.task}/{k.id} {k.params}: {verdict.status.value} "
                          f"{_ms(verdict.latency_ms)} ({label}, {time.monotonic() - t0:.1f} s)", flush=True)
                    write_rows(out, others + _merged(rows, modeller.results))
    finally:
        worker.close()
    for t in threads:  # the model's stragglers get a minute after the deadline; --model-only does the rest
        t.join(timeout=None if math.isinf(modeller.stop_at) else max(0.0, modeller.stop_at - time.monotonic()))
    done = _merged(rows, modeller.results)
    write_rows(out, others + done)
    return {"measured_by": label, "kernels": len(kernels), "measured_now": len(measured),
            "measured_total": sum(1 for r in done if r.get("measured_ms")),
            "modelled_total": sum(1 for r in done if r.get("modelled_ms")),
            "seconds": round(time.monotonic() - start, 1)}


def _merged(rows: dict[str, dict[str, Any]], modelled: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, **modelled.get(i, {})} for i, r in rows.items()]


def model_only(path: Path, kernels: list[CalibrationKernel], *, target: str, threads: int, remodel: bool) -> int:
    """Fill the modelled figures of `path`'s rows (all of them with `remodel`) on this machine's CPUs."""
    rows = read_rows(path)
    by_id = {k.id: k for k in kernels}
    want = [by_id[r["id"]] for r in rows if r["id"] in by_id and (remodel or r.get("modelled_ms") is None)]
    modeller = Modeller(target, threads)
    for k in want:
        modeller.todo.put(k)
    for _ in range(threads):
        modeller.todo.put(None)
    for t in modeller.start():
        t.join()
    write_rows(path, [{**r, **modeller.results.get(r["id"], {})} for r in rows])
    return len(modeller.results)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f} ms"


def default_threads(device: str) -> int:
    cpus = os.cpu_count() or 1
    return max(1, min(6, cpus // 2)) if device == "cuda" else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seconds", type=float, default=150.0)
    ap.add_argument("--tasks", default="", help="comma-separated library tasks (default: all in the list)")
    ap.add_argument("--per-task", type=int, default=0, help="at most this many kernels per task (0: all)")
    ap.add_argument("--target", default="h200")
    ap.add_argument("--model-only", action="store_true", help="fill modelled figures only (CPU)")
    ap.add_argument("--remodel", action="store_true", help="with --model-only: model every row again")
    ap.add_argument("--threads", type=int, default=0, help="model threads (default: from the CPU count)")
    args = ap.parse_args(argv)
    kernels = select(load(), [t for t in args.tasks.split(",") if t], args.per_task)
    device = detect_device()
    threads = args.threads or default_threads(device)
    if args.model_only:
        n = model_only(args.out, kernels, target=args.target, threads=threads, remodel=args.remodel)
        print(f"calibration_sweep: modelled {n} kernels into {args.out}")
        return 0
    print(json.dumps(sweep(kernels, args.out, device=device, target=args.target, seconds=args.seconds,
                           model_threads=threads)))
    return 0


def select(kernels: list[CalibrationKernel], tasks: list[str], per_task: int) -> list[CalibrationKernel]:
    """The kernels of `tasks` (all when empty), at most `per_task` of each (all when 0), in list order."""
    out: list[CalibrationKernel] = []
    for k in kernels:
        if tasks and k.task not in tasks:
            continue
        if per_task and sum(1 for o in out if o.task == k.task) >= per_task:
            continue
        out.append(k)
    return out


if __name__ == "__main__":
    sys.exit(main())
