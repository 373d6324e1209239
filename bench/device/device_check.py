"""The device script: one command, one output folder, everything issue 14 asks of a GPU.

    PYTHONPATH=. python bench/device/device_check.py OUT_DIR [--steps a,b,c] [--budget-s 450] [--rehearse]

a. every library task's seed and known-better kernel, measured and modelled (`bench/device/gpu_check.py`'s
   `check_tasks`, model target ``h200``): ``OUT_DIR/gpu_check.json``;
b. the calibration sweep over the committed list `bench/data/calibration_kernels.jsonl`
   (`bench/model/calibration_sweep.py`): ``OUT_DIR/calibration.jsonl``, resumable (run ``--steps b`` again
   to continue a sweep cut short by its time share);
c. a campaign with measured fitness on softmax and mla_decode (``evo run --executor local``, 2 minutes
   of search each): ``OUT_DIR/campaigns/``, reporting seed, best, torch, torch.compile and the GPU-busy
   fraction.

``OUT_DIR/meta.json`` holds the GPU, driver, torch, triton and Python versions, the steps' seconds and
results (pipe the output to ``tee`` to keep what was printed). Needs torch, triton, numpy, msgpack, pyyaml and
the project's pure-Python dependencies; no Ray. The sweep gets what the budget leaves after step a and
the campaigns' reserve.

Timing (estimates, not yet seen on a GPU): step a as `gpu_check` (its docstring: under 5 minutes, a
minute of it torch.compile), each campaign its search time plus about a minute (workers, baselines,
the final verification), the sweep what ``--budget-s`` leaves (at least 60 s). Where one command may
run at most 10 minutes, split it: ``--steps a,b --budget-s 420`` and then ``--steps c`` (or ``--steps b``
again into a folder holding the first ``calibration.jsonl``, to go on with the sweep).

Without CUDA (or with ``--rehearse``) every step runs with tiny limits (a few tasks, 2 kernels per
task, 20 s campaigns) and the roofline model stands in for the timer: every figure is labelled
"modelled (rehearsal, no GPU)", never measured.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.device.gpu_check import check_tasks, print_table
from bench.model.calibration_kernels import load
from bench.model.calibration_sweep import REHEARSAL, default_threads, read_rows, select, sweep
from evo.contracts.config import Baseline, EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask, library_tasks
from fitness.evaluate import detect_device
from fitness.latency.calibration import MEASURED_BY_CUDA, pairs_from_rows, scores, table

TARGET = "h200"
CAMPAIGN_TASKS = ("softmax", "mla_decode")
REHEARSAL_CHECK_TASKS = ("vector_add", "softmax")
REHEARSAL_SWEEP_TASKS = ("vector_add", "softmax", "matmul")
# a rehearsal's campaigns bench at sizes the interpreter models in seconds, not minutes
REHEARSAL_BENCH = {"softmax": [{"rows": 512, "cols": 1024}],
                   "mla_decode": [{"batch": 4, "heads": 16, "cache_len": 1024}]}
CAMPAIGN_OVERHEAD_S = 60.0  # worker start, baselines (torch.compile) and the final verification per campaign


def versions() -> dict[str, Any]:
    """GPU, driver, torch, triton and Python versions of this machine."""
    out: dict[str, Any] = {"python": platform.python_version(), "host": platform.node()}
    for mod in ("torch", "triton", "numpy"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as e:
            out[mod] = f"unavailable: {e}"
    try:
        import torch

        if torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(0)
            out["cuda"] = torch.version.cuda
            out["capability"] = list(torch.cuda.get_device_capability(0))
    except Exception as e:
        out["gpu_error"] = str(e)
    out["driver"] = _driver_version()
    return out


def _driver_version() -> str | None:
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    proc = Path("/proc/driver/nvidia/version")
    return proc.read_text().splitlines()[0] if proc.is_file() else None


def campaign_config(task: str, seconds: float, device: str, runs: Path, isolation: bool = True,
                    bench: list[dict[str, int]] | None = None) -> str:
    """A small campaign (2 islands, Optuna and STOKE) with a wall-time budget, as YAML; `bench` replaces
    the task's bench sizes (a rehearsal's, small enough for the interpreter)."""
    sizes = ""
    if bench:
        check = NativeTask(TASK_LIBRARY / task).check_sizes
        sizes = f", sizes: {json.dumps({'check': check, 'bench': bench})}"
    return "\n".join([
        f"name: device-{task}", "seed: 0", f"task: {{name: {task}{sizes}}}",
        f"evaluation: {{device: {device}, target_gpu: {TARGET}, profile_memory_mb: 12288, "
        f"isolation: {str(isolation).lower()}}}",
        "islands: {count: 2, population: 6, offspring: 3, migration: {interval: 2, top_k: 1, topology: ring}}",
        "evaluators: {placement: auto}",
        "mutators: [{kind: optuna, weight: 1.0}, {kind: stoke, weight: 1.0}]",
        f"budget: {{wall_time_s: {seconds}}}", "checkpoint_interval: 1", f"output_dir: {runs}", "",
    ])


def run_campaign(task: str, seconds: float, device: str, out: Path, isolation: bool = True,
                 bench: list[dict[str, int]] | None = None) -> dict[str, Any]:
    """`evo run --executor local` on `task` for `seconds` of search; its summary, in short. A run still
    going `seconds` + 300 s later is interrupted (it stops as after Ctrl-C, writing its summary)."""
    runs = out / "campaigns"
    runs.mkdir(parents=True, exist_ok=True)
    cfg = out / f"campaign_{task}.yaml"
    cfg.write_text(campaign_config(task, seconds, device, runs.resolve(), isolation, bench))
    t0 = time.monotonic()
    late = ""
    with open(out / f"campaign_{task}.log", "w") as log, open(out / f"campaign_{task}.out", "w+") as stdout:
        proc = subprocess.Popen([sys.executable, "-m", "evo", "run", str(cfg), "--executor", "local"], cwd=ROOT,
                                stdout=stdout, stderr=log, text=True)
        try:
            proc.wait(timeout=seconds + 300)
        except subprocess.TimeoutExpired:
            late = f"interrupted after {seconds + 300:.0f} s; "
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        stdout.seek(0)
        lines = stdout.read().strip().splitlines()
    summaries = sorted(runs.glob(f"device-{task}-*/summary.json"), key=lambda p: p.stat().st_mtime)
    try:
        run_dir = Path(json.loads(lines[-1])["run_dir"]) if lines else summaries[-1].parent
        summary = json.loads((run_dir / "summary.json").read_text())
    except (ValueError, KeyError, OSError, IndexError) as e:
        return {"task": task, "error": f"{late}evo run exited {proc.returncode} without a summary ({e}); see its log"}
    best = summary.get("best") or {}
    best_ms, speedups = best.get("latency_ms"), best.get("speedups") or {}
    return {
        "task": task, "run_dir": str(run_dir), "seconds": round(time.monotonic() - t0, 1),
        "status": summary.get("status"), "latency_source": summary.get("latency_source"),
        "evaluations": summary.get("evaluations"), "seed_ms": (summary.get("seed") or {}).get("latency_ms"),
        "best_ms": best_ms, "best_params": best.get("params"), "speedup_over_seed": best.get("speedup_over_seed"),
        "torch_ms": best_ms * speedups["torch"] if best_ms and speedups.get("torch") else None,
        "torch_compile_ms": best_ms * speedups["torch_compile"] if best_ms and speedups.get("torch_compile") else None,
        "busy": summary.get("evaluator_busy"), "note": late,
    }


def campaign_line(c: dict[str, Any], label: str) -> str:
    if "error" in c:
        return f"  {c['task']}: {c['error']}"
    busy = (c.get("busy") or {}).get("busy_fraction")
    return (f"  {c['task']} ({label}): seed {_us(c['seed_ms'])}, best {_us(c['best_ms'])} "
            f"({_x(c['speedup_over_seed'])} the seed), torch {_us(c['torch_ms'])}, "
            f"torch.compile {_us(c['torch_compile_ms'])}, busy {'-' if busy is None else f'{busy:.0%}'}, "
            f"{c['evaluations']} evaluations, {c['status']}, {c['seconds']} s")


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f} us"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--steps", default="a,b,c")
    ap.add_argument("--budget-s", type=float, default=450.0, help="the whole run (the sweep gets what is left)")
    ap.add_argument("--campaign-s", type=float, default=120.0, help="search time of each campaign")
    ap.add_argument("--rehearse", action="store_true", help="tiny limits, the model standing in for the timer")
    ap.add_argument("--no-isolation", action="store_true",
                    help="workers without OS isolation (to tell an isolation problem from a GPU one)")
    args = ap.parse_args(argv)
    start = time.monotonic()
    device = detect_device()
    rehearse = args.rehearse or device != "cuda"
    label = REHEARSAL if rehearse else f"measured ({MEASURED_BY_CUDA})"
    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    steps = set(args.steps.split(","))
    campaign_s = min(args.campaign_s, 20.0) if rehearse else args.campaign_s
    meta: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": device,
                            "rehearsal": rehearse, "latency": label, "model_target": TARGET, **versions(),
                            "steps": {}}
    if (out / "meta.json").is_file():  # a later run into the same folder (e.g. --steps b to go on) keeps the rest
        earlier = json.loads((out / "meta.json").read_text())
        meta["steps"] = earlier.get("steps", {})
        meta["earlier_runs"] = [*earlier.get("earlier_runs", []), {k: earlier.get(k) for k in ("started", "seconds")}]

    def save() -> None:
        meta["seconds"] = round(time.monotonic() - start, 1)
        (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))

    print(f"device_check: {meta.get('gpu') or 'no GPU'}; latency {label}; model {TARGET}; steps {args.steps}",
          flush=True)
    save()
    status = 0
    if "a" in steps:
        t0 = time.monotonic()
        tasks = list(REHEARSAL_CHECK_TASKS) if rehearse else library_tasks()
        settings = EvaluationConfig(timeout_s=300.0, memory_mb=8192, target_gpu=TARGET, latency_timeout_s=600.0,
                                    latency=LatencyMode.MODEL if rehearse else LatencyMode.AUTO,
                                    baselines=[Baseline.SEED] if rehearse else list(Baseline),
                                    isolation=not args.no_isolation)
        rows, failures, _ = check_tasks(tasks, out, device="cuda" if not rehearse else "cpu",
                                        device_name=meta.get("gpu") or REHEARSAL, target=TARGET,
                                        settings=settings, memory_mb=8192,
                                        measured_by=REHEARSAL if rehearse else MEASURED_BY_CUDA)
        print(f"\nstep a ({label}; 'measured us' is {label}):")
        print_table(rows)
        meta["steps"]["a"] = {"seconds": round(time.monotonic() - t0, 1), "failures": failures, "tasks": tasks}
        status |= 1 if failures else 0
        save()
    if "b" in steps:
        t0 = time.monotonic()
        kernels = load()
        if rehearse:
            kernels = select(kernels, list(REHEARSAL_SWEEP_TASKS), 2)
            seconds = float("inf")  # a rehearsal does every kernel it picked
        else:
            reserve = (campaign_s + CAMPAIGN_OVERHEAD_S) * len(CAMPAIGN_TASKS) if "c" in steps else 0.0
            seconds = max(60.0, args.budget_s - (time.monotonic() - start) - reserve)
        print(f"\nstep b: calibration sweep of {len(kernels)} kernels ({label}), {seconds:.0f} s", flush=True)
        found = sweep(kernels, out / "calibration.jsonl", device=device if not rehearse else "cpu", target=TARGET,
                      seconds=seconds, model_threads=default_threads(device), isolation=not args.no_isolation)
        pairs = pairs_from_rows(read_rows(out / "calibration.jsonl"), measured_by=found["measured_by"])
        print(f"sweep: {found}\nmodel against {label} (all kernels so far):\n{table(scores(pairs))}")
        meta["steps"]["b"] = {**found, "step_seconds": round(time.monotonic() - t0, 1)}
        save()
    if "c" in steps:
        t0 = time.monotonic()
        results = []
        print(f"\nstep c: campaigns of {campaign_s:.0f} s on {', '.join(CAMPAIGN_TASKS)} ({label})", flush=True)
        for task in CAMPAIGN_TASKS:
            results.append(run_campaign(task, campaign_s, "cpu" if rehearse else "cuda", out, not args.no_isolation,
                                        REHEARSAL_BENCH.get(task) if rehearse else None))
            print(campaign_line(results[-1], label), flush=True)
            meta["steps"]["c"] = {"seconds": round(time.monotonic() - t0, 1), "latency": label, "campaigns": results,
                                  "bench_sizes": REHEARSAL_BENCH if rehearse else "the tasks' own"}
            save()
        status |= 1 if any("error" in c for c in results) else 0
    save()
    print(f"\ndevice_check: done in {meta['seconds']:.0f} s ({label}); wrote {out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
