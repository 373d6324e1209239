"""Check and bench sizes for a KernelBench problem file (`evo init --kernelbench`).

A problem's sizes are its module-level integer constants (and integer tuples: ``input_shape = (32768,)``);
values above `SMALL` are taken for dimensions (``batch_size = 4096``, ``dim = 393216``), the rest for
settings a size must keep (``dim = 1`` as the axis of a reduction, ``kernel_size = 3``). Check sizes give
the dimensions small, mostly odd values, one set with ones where the problem allows them; dimensions of
equal value keep equal values (a loss over ``batch_size`` rows of ``input_shape`` that broadcasts
targets of ``batch_size`` against them needs both equal); each is kept only when the problem's reference
runs there (a pooling window wider than its input does not). The bench size is the problem's own on a
GPU; on a CPU, where the Triton interpreter must run a candidate at it in full, the dimensions shrink
together until the inputs hold at most `CPU_BENCH_ELEMENTS` values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

from evo.contracts.kernelbench import KernelBenchTask
from evo.contracts.task import Size, TaskError, one_line

SMALL = 8
CPU_BENCH_ELEMENTS = 1 << 16
CHECK_ELEMENTS = 1 << 14  # a check size holds at most this many input values (each is checked many times)
# one tuple per check size: the values its dimensions take in turn (capped at the problem's own)
CHECK_PATTERNS: tuple[tuple[int, ...], ...] = ((5, 7, 11, 13, 3), (1, 3, 2, 5, 1), (17, 37, 29, 19, 23))


Dim = int | tuple[int, ...]


def problem_dimensions(problem: Path) -> dict[str, Dim]:
    """The problem's constants that hold dimensions, and their values (see the module docstring)."""
    task = _task(problem)
    ns = task.namespace({})
    out: dict[str, Dim] = {}
    for name in task.constants():
        value = ns.get(name)
        if _is_int(value) and value > SMALL:
            out[name] = value
        elif (isinstance(value, tuple) and value and all(_is_int(v) for v in value)
              and any(v > SMALL for v in value)):
            out[name] = value
    return out


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _mapped(dims: dict[str, Dim], value_of: Callable[[int, int], int]) -> Size:
    """`dims` with each value above `SMALL` replaced by ``value_of(value, j)``, j the value's rank among the
    distinct such values in order of appearance (so equal dimensions stay equal)."""
    order: dict[int, int] = {}
    for d in dims.values():
        for v in (d if isinstance(d, tuple) else (d,)):
            if v > SMALL:
                order.setdefault(v, len(order))

    def one(v: int) -> int:
        return value_of(v, order[v]) if v > SMALL else v

    return {name: [one(v) for v in d] if isinstance(d, tuple) else one(d) for name, d in dims.items()}


def _task(problem: Path) -> KernelBenchTask:
    """The problem, read once for every size tried (`namespace` and `cases` take the size)."""
    return KernelBenchTask(problem, check_sizes=[], bench_sizes=[], dtype="float32", redraw_params=True)


def _runs(task: KernelBenchTask, size: Size) -> str | None:
    """None when the problem's reference runs at `size`, else why not."""
    try:
        task.case_data(task.cases([size], draws=1, every_dist=False)[0])
    except Exception as e:
        return one_line(e)
    return None


def _input_elements(task: KernelBenchTask, size: Size) -> int:
    inputs = task.namespace(size)["get_inputs"]()
    return sum(int(getattr(x, "numel", lambda: 1)()) for x in inputs)


def check_sizes(problem: Path, dims: dict[str, Dim]) -> list[Size]:
    """The check sizes the problem's reference runs at (at least one; `TaskError` when none)."""
    task = _task(problem)
    out: list[Size] = []
    why: list[str] = []
    for pattern in CHECK_PATTERNS:
        size = _mapped(dims, lambda v, j, p=pattern: min(v, p[j % len(p)]))  # type: ignore[misc]
        if size in out:
            continue
        try:
            if _input_elements(task, size) > CHECK_ELEMENTS:  # 17 x 37 x 29 x 19 for a 4-d input
                why.append(f"{size}: more than {CHECK_ELEMENTS} input values")
                continue
        except Exception as e:
            why.append(f"{size}: {one_line(e)}")
            continue
        problem_with = _runs(task, size)
        if problem_with is None:
            out.append(size)
        else:
            why.append(f"{size}: {problem_with}")
    if not out:
        raise TaskError(f"no check size found for {problem.name} (its dimensions: {', '.join(dims) or 'none'}): "
                        f"{'; '.join(why)}; write task.sizes by hand")
    return out


def bench_size(problem: Path, dims: dict[str, Dim], device: str) -> Size:
    """The problem's own size on a GPU; on a CPU the largest scaled-down one within `CPU_BENCH_ELEMENTS`."""
    own = _mapped(dims, lambda v, j: v)
    if device == "cuda" or not dims:
        return own
    task = _task(problem)
    largest = max(max(d) if isinstance(d, tuple) else d for d in dims.values())
    best: Size | None = None
    for k in range(max(1, math.ceil(math.log2(largest))), -1, -1):
        size = _mapped(dims, lambda v, j, k=k: max(1, v >> k))  # type: ignore[misc]
        if best is not None and size == best:
            continue
        try:
            if _input_elements(task, size) > CPU_BENCH_ELEMENTS:
                break
        except Exception:
            continue  # too small for the problem (a window wider than its input): larger ones may run
        if _runs(task, size) is None:
            best = size
    if best is None:
        raise TaskError(f"no bench size of {problem.name} within {CPU_BENCH_ELEMENTS} input values runs; "
                        "write task.sizes by hand")
    return best


def kernelbench_sizes(problem: Path, device: str) -> dict[str, Any]:
    """``{"check": [...], "bench": [...]}`` for a config's ``task.sizes``; `TaskError` with the reason when the
    problem gives none that runs."""
    dims = problem_dimensions(problem)
    return {"check": check_sizes(problem, dims), "bench": [bench_size(problem, dims, device)]}
