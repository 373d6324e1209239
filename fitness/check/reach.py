"""Reaching the lines the check cases left unrun (`fitness.check.coverage`): sizes drawn to reach them,
each checked like a check size, and the verdict on a kernel with a line that still never ran.

Users call a kernel at sizes the check never drew, and a search mutates code no check runs freely: a
branch for rows wider than the tuned BLOCK, a loop body for a second tile along K. The sizes tried move
one dimension of a small check size at a time (the dimensions that differ among the task's check and
bench sizes) to values around the thresholds a kernel's paths turn on: its integer meta-parameters and
the integer literals of its code (one past each, one short, two blocks and one more), and the bench
value. Thresholds named by the conditions of unreached branches come first, then the cheapest sizes.
Each size runs as a check case (the reference compared, the race sanitizer on): a wrong result there is
the kernel's verdict, at a size the check chose.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable

from evo.contracts.candidate import Candidate
from evo.contracts.odd_sizes import free_dimensions
from evo.contracts.task import Size, Task, size_key
from evo.contracts.verdict import Evaluation, Status
from fitness.check.coverage import Point, unreached
from fitness.check.equivalence import Observed

MAX_SIZES = 8  # sizes tried per candidate, beyond the check's own
MAX_ELEMENTS = 1 << 21  # the product of a size's dimensions: what the interpreter and the reference can afford
_LARGEST_THRESHOLD = 1 << 24

Check = Callable[[Size, Observed], Evaluation]


def _ints(node: ast.AST) -> set[int]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, int)
            and not isinstance(n.value, bool) and 2 <= n.value <= _LARGEST_THRESHOLD}


def _value(e: ast.expr, names: dict[str, int]) -> int | None:
    """The integer value of an expression of literals, meta-parameters and module constants (None if
    it has another part): the threshold a condition such as ``cols > 2 * BLOCK`` turns on."""
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, ast.Name):
        return names.get(e.id)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = _value(e.operand, names)
        return None if v is None else -v
    if isinstance(e, ast.BinOp) and isinstance(e.op, tuple(_OPS)):
        a, b = _value(e.left, names), _value(e.right, names)
        if a is None or b is None or (isinstance(e.op, (ast.FloorDiv, ast.Mod)) and b == 0) or (
                abs(b) > 64 and isinstance(e.op, (ast.Pow, ast.LShift))):
            return None
        return int(_OPS[type(e.op)](a, b))
    if isinstance(e, ast.Call) and e.args and not e.keywords:
        args = [_value(a, names) for a in e.args]
        name = ast.unparse(e.func).rsplit(".", 1)[-1]
        if any(a is None for a in args):
            return None
        if name == "next_power_of_2" and len(args) == 1 and args[0] is not None:
            return 1 << max(args[0] - 1, 0).bit_length()
        if name in ("min", "max") and len(args) >= 2:
            return (min if name == "min" else max)(a for a in args if a is not None)
    return None


_OPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b, ast.Pow: lambda a, b: a**b,
}


def thresholds(candidate: Candidate, missing: list[Point]) -> tuple[list[int], list[int]]:
    """(thresholds named by the conditions of unreached branches, every other one), each sorted."""
    tree = ast.parse(candidate.source)
    names = {k: v for k, v in candidate.params.items() if isinstance(v, int) and not isinstance(v, bool)}
    for top in tree.body:  # module constants
        if isinstance(top, ast.Assign) and len(top.targets) == 1 and isinstance(top.targets[0], ast.Name):
            v = _value(top.value, names)
            if v is not None:
                names.setdefault(top.targets[0].id, v)
    lines = {p.line for p in missing}
    near: set[int] = set()
    for stmt in ast.walk(tree):
        if isinstance(stmt, (ast.If, ast.While)) and stmt.lineno in lines:
            for sub in ast.walk(stmt.test):
                v = _value(sub, names) if isinstance(sub, ast.expr) else None
                if v is not None and 2 <= v <= _LARGEST_THRESHOLD:
                    near.add(v)
    every = _ints(tree) | {v for v in names.values() if 2 <= v <= _LARGEST_THRESHOLD}
    return sorted(near), sorted(every - near)


def _cost(size: Size) -> int:
    out = 1
    for v in size.values():
        if isinstance(v, int) and not isinstance(v, bool):
            out *= max(v, 1)
    return out


def search_sizes(task: Task, candidate: Candidate, missing: list[Point]) -> list[Size]:
    """Sizes to try, best first (see the module docstring); none already among the check sizes."""
    sizes = [*task.check_sizes, *task.bench_sizes]
    free = sorted(free_dimensions(sizes))
    if not free:
        return []
    roomy = [s for s in task.check_sizes if all(int(s.get(d, 0)) >= 2 for d in free)] or list(task.check_sizes)
    base = min(roomy, key=_cost)
    near, other = thresholds(candidate, missing)
    known = {size_key(s) for s in task.check_sizes}
    ranked: list[tuple[int, int, str]] = []
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
    for _, _, text in sorted(ranked, key=lambda r: (r[0], r[1], _cost(json.loads(r[2])))):
        size = json.loads(text)
        skey = size_key(size)
        if skey in seen or skey in known or _cost(size) > MAX_ELEMENTS or any(
                isinstance(v, int) and v < 1 for v in size.values()):
            continue
        seen.add(skey)
        out.append(size)
    return out


def reach(candidate: Candidate, task: Task, ev: Evaluation, observed: Observed, check: Check) -> Evaluation:
    """`ev` (a passing full check whose runs reached what `observed` holds) once every required point of
    the candidate ran: sizes are drawn to reach what the check cases did not (`check(size, observed)` runs
    one as a check case, adding what it shows to `observed`). A failure at such a size is the verdict; a
    point that still never ran makes the kernel ``unsafe``: code the check never ran is not verified."""
    missing = unreached(candidate.source, observed.probes)
    if not missing:
        return ev.with_(reason=f"{ev.reason}; every line of its code ran in the check")
    tried: list[str] = []
    for size in search_sizes(task, candidate, missing)[:MAX_SIZES]:
        target = missing[0].describe(candidate.source.splitlines())
        r = check(size, observed)
        tried.append(size_key(size))
        if not r.ok:
            return ev.with_(status=r.status, error=r.error, max_error_ratio=r.max_error_ratio,
                            max_abs_error=r.max_abs_error, mismatch_fraction=r.mismatch_fraction,
                            worst_case=r.worst_case, incidents=r.incidents,
                            reason=f"at size {size_key(size)}, which the check chose to reach {target} (no check "
                                   f"case ran it): {r.reason}")
        missing = unreached(candidate.source, observed.probes)
        if not missing:
            return ev.with_(reason=f"{ev.reason}; every line of its code ran in the check (with {len(tried)} "
                                   f"size(s) chosen to reach them: {', '.join(tried)})")
    lines = candidate.source.splitlines()
    more = f" (and {len(missing) - 1} more point(s))" if len(missing) > 1 else ""
    where = f", nor at the {len(tried)} size(s) tried to reach it ({', '.join(tried)})" if tried else ""
    return ev.with_(status=Status.UNSAFE, reason=(
        f"{missing[0].describe(lines)}{more} never ran in the check{where}: code the check never ran is not "
        "verified, and users call kernels at sizes the check never drew (a condition on a meta-parameter or a "
        "literal alone is dead code and does not count)"))
