"""The sizes a kernel's paths may turn on, read from its code: integer values of expressions of
literals, meta-parameters and module constants (``2 * BLOCK``, ``triton.next_power_of_2(MAX)``), and
sizes built around them from a small check size (`fitness.check.reach`, `fitness.check.crossings`)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from evo.contracts.candidate import Candidate
from evo.contracts.odd_sizes import free_dimensions
from evo.contracts.syntax import parse_module
from evo.contracts.task import Size, Task

LARGEST_THRESHOLD = 1 << 24
MAX_ELEMENTS = 1 << 21  # the product of a size's dimensions: what the interpreter and the reference can afford


def ints(node: ast.AST) -> set[int]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, int)
            and not isinstance(n.value, bool) and 2 <= n.value <= LARGEST_THRESHOLD}


def value(e: ast.expr, names: dict[str, int]) -> int | None:
    """The integer value of an expression of literals, meta-parameters and module constants (None if
    it has another part): the threshold a condition such as ``cols > 2 * BLOCK`` turns on."""
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, ast.Name):
        return names.get(e.id)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = value(e.operand, names)
        return None if v is None else -v
    if isinstance(e, ast.BinOp) and isinstance(e.op, tuple(_OPS)):
        a, b = value(e.left, names), value(e.right, names)
        if a is None or b is None or (isinstance(e.op, (ast.FloorDiv, ast.Mod)) and b == 0) or (
                abs(b) > 64 and isinstance(e.op, (ast.Pow, ast.LShift))):
            return None
        return int(_OPS[type(e.op)](a, b))
    if isinstance(e, ast.Call) and e.args and not e.keywords:
        args = [value(a, names) for a in e.args]
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


def constants(candidate: Candidate, tree: ast.Module) -> dict[str, int]:
    """The integer meta-parameters and module constants of a candidate, by name."""
    names = {k: v for k, v in candidate.params.items() if isinstance(v, int) and not isinstance(v, bool)}
    for top in tree.body:
        if isinstance(top, ast.Assign) and len(top.targets) == 1 and isinstance(top.targets[0], ast.Name):
            v = value(top.value, names)
            if v is not None:
                names.setdefault(top.targets[0].id, v)
    return names


def thresholds(candidate: Candidate, lines: set[int]) -> tuple[list[int], list[int]]:
    """(thresholds named by the conditions of the ``if``/``while`` statements at `lines`, every other one),
    each sorted."""
    tree = parse_module(candidate.source)
    names = constants(candidate, tree)
    near: set[int] = set()
    for stmt in ast.walk(tree):
        if isinstance(stmt, (ast.If, ast.While)) and stmt.lineno in lines:
            for sub in ast.walk(stmt.test):
                v = value(sub, names) if isinstance(sub, ast.expr) else None
                if v is not None and 2 <= v <= LARGEST_THRESHOLD:
                    near.add(v)
    every = ints(tree) | {v for v in names.values() if 2 <= v <= LARGEST_THRESHOLD}
    return sorted(near), sorted(every - near)


def cost(size: Size) -> int:
    out = 1
    for v in size.values():
        if isinstance(v, int) and not isinstance(v, bool):
            out *= max(v, 1)
    return out


def base_size(task: Task) -> tuple[Size, list[str]]:
    """The small check size sizes are built from (the cheapest whose free dimensions are all 2 or more),
    and the free dimensions: those that differ among the task's check and bench sizes."""
    free = sorted(free_dimensions([*task.check_sizes, *task.bench_sizes]))
    roomy = [s for s in task.check_sizes if all(int(s.get(d, 0)) >= 2 for d in free)] or list(task.check_sizes)
    return min(roomy, key=cost), free
