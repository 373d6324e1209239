"""Waiting for the evaluators Ray can place, and saying what the others wait for.

The broker asks for every evaluator at once (`islands.broker`). The campaign begins as soon as those
that fit on the cluster's nodes have started (or, with at least one started, when no other has for
`GRACE_S`); within `FIRST_REPORT_S` it says what it waits for: the resources each evaluator needs,
what is free, and per node what it has and how many would fit. Evaluators that cannot be placed yet
join later, when Ray can place them. None started within the start timeout is an error that says the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from islands.evaluator_actor import EvaluatorInfo

FIRST_REPORT_S = 5.0  # the first word on evaluators that have not started
REPORT_EVERY_S = 30.0
GRACE_S = 60.0  # with one evaluator up, begin once no other has started for this long


def _amounts(res: dict[str, Any]) -> str:
    return ", ".join(f"{float(v):g} {k}" for k, v in sorted(res.items()))


def placement_text(p: dict[str, Any]) -> str:
    """What the broker's `placement()` says, in words."""
    nodes = "; ".join(f"{n['address'] or '?'} ({n['node']}): {n['CPU']:g} CPU, {n['GPU']:g} GPU, room for {n['fits']}"
                      for n in p["nodes"])
    return (f"{p['waiting']} evaluator(s) not started yet: each needs {_amounts(p['each_needs'])}; free now: "
            f"{_amounts(p['free']) or 'nothing'}; nodes in all: {nodes or 'none'}")


def placeable(p: dict[str, Any]) -> int:
    """How many evaluators the nodes have room for (by what each node has in all)."""
    return sum(int(n["fits"]) for n in p["nodes"])


def wait_for_evaluators(wait: Callable[[float, int], tuple[list[EvaluatorInfo], dict[str, Any]]], timeout_s: float,
                        say: Callable[[str], None], clock: Callable[[], float] = time.monotonic
                        ) -> tuple[list[EvaluatorInfo], dict[str, Any]]:
    """(the evaluators started, the broker's placement) once the campaign can begin (module docstring);
    `wait(s, known)` is the broker's `wait_started`. Raises TimeoutError when none started within `timeout_s`."""
    start = clock()
    next_report = start + FIRST_REPORT_S
    last_count, last_change = 0, start
    while True:
        now = clock()
        infos, p = wait(max(0.1, min(next_report, start + timeout_s) - now), last_count)
        now = clock()
        if len(infos) != last_count:
            last_count, last_change = len(infos), now
        if not p["waiting"]:
            return infos, p
        if infos and (len(infos) >= min(placeable(p), len(infos) + p["waiting"]) or now - last_change >= GRACE_S):
            say(f"beginning with {len(infos)} evaluator(s); {placement_text(p)}: they join when Ray can place them")
            return infos, p
        if not infos and now - start >= timeout_s:
            raise TimeoutError(f"no evaluator started within {timeout_s:.0f} s: {placement_text(p)}")
        if now >= next_report:
            say(f"waiting for evaluators ({now - start:.0f} s): {placement_text(p)}")
            next_report = now + REPORT_EVERY_S
