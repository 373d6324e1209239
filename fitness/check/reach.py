"""Reaching the lines the check cases left unrun (`fitness.check.coverage`): sizes drawn to reach them,
each checked like a check size, and the verdict on a kernel with a line that still never ran.

Users call a kernel at sizes the check never drew, and a search mutates code no check runs freely: a
branch for rows wider than the tuned BLOCK, a loop body for a second tile along K. The sizes tried move
one dimension of a small check size at a time (the dimensions that differ among the task's check and
bench sizes) to values around the thresholds a kernel's paths turn on: its integer meta-parameters and
the integer literals of its code (one past each, one short, two blocks and one more), and the bench
value. The sizes the crossings solve for the conditions of unreached branches come first (where they
turn on several dimensions at once, or with a loop's iterations: `fitness.check.joint`,
`fitness.check.loops`), then the thresholds those conditions name, then the cheapest sizes.
Each size runs as a check case (the reference compared, the race sanitizer on): a wrong result there is
the kernel's verdict, at a size the check chose. Then, reached or not by a line of its own, each
threshold the code compares with is crossed (`fitness.check.crossings`).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from evo.contracts.candidate import Candidate
from evo.contracts.task import Size, Task, size_key
from evo.contracts.verdict import Evaluation, Status
from fitness.check.coverage import FALSE, TRUE, Point, unreached
from fitness.check.crossings import MAX_CROSSINGS, Crossings, crossing_sizes
from fitness.check.equivalence import Observed
from fitness.check.thresholds import MAX_ELEMENTS, base_size, cost, thresholds

MAX_SIZES = 8  # sizes tried per candidate, beyond the check's own

FIRST, REST, ALL = "first", "rest", "all"  # which of a chosen size's cases a check runs
Check = Callable[[Size, Observed, str], Evaluation]  # (size, what runs show, FIRST, REST or ALL of its cases)


def search_sizes(task: Task, candidate: Candidate, missing: list[Point], crossings: Crossings) -> list[Size]:
    """Sizes to try, best first (see the module docstring); none already among the check sizes. `crossings`:
    the candidate's (`crossing_sizes`)."""
    base, free = base_size(task)
    if not free:
        return []
    near, other = thresholds(candidate, {p.line for p in missing})
    known = {size_key(s) for s in task.check_sizes}
    ranked: list[tuple[int, int, str]] = []
    # the sizes the crossings solve for the conditions of unreached branches first: where they turn on several
    # dimensions at once, or with a loop's iterations, no threshold moved alone reaches them
    lines = {p.line for p in missing}
    ranked += [(-1, 0, json.dumps(c.size, sort_keys=True)) for c in crossings.sizes if c.line in lines]
    for rank, group in enumerate((near, other)):
        for t in group:
            for dim in free:
                # one past the threshold first (the usual `> BLOCK` path), then several blocks and one more,
                # then a threshold on a multiple of the dimension, then one short of it
                for variant, v in enumerate((t + 1, 2 * t + 1, t // 2 + 1, t // 4 + 1, t - 1, t)):
                    ranked.append((rank, variant, json.dumps({**base, dim: v}, sort_keys=True)))
    for dim in free:
        bench = max(int(s[dim]) for s in task.bench_sizes if dim in s) if task.bench_sizes else 0
        if bench:
            ranked.append((2, 0, json.dumps({**base, dim: bench}, sort_keys=True)))
    out: list[Size] = []
    seen: set[str] = set()
    for _, _, text in sorted(ranked, key=lambda r: (r[0], r[1], cost(json.loads(r[2])))):
        size = json.loads(text)
        skey = size_key(size)
        if skey in seen or skey in known or cost(size) > MAX_ELEMENTS or any(
                isinstance(v, int) and v < 1 for v in size.values()):
            continue
        seen.add(skey)
        out.append(size)
    return out


def reach(candidate: Candidate, task: Task, ev: Evaluation, observed: Observed, check: Check) -> Evaluation:
    """`ev` (a passing full check whose runs reached what `observed` holds) once every required point of
    the candidate ran: sizes are drawn to reach what the check cases did not (`check(size, observed, which)` runs
    one as a check case, adding what it shows to `observed`: its first case, then the rest, every other
    distribution there, where it reached code no other size ran), then sizes past the thresholds the code
    compares with (`fitness.check.crossings`). A failure at such a size is the verdict; a point that still
    never ran makes the kernel ``unsafe``: code the check never ran is not verified."""
    lines = candidate.source.splitlines()
    missing = _lines(unreached(candidate.source, observed.probes))
    crossings = crossing_sizes(task, candidate)  # the line search tries some first, then every one is crossed
    tried: list[str] = []
    complete: set[str] = set()  # the sizes tried whose every case ran
    if missing:
        for size in search_sizes(task, candidate, missing, crossings)[:MAX_SIZES]:
            target = missing[0].describe(lines)
            r = check(size, observed, FIRST)
            tried.append(size_key(size))
            reached = _lines(unreached(candidate.source, observed.probes))
            if r.ok and len(reached) < len(missing):  # it ran code no other size ran: every distribution there
                r = check(size, observed, REST)
                complete.add(size_key(size))
            if not r.ok:
                return _failed_at(ev, r, size, f"which the check chose to reach {target} (no check case ran it)")
            missing = _lines(unreached(candidate.source, observed.probes))
            if not missing:
                break
        else:
            more = f" (and {len(missing) - 1} more point(s))" if len(missing) > 1 else ""
            where = f", nor at the {len(tried)} size(s) tried to reach it ({', '.join(tried)})" if tried else ""
            return ev.with_(status=Status.UNSAFE, reason=(
                f"{missing[0].describe(lines)}{more} never ran in the check{where}: code the check never ran is "
                "not verified, and users call kernels at sizes the check never drew (a condition on a "
                "meta-parameter or a literal alone is dead code and does not count)"))
    crossed: list[str] = []
    if crossings.beyond:  # said before the other sizes run: none of them would change it
        c = crossings.beyond[0]
        return ev.with_(status=Status.UNSAFE, reason=(
            f"its code takes another path at {size_key(c.size)}, {c.where(lines)}: past the {MAX_ELEMENTS} elements "
            "a check case affords and every bench size, and a path no run of the check reaches is not verified"))
    for crossing in crossings.sizes:
        if size_key(crossing.size) in complete:
            continue
        r = check(crossing.size, observed, REST if size_key(crossing.size) in tried else ALL)
        crossed.append(size_key(crossing.size))
        if not r.ok:
            return _failed_at(ev, r, crossing.size, crossing.why(lines))
    if crossings.more:
        needed = len(crossings.sizes) + crossings.more
        return ev.with_(status=Status.UNSAFE, reason=(
            f"its code takes another path at {needed} sizes no check size reached, more than the {MAX_CROSSINGS} "
            f"the check runs per candidate (it ran {', '.join(crossed)}): paths the check does not run are not "
            "verified"))
    one_way = unreached(candidate.source, observed.probes)
    if one_way:
        more = f" (and {len(one_way) - 1} more)" if len(one_way) > 1 else ""
        return ev.with_(status=Status.UNSAFE, reason=(
            f"{one_way[0].describe(lines)}{more}: a condition that went one way in every lane of every run of "
            "the check (the values its code compares with and the sizes its thresholds cross included) leaves "
            "the other way unverified, and users' inputs may take it"))
    chosen = [*tried, *crossed]
    extra = f" (with {len(chosen)} size(s) the check chose: {', '.join(chosen)})" if chosen else ""
    return ev.with_(reason=f"{ev.reason}; every line of its code ran in the check, and every condition of its "
                           f"kernels on input values, indices and sizes went both ways{extra}")


def _lines(points: list[Point]) -> list[Point]:
    """The statements and branch outcomes among `points`: sizes are searched to reach them. A comparison that
    went one way is judged once the sizes the check crosses have run (`reach`)."""
    return [p for p in points if p.kind not in (TRUE, FALSE)]


def _failed_at(ev: Evaluation, r: Evaluation, size: Size, why: str) -> Evaluation:
    """`ev` failed by the check `r` at a size the check chose (`why`)."""
    return ev.with_(status=r.status, error=r.error, max_error_ratio=r.max_error_ratio, max_abs_error=r.max_abs_error,
                    mismatch_fraction=r.mismatch_fraction, worst_case=r.worst_case, incidents=r.incidents,
                    reason=f"at size {size_key(size)}, {why}: {r.reason}")
