"""The cases of a full check, beyond the check sizes under the task's own distributions.

A full check runs (in this order, cheap cases first):

1. every check size under each of the task's own distributions (`Task.cases`);
2. every special value distribution (`evo.contracts.special_values`) the task has not opted out of, at
   a small check size (the smallest by elements after the very smallest, which is usually all ones): a
   few rows and columns, at little cost; the long dimensions come in 3;
3. for each bench size (each shape of a workload), its bench-shaped size (`evo.contracts.bench_shaped`)
   under every distribution, the task's own and the special ones.

Sizes the check chooses for a candidate (to reach its lines, or past the thresholds its code compares with)
run the same way (`chosen_cases`).

A candidate whose kernels compare data with numbers is also checked on inputs that hold those values
(`value_cases`): at every check size but the smallest and at each bench-shaped size, `PER_CASE` values to a
case (more take further cases).

Each runs like any check case: the first case of a size twice under different poisons and program
orders, the race sanitizer and the barrier rule on. Which cases these rules pick is part of the task key
(`evo.contracts.task.CHECK_RULES`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from evo.contracts.bench_shaped import bench_shaped_size
from evo.contracts.case import Case, Size, size_key
from evo.contracts.special_values import SPECIAL_DISTS, TURNS, Compared, values_dist

if TYPE_CHECKING:
    from evo.contracts.task import Task

SPECIAL_AT = 1  # check sizes that every special distribution runs at (each run costs ~0.1 s even when tiny)


def special_dists(task: Task) -> tuple[str, ...]:
    """The special distributions `task` is checked on: all but those it opted out of (and those it draws
    itself, under the same name); none where it cannot recompute its reference on changed inputs."""
    if not task.recomputes_reference:
        return ()
    return tuple(d for d in SPECIAL_DISTS if d not in task.dists and d not in task.dist_opt_out)


def elements(task: Task, size: Size) -> int:
    return task.buffer_sizes(size)[0]


def work(task: Task, size: Size) -> float:
    """The work of a case at `size`: the task's FLOPs, else the elements of its inputs and outputs."""
    flops = task.flops(size)
    return float(flops) if flops else float(elements(task, size))


def _by_elements(task: Task) -> list[int]:
    """Indices of the task's check sizes, fewest elements first (ties in the task's order)."""
    return sorted(range(len(task.check_sizes)), key=lambda i: (elements(task, task.check_sizes[i]), i))


def special_sizes(task: Task) -> list[Size]:
    """`SPECIAL_AT` check sizes for the special values: the smallest by elements after the smallest (usually
    all ones, where rows and ties mean nothing), in the task's order."""
    ranked = _by_elements(task)
    chosen = ranked[1:SPECIAL_AT + 1] if len(ranked) > SPECIAL_AT else ranked
    return [task.check_sizes[i] for i in sorted(chosen)]


def bench_shaped_sizes(task: Task) -> list[Size]:
    """The bench-shaped size of each bench size, once each, leaving out any that is a check size."""
    out: list[Size] = []
    seen = {size_key(s) for s in task.check_sizes}
    for bench in task.bench_sizes:
        size = bench_shaped_size(task.check_sizes, bench, lambda s: elements(task, s), lambda s: work(task, s))
        if size is not None and size_key(size) not in seen:
            seen.add(size_key(size))
            out.append(size)
    return out


def _special_cases(task: Task, sizes: list[Size], first_draw: int) -> list[Case]:
    out = []
    for size in sizes:
        skey = size_key(size)
        for i, dist in enumerate(special_dists(task)):
            digest = hashlib.sha256(f"{task.name}|{skey}|special|{dist}".encode()).digest()
            out.append(Case(skey, first_draw + i, int.from_bytes(digest[:4], "little"), dist))
    return out


def full_cases(task: Task, *, draws: int) -> list[Case]:
    """Every case of a full check of `task` (see the module docstring)."""
    own = task.cases(draws=draws)
    after = max(draws, len(task.dists))  # special draws are numbered after the task's own at a size
    shaped = bench_shaped_sizes(task)
    return [*own, *_special_cases(task, special_sizes(task), after),
            *task.cases(shaped, draws=draws), *_special_cases(task, shaped, after)]


def chosen_cases(task: Task, size: Size, compared: Compared,
                 held: Mapping[str, Iterable[float]] | None = None) -> list[Case]:
    """The cases of a size the check chose (to reach a line, or past a threshold the code compares with:
    `fitness.check.reach`): like a bench-shaped size's, every distribution, the task's own and the special
    ones, and the values the kernels compare with (`value_cases`). A path that only such a size takes meets
    the inputs every other path met: a softmax that drops the max subtraction past 5000 columns meets large
    logits there."""
    after = len(task.dists)
    return [*task.cases([size], draws=1), *_special_cases(task, [size], after),
            *value_cases(task, compared, draws=1, held=held, sizes=[size])]


MAX_HELD = 16  # numbers a kernel's comparisons held at a size, placed in that size's values case
PER_CASE = 24  # values placed in one case: more take further cases at every size


def value_cases(task: Task, compared: Compared, *, draws: int,
                held: Mapping[str, Iterable[float]] | None = None, sizes: list[Size] | None = None) -> list[Case]:
    """Cases whose inputs hold what a candidate's code compares its data with (`compared`: values, and pairs
    of values a difference apart; `evo.contracts.special_values`, ``values=``): at every check size
    but the smallest by elements (all ones, usually, where no row can be made to hold a value as its
    maximum) and at each bench-shaped size, `PER_CASE` values to a case (the next `PER_CASE` take another
    case at every size); with the first `MAX_HELD` of the numbers the kernel's
    comparisons held for every lane at that size in the check's runs (`held`, by size JSON: a threshold made
    of a size, ``n_cols * 0.001``). None where nothing is to be placed, or where the task cannot recompute
    its reference on changed inputs. `sizes`: these sizes instead."""
    if not task.recomputes_reference:
        return []
    held = held or {}
    if sizes is None:
        ranked = _by_elements(task)
        sizes = [task.check_sizes[i] for i in sorted(ranked[1:] or ranked)] + bench_shaped_sizes(task)
    draw = max(draws, len(task.dists)) + len(SPECIAL_DISTS)  # numbered after the special draws at a size
    out = []
    chunks = [compared.values[i:i + PER_CASE] for i in range(0, len(compared.values), PER_CASE)] or [()]
    for c, chunk in enumerate(chunks):  # each stretch of values at every size
        for turn, size in enumerate(sizes):  # each case's rows take the next of the rows placed
            skey = size_key(size)
            more = [v for v in held.get(skey, ()) if v not in compared.values][:MAX_HELD] if c == 0 else []
            apart = compared.apart if c == 0 else ()
            if not chunk and not apart and not more:
                continue
            dist = values_dist([*chunk, *more], apart)
            digest = int.from_bytes(hashlib.sha256(f"{task.name}|{skey}|{dist}".encode()).digest()[:4], "little")
            out.append(Case(skey, draw, digest - digest % TURNS + turn % TURNS, dist))
    return out


def unchecked_words(task: Task, cases: list[Case]) -> str:
    """What a full check of `task` on `cases` did not check, in words for its verdict ('' when nothing):
    the special distributions it opted out of, with its reasons, and special cases left as drawn."""
    if not task.recomputes_reference:
        return "; not checked on special values (the task cannot recompute its reference on changed inputs)"
    parts = [f"opts out of special values {'; '.join(f'{d} ({why})' for d, why in sorted(task.dist_opt_out.items()))}"
             ] if task.dist_opt_out else []
    left: dict[tuple[str, str], list[str]] = {}
    for case in cases:
        note = task.case_data(case).note if case.dist in special_dists(task) else ""
        if note:
            left.setdefault((case.dist, note), []).append(case.size_json)
    parts += [f"{dist} left as drawn at {', '.join(sizes)}: {note}" for (dist, note), sizes in left.items()]
    return f"; not checked: {'; '.join(parts)}" if parts else ""
