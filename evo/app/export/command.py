"""`evo export RUN_DIR --as KIND`: the run's best kernel in a form production code uses.

Kinds: ``torch-op`` (`evo.app.export.torch_op`), ``autotune`` (`evo.app.export.autotune`). The best
kernel is the report's (`run_stats.best_record`); the task is the run's own copy (`RUN_DIR/inputs`),
so an export needs nothing outside the run directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.app.export.autotune import Measured, autotune_module
from evo.app.export.torch_op import ExportError, check_op_name, export_torch_op
from evo.app.report import stats as run_stats
from evo.app.report.data import Record, RunData, load_run
from evo.app.report.trace import trace_of
from evo.app.run.inputs import task_root
from evo.app.run.results import standalone_kernel
from evo.contracts.task import Task, TaskError
from evo.contracts.task_files import MANIFEST, TaskFiles

KINDS = ("torch-op", "autotune")


@dataclass(frozen=True)
class Written:
    files: list[Path]
    lines: list[str]  # what was written, for people


def best_of_run(run: RunData) -> tuple[Record, float | None]:
    """The run's best correct kernel and the seed's latency; ExportError when there is none."""
    trace = trace_of(run)
    best = run_stats.best_record(trace)
    if best is None or not best.evaluation.ok:
        raise ExportError(f"{run.path}: no kernel of this run passed the equivalence check (nothing to export)")
    return best, trace.seed_latency_ms


def run_task(run_dir: Path) -> Task:
    """The run's task, built from its own copy."""
    root = task_root(run_dir)
    if not (root / MANIFEST).is_file():
        raise ExportError(f"{run_dir}: the run keeps no copy of its task ({root}); resume it once with "
                          "`evo run --resume` to make one, then export")
    try:
        return TaskFiles.read(root).build()
    except TaskError as e:
        raise ExportError(f"{run_dir}: its task cannot be built: {e}") from e


def measured(run: RunData, best: Record) -> list[Measured]:
    """Every correct, timed full evaluation of the best kernel's structure."""
    return [Measured(dict(r.candidate.params), float(r.evaluation.latency_ms),
                     r.evaluation.latency_source.value if r.evaluation.latency_source else "unknown", r.candidate.id,
                     _shapes(r.evaluation.latency_detail))
            for r in run.records if r.full and r.evaluation.ok and r.evaluation.latency_ms is not None
            and r.candidate.structure == best.candidate.structure]


def _shapes(detail: dict[str, Any] | None) -> tuple[tuple[str, float], ...]:
    """(bench size, latency ms) per weighed shape of a multi-shape fitness (see fitness.latency.shapes)."""
    shapes = (detail or {}).get("shapes") or []
    return tuple((str(s["size"]), float(s["latency_ms"])) for s in shapes
                 if isinstance(s, dict) and s.get("latency_ms") is not None)


def _target(run: RunData, output: str | None, default: str) -> Path:
    path = Path(output) if output else run.path / "export" / default
    if path.suffix != ".py":
        raise ExportError(f"--output {path}: expected a .py file")
    return path


def export(run_dir: str | Path, kind: str, *, name: str | None, output: str | None) -> Written:
    if kind not in KINDS:
        raise ExportError(f"--as {kind!r}: expected one of {', '.join(KINDS)}")
    if kind == "torch-op":
        if not name:
            raise ExportError("--as torch-op needs --name NAMESPACE::OP, e.g. mylib::softmax")
        check_op_name(name)
    run = load_run(run_dir)
    best, seed_ms = best_of_run(run)
    task = run_task(run.path)
    if kind == "autotune":
        path = _target(run, output, "autotune.py")
        rows = measured(run, best)
        text = autotune_module(best.candidate, rows, campaign=run.name, task=task.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        n = text.count("triton.Config(")
        return Written([path], [f"autotune table written to {path}: {n} config{'s' if n != 1 else ''} of the best "
                                f"structure ({best.candidate.structure}), fastest first, from {len(rows)} correct "
                                "evaluations of it"])
    assert name is not None
    text = standalone_kernel(best.individual, campaign=run.name, task=task.name, seed_latency_ms=seed_ms)
    done = export_torch_op(run.path, best.candidate, text, task, name, _target(run, output, "torch_op.py"))
    return Written([done.module, done.test], [
        f"operator {name!r} written to {done.module}; inputs ({', '.join(done.names)}), outputs "
        + "; ".join(r.describe(done.names) for r in done.rules), f"its test: pytest {done.test}"])
