"""Conditions that turn with a loop's iterations: a kernel wrong from its fourth block of a row on.

``for start in range(0, n_cols, BLOCK)`` runs one iteration per block: a condition on ``start``
(``tl.where(start >= 3 * BLOCK, wrong, right)``), or on a counter the loop steps (``it += 1`` then ``it > 3``),
turns only once the loop runs that many iterations, at a size no check size and no single crossing reaches
(a softmax over a 32,000-word vocabulary runs four blocks of 8192; the check's online case runs two). Each
such condition is evaluated at the values the loop gives it, iteration by iteration, and where its outcome
first differs from the first iteration's, the size at which the loop's end passes that iteration is tried
(`fitness.check.crossings`). A counter is a name set once before the loop to a fixed value and stepped only
by ``+=``/``-=`` of a fixed value in the loop's own body (not under a condition or an inner loop); a
``while start < n_cols`` over such a counter is a loop over a range too.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fitness.check.change_points import DOMAIN, outcomes, values

MAX_ITERATIONS = 1 << 16  # iterations looked through for the first that turns a condition


@dataclass(frozen=True)
class Loop:
    """A loop over a range (its target, its bounds' code) and its counters, by name: (initial value's code,
    step's code)."""

    node: ast.For | ast.While
    target: str
    start: ast.expr
    end: ast.expr
    step: ast.expr
    counters: dict[str, tuple[ast.expr, ast.expr]]


def enclosing_loops(fn: ast.FunctionDef) -> dict[int, list[Loop]]:
    """For each node of `fn` (by id), the ranged ``for`` loops whose body it sits in, innermost first."""
    out: dict[int, list[Loop]] = {}

    def visit(node: ast.AST, loops: list[Loop]) -> None:
        out[id(node)] = loops
        inner = loops
        if isinstance(node, (ast.For, ast.While)):
            loop = _loop(node, fn)
            inner = [loop, *loops] if loop is not None else loops
        for child in ast.iter_child_nodes(node):
            in_body = isinstance(node, (ast.For, ast.While)) and any(child is b for b in node.body)
            visit(child, inner if in_body else loops)

    for s in fn.body:
        visit(s, [])
    return out


def _loop(s: ast.For | ast.While, fn: ast.FunctionDef) -> Loop | None:
    """`s` as a loop over a range: a ``for`` over ``range``/``tl.range`` (its keywords, ``num_stages=``, change
    no value), or a ``while v < end`` (or ``<=``) whose `v` is a counter of its body."""
    counters = _counters(s, fn)
    if isinstance(s, ast.While):
        test = s.test
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Lt, ast.LtE))
                and isinstance(test.left, ast.Name) and test.left.id in counters):
            return None
        name = test.left.id
        init, step = counters.pop(name)
        end = test.comparators[0]
        if isinstance(test.ops[0], ast.LtE):
            end = ast.BinOp(end, ast.Add(), ast.Constant(1))
        return Loop(s, name, init, end, step, counters)
    it = s.iter
    if not (isinstance(s.target, ast.Name) and isinstance(it, ast.Call)
            and ast.unparse(it.func).rsplit(".", 1)[-1] in ("range", "static_range") and 1 <= len(it.args) <= 3):
        return None
    args = list(it.args)
    start, end, step = (ast.Constant(0), args[0], ast.Constant(1)) if len(args) == 1 else (
        args[0], args[1], args[2] if len(args) == 3 else ast.Constant(1))
    return Loop(s, s.target.id, start, end, step, counters)


def _counters(loop: ast.For | ast.While, fn: ast.FunctionDef) -> dict[str, tuple[ast.expr, ast.expr]]:
    """Names stepped by one fixed ``+=``/``-=`` in `loop`'s own body, bound nowhere else in it, and set by a plain
    assignment the last time a statement before the loop (in its block) binds them: their initial value and
    step (negated for ``-=``), as code."""
    steps: dict[str, ast.expr | None] = {}
    for s in loop.body:
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and isinstance(s.op, (ast.Add, ast.Sub)):
            by: ast.expr = s.value if isinstance(s.op, ast.Add) else ast.UnaryOp(ast.USub(), s.value)
            steps[s.target.id] = by if s.target.id not in steps else None
    before = _preceding(loop, fn)
    out: dict[str, tuple[ast.expr, ast.expr]] = {}
    for name, step in steps.items():
        inside = [n for n in ast.walk(loop) if _binds(n, name)]
        last = next((b for b in reversed(before) if any(_binds(n, name) for n in ast.walk(b))), None)
        if step is not None and len(inside) == 1 and isinstance(last, ast.Assign) and len(last.targets) == 1 \
                and isinstance(last.targets[0], ast.Name):
            out[name] = (last.value, step)
    return out


def _preceding(loop: ast.stmt, fn: ast.FunctionDef) -> list[ast.stmt]:
    """The statements before `loop` in the block that holds it."""
    for node in ast.walk(fn):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(b is loop for b in block):
                return block[:next(i for i, b in enumerate(block) if b is loop)]
    return []


def _binds(n: ast.AST, name: str) -> bool:
    return any(isinstance(t, ast.Name) and t.id == name for t in _targets(n))


def _targets(n: ast.AST) -> list[ast.expr]:
    if isinstance(n, ast.Assign):
        return [t for target in n.targets for t in ast.walk(target) if isinstance(t, ast.expr)]
    if isinstance(n, (ast.AugAssign, ast.AnnAssign)):
        return [n.target]
    if isinstance(n, ast.For):
        return [t for t in ast.walk(n.target) if isinstance(t, ast.expr)]
    return []


Fixed = Callable[[ast.expr], int | None]  # the value of code fixed for the candidate (through call sites)


def turning_ends(condition: ast.expr, loop: Loop, fixed: Fixed, names: dict[str, int]) -> list[int]:
    """The values the end of `loop` must pass for `condition` (read in its body) to take an outcome its
    first iteration did not give it: one per name of the loop it reads (the target, a counter), where the
    condition is on that name alone once the other names are fixed (`fixed`); none otherwise."""
    start, step = fixed(loop.start), fixed(loop.step)
    if start is None or step is None or step < 1:
        return []
    read = {n.id for n in ast.walk(condition) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    resolved = dict(names)
    for name in read - {loop.target, *loop.counters}:
        v = fixed(ast.Name(name, ast.Load()))
        if v is not None:
            resolved[name] = v
    out: list[int] = []
    k = np.arange(min(MAX_ITERATIONS, max((DOMAIN - start) // step, 1)), dtype=np.int64)
    for name in read & {loop.target, *loop.counters}:
        solved = outcomes(condition, resolved)
        if solved is None or solved[1] != name:
            continue
        if name == loop.target:
            at = start + k * step
        else:
            init, by = (fixed(e) for e in loop.counters[name])
            if init is None or by is None or by == 0:
                continue
            at = init + k * by
        inside = (at >= 0) & (at < DOMAIN)
        truth = solved[0][np.where(inside, at, 0)]
        turned = np.flatnonzero(inside & (truth != truth[0]))
        if turned.size:
            out.append(int(start + turned[0] * step) + 1)  # the end past that iteration's loop value
    return out


def end_size(end: ast.expr, names: dict[str, int], past: int) -> int | None:
    """The smallest size (the value of the one unknown of the loop's end, `end`, as the caller wrote it) at
    which the end passes `past`: `past` itself where the end is the size."""
    found = values(end, names)
    if found is None:
        return None
    over = np.flatnonzero(found[0] >= past)
    return int(over[0]) if over.size and over[0] >= 1 else None
