"""Fitness over several bench sizes: the weighted geometric mean of per-size latencies.

A task that weighs its bench sizes (`Task.fitness_sizes`: e.g. the batch and sequence lengths of a
serving workload) is timed or modelled at each of them, and each size is verified there as the latency
stage verifies its one size. `combine` turns the per-size results into one: the first failure, in
size order, is the verdict (its reason names the size); a size without a latency (the model could not
run) leaves the whole without one; otherwise the latency, each speedup present at every size and the
fraction of the speed of light are weighted geometric means, so a kernel twice as fast at one size
and twice as slow at another of equal weight scores the same as before. The per-size figures go into
the detail as ``shapes`` (size, weight, latency, speedups, fraction of the speed of light, bound) for
verdicts, reports and prompts; the rest of the detail is the first size's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from evo.contracts.task import Size
from evo.contracts.verdict import Status
from fitness.latency.result import LatencyResult


def geomean(values: Sequence[float], weights: Sequence[float]) -> float:
    total = sum(weights)
    return math.exp(sum(w * math.log(v) for v, w in zip(values, weights)) / total)


def shape_figures(size: Size, weight: float, r: LatencyResult) -> dict[str, Any]:
    """One size's line of ``latency_detail["shapes"]``."""
    bounds = sorted({str(launch.get("bound")) for launch in r.detail.get("launches", []) or []
                     if isinstance(launch, dict) and launch.get("bound")})
    return {"size": dict(size), "weight": weight, "latency_ms": r.latency_ms, "speedups": dict(r.speedups),
            "roofline_fraction": r.roofline_fraction, "bound": ",".join(bounds)}


def combine(parts: Sequence[tuple[Size, float, LatencyResult]]) -> LatencyResult:
    """One result from per-size results (see the module docstring); `parts` in bench-size order."""
    if len(parts) == 1:
        return parts[0][2]
    for size, _, r in parts:
        if r.status is not Status.OK:  # named unless its reason names the size already
            return r if str(dict(size)) in r.reason else replace(r, reason=f"at bench size {dict(size)}: {r.reason}")
    first = parts[0][2]
    shapes = [shape_figures(size, w, r) for size, w, r in parts]
    missing = next(((size, r) for size, _, r in parts if not r.latency_ms), None)
    if missing is not None:
        size, r = missing
        return LatencyResult(Status.OK, f"no latency at bench size {dict(size)}: {r.reason}", None, r.source,
                             detail={**first.detail, "shapes": shapes}, gpu=first.gpu)
    weights = [w for _, w, _ in parts]
    latency = geomean([float(r.latency_ms or 0.0) for _, _, r in parts], weights)
    names = set.intersection(*(set(r.speedups) for _, _, r in parts))
    speedups = {n: geomean([r.speedups[n] for _, _, r in parts], weights) for n in sorted(names)}
    fractions = [r.roofline_fraction for _, _, r in parts]
    fraction = geomean([float(f) for f in fractions if f], weights) if all(fractions) else None
    reasons = list(dict.fromkeys(r.reason for _, _, r in parts if r.reason))
    detail = {**first.detail, "shapes": shapes,
              "fitness": f"weighted geometric mean over {len(parts)} bench sizes (weights {weights})"}
    return LatencyResult(Status.OK, "; ".join(reasons), latency, first.source, speedups, detail, fraction, first.gpu)
