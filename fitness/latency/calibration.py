"""How well the latency model ranks kernels, judged against measured latency (pure functions).

A search only needs the model to order the kernels of one task as the GPU does, so it is scored per
task on (measured, modelled) pairs of the calibration sweep (`bench/device/device_check.py`):

- **Spearman** rank correlation of modelled and measured latency (tied values share their mean rank);
- **top-1 regret**: the measured latency of the model's favourite (the kernel it models fastest) over
  the measured best, minus 1; 0 when the model's favourite is the fastest. When several kernels tie
  for the model's favourite, the slowest of them counts (the model could not tell them apart).

`held_out` splits kernels by a hash of their candidate id, so the split is the same on every machine
and in every run: change the model against the rest, report it on the held-out part.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

HELD_OUT_FRACTION = 0.3
MEASURED_BY_CUDA = "cuda"  # `measured_by` of rows timed on a GPU; anything else is a stand-in


@dataclass(frozen=True)
class Pair:
    """One kernel of the sweep: its measured and modelled latency at the task's first bench size."""

    task: str
    candidate_id: str
    measured_ms: float
    modelled_ms: float


@dataclass(frozen=True)
class TaskScore:
    """How the model ranks one task's kernels (None where fewer than two kernels make a ranking)."""

    task: str
    kernels: int
    spearman: float | None
    top1_regret: float | None
    model_favourite: str | None
    measured_best: str | None


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, tied values given the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        mean_rank = (start + end) / 2 + 1
        for k in range(start, end + 1):
            out[order[k]] = mean_rank
        start = end + 1
    return out


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation; None with fewer than two points or when either side is constant."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} values against {len(ys)}")
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman rank correlation with ties (Pearson correlation of the mean ranks)."""
    return pearson(ranks(xs), ranks(ys))


def top1_regret(measured: Sequence[float], modelled: Sequence[float]) -> tuple[float, int, int] | None:
    """(regret, index of the model's favourite, index of the measured best); None when empty.
    Of kernels tied for the model's favourite, the slowest measured counts."""
    if len(measured) != len(modelled):
        raise ValueError(f"{len(measured)} values against {len(modelled)}")
    if not measured:
        return None
    best = min(range(len(measured)), key=lambda i: measured[i])
    low = min(modelled)
    favourite = max((i for i, m in enumerate(modelled) if m == low), key=lambda i: measured[i])
    return measured[favourite] / measured[best] - 1.0, favourite, best


def score(task: str, pairs: Sequence[Pair]) -> TaskScore:
    measured = [p.measured_ms for p in pairs]
    modelled = [p.modelled_ms for p in pairs]
    regret = top1_regret(measured, modelled) if len(pairs) >= 2 else None
    return TaskScore(task, len(pairs), spearman(modelled, measured),
                     None if regret is None else regret[0],
                     None if regret is None else pairs[regret[1]].candidate_id,
                     None if regret is None else pairs[regret[2]].candidate_id)


def by_task(pairs: Iterable[Pair]) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for p in pairs:
        out.setdefault(p.task, []).append(p)
    return out


def scores(pairs: Iterable[Pair]) -> dict[str, TaskScore]:
    """Per task, in task order."""
    groups = by_task(pairs)
    return {t: score(t, groups[t]) for t in sorted(groups)}


def held_out(candidate_id: str, fraction: float = HELD_OUT_FRACTION) -> bool:
    """Whether a kernel belongs to the held-out part: a fixed function of its id."""
    h = int.from_bytes(hashlib.sha256(f"evo-calibration-held-out:{candidate_id}".encode()).digest()[:8], "big")
    return h < fraction * 2**64


def split(pairs: Iterable[Pair], fraction: float = HELD_OUT_FRACTION) -> tuple[list[Pair], list[Pair]]:
    """(the part a model may be fitted to, the held-out part)."""
    fit: list[Pair] = []
    held: list[Pair] = []
    for p in pairs:
        (held if held_out(p.candidate_id, fraction) else fit).append(p)
    return fit, held


def pairs_from_rows(rows: Iterable[dict[str, Any]], *, measured_by: str | None = MEASURED_BY_CUDA) -> list[Pair]:
    """The pairs of sweep rows (JSON lines of `bench/device/device_check.py`) with both figures; only rows
    whose `measured_by` is `measured_by` (the GPU by default: a rehearsal's stand-in is not data)."""
    out = []
    for r in rows:
        if measured_by is not None and r.get("measured_by") != measured_by:
            continue
        if r.get("measured_ms") and r.get("modelled_ms"):
            out.append(Pair(str(r["task"]), str(r["id"]), float(r["measured_ms"]), float(r["modelled_ms"])))
    return out


def table(found: dict[str, TaskScore]) -> str:
    """A plain-text table of per-task scores."""
    lines = [f"{'task':17s} {'kernels':>7s} {'spearman':>8s} {'top-1 regret':>12s}"]
    for s in found.values():
        rho = "-" if s.spearman is None else f"{s.spearman:.3f}"
        regret = "-" if s.top1_regret is None else f"{s.top1_regret * 100:.1f}%"
        lines.append(f"{s.task:17s} {s.kernels:7d} {rho:>8s} {regret:>12s}")
    return "\n".join(lines)
