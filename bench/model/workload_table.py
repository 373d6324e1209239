"""Kernels at the shapes a deployment runs: per library task and named workload
(``evo/tasks/<task>/workloads.yaml``), the seed, the known-better kernel and any kernel given with
``--kernel``, evaluated in full (the check, then the latency at every shape of the workload) at the
workload and at the task's own bench size.

    python -m bench.model.workload_table [TASK ...] [--kernel TASK:LABEL=FILE ...] [--markdown PATH]

One row per kernel and shape: its latency, its speedup over the seed at that shape, and what bounds
it (the model's or the timer's word); then the fitness (weighted geometric mean) over the workload.
A kernel tuned at the default bench size (for example a campaign's ``best_kernel.py``) shows here
how much of its gain holds where the model is deployed. Without a GPU, latency is MODELLED (the
roofline model of ``--target-gpu``) and the table says so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evo.app.report import doc as d
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask, library_tasks
from evo.contracts.verdict import Evaluation
from evo.contracts.workload import shape_text
from fitness.evaluate import Evaluator, device_for

COLUMNS = ["task", "workload", "kernel", "shape", "weight", "latency ms", "vs seed", "bound"]


def kernels(task: NativeTask, extra: list[tuple[str, Path]]) -> list[tuple[str, Candidate]]:
    out = []
    if task.seed_source is not None:
        out.append(("seed", Candidate.from_source(task.seed_source)))
    better = task.path.parent / "known_better.py"
    if better.is_file():
        out.append(("known-better", Candidate.from_file(better)))
    return out + [(label, Candidate.from_file(path)) for label, path in extra]


def _times(speedups: dict[str, float]) -> str:
    """The speedup over the seed, or '' where the seed had no latency at that shape."""
    x = speedups.get("seed")
    return f"{x:.2f}x" if x else ""


def rows_of(task: str, workload: str, label: str, ev: Evaluation) -> list[list[str]]:
    """Per-shape rows of one verdict, then its fitness row ('' cells where there is nothing)."""
    if not ev.ok or ev.latency_ms is None:
        return [[task, workload, label, "", "", "", "", f"{ev.status.value}: {ev.reason[:200]}"]]
    detail = ev.latency_detail
    shapes = detail.get("shapes") or [{"size": detail.get("size", {}), "weight": 1.0, "latency_ms": ev.latency_ms,
                                       "speedups": ev.speedups,
                                       "bound": (detail.get("launches") or [{}])[0].get("bound", "")}]
    out = [[task, workload, label, shape_text(s["size"]), f"{s['weight']:g}", f"{s['latency_ms']:.4g}",
            _times(s["speedups"]), str(s.get("bound", ""))] for s in shapes]
    if len(shapes) > 1:
        out.append([task, workload, label, "fitness (weighted geomean)", "", f"{ev.latency_ms:.4g}",
                    _times(ev.speedups), ""])
    return out


def table(tasks: list[str], extra: dict[str, list[tuple[str, Path]]], settings: EvaluationConfig) -> list[list[str]]:
    rows: list[list[str]] = []
    for name in tasks:
        probe = NativeTask(TASK_LIBRARY / name)
        for workload in [None, *probe.workloads]:
            task = NativeTask(TASK_LIBRARY / name)
            if workload:
                task.use_workload(workload)
            with Evaluator(task, settings, device=device_for(settings.device)) as ev:
                for label, candidate in kernels(task, extra.get(name, [])):
                    verdict = ev.evaluate(candidate)
                    new = rows_of(name, workload or "(default bench)", label, verdict)
                    for r in new:
                        print(" | ".join(r), flush=True)
                    rows += new
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="*", help="library tasks (default: every task with a workloads.yaml)")
    ap.add_argument("--kernel", action="append", default=[], metavar="TASK:LABEL=FILE",
                    help="also evaluate this candidate file for TASK (e.g. a campaign's best_kernel.py)")
    ap.add_argument("--target-gpu", default="h100")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--profile-memory-mb", type=int, default=12288,
                    help="address space for bench-size buffers on a CPU (default 12288)")
    ap.add_argument("--markdown", type=Path, help="also write the table here")
    args = ap.parse_args()
    with_workloads = [t for t in library_tasks() if NativeTask(TASK_LIBRARY / t).workloads]
    tasks = args.tasks or with_workloads
    unknown = [t for t in tasks if t not in library_tasks()]
    if unknown:
        ap.error(f"no task {', '.join(unknown)} in the library; valid: {', '.join(library_tasks())}")
    extra: dict[str, list[tuple[str, Path]]] = {}
    for spec in args.kernel:
        task, _, rest = spec.partition(":")
        label, _, file = rest.partition("=")
        if not (task and label and file) or not Path(file).is_file():
            ap.error(f"--kernel {spec!r}: give TASK:LABEL=FILE with an existing FILE")
        extra.setdefault(task, []).append((label, Path(file)))
    settings = EvaluationConfig(device=args.device, latency=LatencyMode.AUTO, target_gpu=args.target_gpu,
                                profile_memory_mb=args.profile_memory_mb)
    rows = table(tasks, extra, settings)
    if args.markdown:
        source = "measured" if args.device == "cuda" else f"MODELLED (roofline model of an {args.target_gpu})"
        text = d.to_markdown(d.Doc("", [d.table(COLUMNS, rows)]), Path("."), "").removeprefix("# \n\n")
        args.markdown.write_text(f"Latency {source}; `python -m bench.model.workload_table`.\n\n{text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
