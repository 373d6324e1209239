"""`evo tasks`: what the task library offers, in words: each task's dtypes, bench sizes (with their
weights) and the named workloads a config can pick with ``task.workload``, with their sources; and the
KernelBench problems a seed ships for."""

from __future__ import annotations

from evo.contracts.kernelbench_seeds import shipped_seeds
from evo.contracts.native_task import TASK_LIBRARY, NativeTask, library_tasks
from evo.contracts.task import Task
from evo.contracts.workload import shape_text, weighted_shapes_text


def _sizes(task: Task) -> str:
    weights = dict(task.fitness_sizes())
    if len(task.bench_sizes) > len(weights):  # no weights: the others are verified, not timed
        return "; ".join(map(shape_text, task.bench_sizes)) + "; the fitness times the first only"
    return weighted_shapes_text(task)


def task_lines(names: list[str]) -> list[str]:
    """Lines describing the library tasks `names` (all without names); ValueError names an unknown one."""
    known = library_tasks()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"no task {', '.join(map(repr, unknown))} in the library; valid: {', '.join(known)}")
    lines = []
    for name in names or known:
        task = NativeTask(TASK_LIBRARY / name)
        dtypes = ", ".join(getattr(task.module, "DTYPES", (task.dtype,)))
        lines.append(f"{name} ({dtypes}): bench {_sizes(task)}")
        for w in task.workloads.values():
            task.use_workload(w.name)
            lines.append(f"  workload {w.name}: {_sizes(task)}")
            lines.append(f"    from: {w.source}")
    if not names:
        lines += kernelbench_lines()
    return lines


def kernelbench_lines() -> list[str]:
    """The KernelBench problems a seed ships for (`evo.contracts.kernelbench_seeds`)."""
    seeds = sorted(set(shipped_seeds().values()), key=lambda p: int(p.stem.split("_")[0]))
    if not seeds:
        return []
    return [f"KernelBench level 1, seeds shipped for {len(seeds)} problems (task: {{kernelbench: FILE}} with no "
            "seed: starts from them; evo init NAME --kernelbench FILE):",
            *(f"  {p.stem}" for p in seeds)]
