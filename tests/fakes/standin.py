"""TEST STAND-INS for the evaluator and its latency. Not a performance model.

`fake_evaluate` decides correctness by lint alone and gives correct candidates
`standin_latency_ms`, a deterministic function of source and params that rewards what a real GPU
would also reward (fewer passes over memory, larger tiles up to a point, exp2 over exp, 4 warps,
some pipelining). Tests of a mutator's own logic use it on purpose (what the mutator asks, what it
proposes, its state): no worker, so they stay fast and exact. Whether mutators find faster kernels
is tested with the real evaluator and the roofline model (`tests/test_mutators_improve.py`). The
figures mean nothing: they are labelled `LatencySource.MODEL` only because the Evaluation type
requires a source, and nothing outside tests may use them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from evo.contracts.candidate import Candidate
from evo.contracts.verdict import Evaluation, LatencySource, Status
from fitness.check.lint import lint

_BLOCK_PREFIXES = ("B", "BLOCK")


def standin_latency_ms(c: Candidate) -> float:
    """TEST STAND-IN latency (ms) of a candidate; see the module docstring."""
    src, p = c.source, c.params
    passes = max(src.count("tl.load("), 1)
    math_cost = 0.3 * src.count("tl.exp(") + 0.2 * src.count("tl.exp2(") + 0.05 * src.count("tl.multiple_of(")
    blocks = [v for k, v in p.items() if k.startswith(_BLOCK_PREFIXES) and isinstance(v, int) and v > 0]
    geo = math.exp(sum(math.log(min(v, 1024)) for v in blocks) / len(blocks)) if blocks else 1024.0
    warps = p.get("num_warps", 4)
    stages = p.get("num_stages", 2)
    warp_factor = 1 + 0.1 * abs(math.log2(warps) - 2) if isinstance(warps, int) and warps > 0 else 1.5
    stage_factor = 1 + 0.05 * abs(stages - 3) if isinstance(stages, int) else 1.0
    return round((passes + math_cost) * (1 + 256 / geo) * warp_factor * stage_factor, 6)


def with_standin_latency(e: Evaluation, c: Candidate) -> Evaluation:
    """`e` with the stand-in latency added when the candidate is correct."""
    if not e.ok:
        return e
    return e.with_(latency_ms=standin_latency_ms(c), latency_source=LatencySource.MODEL)


def fake_evaluate(task_key: str = "fake-task") -> Callable[[Candidate, str], Evaluation]:
    """An evaluate function with no worker: lint decides; a candidate that passes is 'correct'
    unless its source contains 'WRONG' (graded error 0.5). For contract tests only."""

    def evaluate(c: Candidate, level: str) -> Evaluation:
        base = Evaluation(c.id, task_key, "fake", Status.OK, level=level, error=0.0, max_error_ratio=0.1,
                          max_abs_error=0.0, mismatch_fraction=0.0, cases_checked=1)
        found = lint(c.source)
        if not found.ok:
            return base.with_(status=Status.LINT_ERROR, reason=found.reason(), error=math.inf)
        if "WRONG" in c.source:
            return base.with_(status=Status.WRONG_OUTPUT, reason="fake mismatch", error=0.5, max_error_ratio=3.0,
                              mismatch_fraction=0.2, worst_case="size {\"n\": 7}")
        return with_standin_latency(base, c)

    return evaluate
