"""GPU check: every library task's seed and known-better kernel, measured on CUDA and modelled.

    PYTHONPATH=. python3 bench/device/gpu_check.py OUT_DIR [--tasks softmax,matmul] [--baselines seed,torch]

For each task this runs the same code path as ``evo eval`` on the CUDA device (equivalence on the
GPU, then timing interleaved with the seed, torch eager and torch.compile in the same worker), and the
latency model of the same GPU (its profile, when known) for comparison. It prints a table and
writes ``OUT_DIR/gpu_check.json``. Exit status: 0 when every variant passed and every known-better
kernel measured faster than its seed, 1 otherwise, 2 without a CUDA device. Sized to finish in
under 5 minutes on one H100/H200 (about a minute of which is torch.compile).
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
from evo.contracts.config import (
    Baseline,
    EvaluationConfig,
    LatencyMode,
)
from evo.contracts.gpus import profile_for_device
from evo.contracts.native_task import TASK_LIBRARY, NativeTask, library_tasks
from evo.contracts.verdict import Evaluation
from fitness.evaluate import Evaluator
from fitness.latency.model import ModelLatency
from fitness.sandbox.process import Worker

VARIANTS = ("seed", "known_better")


def _cuda_device() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.cuda.get_device_name(0)) if torch.cuda.is_available() else None


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _spin(ev: Evaluation) -> str:
    """The GPU spin-up before the candidate's timing: how long, and how the chunk time fell."""
    sp = ev.latency_detail.get("spin_up")
    if not sp:
        return ""
    return (f"; spin-up {sp['ms']:.0f} ms, chunk {sp['first_ms']:.2f} -> {sp['last_ms']:.2f} ms"
            f"{'' if sp['settled'] else ' (not settled)'}")


def _row(task: str, variant: str, ev: Evaluation, model: Any) -> dict[str, Any]:
    return {
        "task": task, "variant": variant, "status": ev.status.value, "reason": ev.reason,
        "measured_us": None if ev.latency_ms is None else ev.latency_ms * 1e3,
        "model_us": None if model.latency_ms is None else model.latency_ms * 1e3,
        "speedups": dict(ev.speedups), "model_speedups": dict(model.speedups),
        "roofline_fraction": ev.roofline_fraction, "model_roofline_fraction": model.roofline_fraction,
        "model_bound": [x.get("bound") for x in model.detail.get("launches", [])],
        "model_status": model.status.value, "model_reason": model.reason,
        "verdict": ev.to_dict(), "model_detail": model.detail,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (f"{'task':11s} {'variant':12s} {'status':8s} {'measured us':>11s} {'model us':>9s} {'x seed':>7s} "
            f"{'x torch':>7s} {'x compile':>9s} {'roofline':>8s} {'model x seed':>12s} {'model roofline':>14s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        s = r["speedups"]
        print(f"{r['task']:11s} {r['variant']:12s} {r['status']:8s} {_fmt(r['measured_us']):>11s} "
              f"{_fmt(r['model_us']):>9s} {_fmt(s.get('seed'), '.2f'):>7s} {_fmt(s.get('torch'), '.2f'):>7s} "
              f"{_fmt(s.get('torch_compile'), '.2f'):>9s} {_fmt(r['roofline_fraction'], '.2f'):>8s} "
              f"{_fmt(r['model_speedups'].get('seed'), '.2f'):>12s} {_fmt(r['model_roofline_fraction'], '.2f'):>14s}")
        if r["status"] != "ok":
            print(f"    {r['status']}: {r['reason'][:300]}")
        if r["model_status"] != "ok" or r["model_us"] is None:
            print(f"    model: {r['model_status']}: {r['model_reason'][:300]}")


def check_tasks(tasks: list[str], out: Path, *, device: str, device_name: str, target: str,
                settings: EvaluationConfig, memory_mb: int, measured_by: str = "cuda"
                ) -> tuple[list[dict[str, Any]], list[str], float]:
    """Each task's seed and known-better kernel evaluated on `device` with `settings` and modelled for
    `target`; rows, failures and seconds, also written to ``out/gpu_check.json`` after every task.
    `measured_by` says what produced the "measured" figures (a CPU rehearsal: the model)."""
    start = time.monotonic()
    bench_mb = settings.profile_memory_mb if device == "cpu" else 0  # a CPU stand-in also runs the model there
    cuda = Worker(device=device, memory_mb=memory_mb, bench_memory_mb=bench_mb, isolation=settings.isolation)
    interp = Worker(device="cpu", memory_mb=memory_mb, isolation=settings.isolation)
    compiler = Worker(compile_only=True, memory_mb=memory_mb, isolation=settings.isolation)
    rows: list[dict[str, Any]] = []
    failures: list[str] = []

    def write() -> float:
        elapsed = time.monotonic() - start
        report = {"device": device_name, "measured_by": measured_by, "model_target": target, "seconds": elapsed,
                  "rows": rows,
                  "failures": failures, "sandbox": {w: {"mechanism": k.sandbox, "problems": k.sandbox_problems}
                                                    for w, k in (("cuda", cuda), ("interp", interp))}}
        (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str))
        return elapsed

    try:
        for name in tasks:
            task = NativeTask(TASK_LIBRARY / name)
            model = ModelLatency(task, EvaluationConfig(latency=LatencyMode.MODEL, target_gpu=target),
                                 interp_worker=interp, compile_worker=compiler)
            with Evaluator(task, settings, device=device, worker=cuda) as ev:
                for variant in VARIANTS:
                    t0 = time.monotonic()
                    cand = Candidate.from_file(TASK_LIBRARY / name / f"{variant}.py")
                    verdict = ev.evaluate(cand)
                    modelled = model.measure(cand)
                    rows.append(_row(name, variant, verdict, modelled))
                    print(f"  {name}/{variant}: {verdict.status.value} measured {_fmt(rows[-1]['measured_us'])} us, "
                          f"model {_fmt(rows[-1]['model_us'])} us ({time.monotonic() - t0:.1f} s){_spin(verdict)}",
                          flush=True)
                    if not verdict.ok:
                        failures.append(f"{name}/{variant}: {verdict.status.value}: {verdict.reason}")
            seed_row, better_row = rows[-2], rows[-1]
            if (seed_row["measured_us"] and better_row["measured_us"]
                    and better_row["measured_us"] >= seed_row["measured_us"]):
                failures.append(f"{name}: known_better ({better_row['measured_us']:.1f} us) is not faster than "
                                f"the seed ({seed_row['measured_us']:.1f} us)")
            write()  # after every task: a run cut short keeps what it measured
    finally:
        for w in (cuda, interp, compiler):
            w.close()
    return rows, failures, write()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", help="directory for gpu_check.json")
    ap.add_argument("--tasks", default=",".join(library_tasks()), help="comma-separated library tasks")
    ap.add_argument("--baselines", default=",".join(b.value for b in Baseline),
                    help="comma-separated: seed,torch,torch_compile")
    ap.add_argument("--memory-mb", type=int, default=8192, help="memory limit of the model's interpreter worker")
    ap.add_argument("--no-isolation", action="store_true",
                    help="run the workers without OS isolation (to tell an isolation problem from a GPU one)")
    args = ap.parse_args(argv)
    device_name = _cuda_device()
    if device_name is None:
        print("gpu_check: no CUDA device here (torch.cuda.is_available() is False); run it on a machine with "
              "an NVIDIA GPU", file=sys.stderr)
        return 2
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = [t for t in tasks if not (TASK_LIBRARY / t / "known_better.py").is_file()]
    if unknown:
        print(f"gpu_check: no known-better variant for {unknown}; tasks: {', '.join(library_tasks())}",
              file=sys.stderr)
        return 2
    profile = profile_for_device(device_name)
    target = profile.name if profile else EvaluationConfig().target_gpu
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = EvaluationConfig(timeout_s=300.0, memory_mb=args.memory_mb, latency=LatencyMode.AUTO,
                                target_gpu=target, baselines=[Baseline(b) for b in args.baselines.split(",") if b],
                                latency_timeout_s=600.0, isolation=not args.no_isolation)
    print(f"gpu_check: {device_name}; model target {target}; tasks {', '.join(tasks)}", flush=True)
    rows, failures, elapsed = check_tasks(tasks, out, device="cuda", device_name=device_name, target=target,
                                          settings=settings, memory_mb=args.memory_mb)
    print()
    print_table(rows)
    print(f"\ngpu_check: {len(rows)} evaluations in {elapsed:.0f} s; wrote {out / 'gpu_check.json'}")
    for f in failures:
        print(f"gpu_check: FAIL {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
