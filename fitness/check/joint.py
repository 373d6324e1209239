"""Conditions that hold together: a path taken only where two conditions on sizes hold at once.

The crossings (`fitness.check.crossings`) move one dimension at a time past each threshold, so each
comparison goes both ways; a path that needs two of them at once is still never run:
``tl.where((row > 5000) & (n_cols > 5000), wrong, y)``, a select nested in another's branch
(``tl.where(row > 5000, tl.where(n_cols > 5000, wrong, y), y)``), a comparison inside ``if rows > 5000:``,
two conditions mixed by arithmetic (``(row > 5000) * (n_cols > 5000)``: every combination of their outcomes),
conditions named apart and joined later (``tall = row > 5000``, then ``tall & wide``).
Each such path is a *conjunction*: the conditions that lead to it (the enclosing ``if``/``while`` tests and
select conditions, each with the outcome its branch takes) and the condition itself, with either outcome;
conditions joined by ``&``/``and`` (or, negated, ``|``/``or``) are split into their parts.

Where the parts that are conditions on one size or index each (solved over their unknown's values by
`fitness.check.change_points`) can hold together, and no check size makes them, the size that does is
tried: each dimension moved to the smallest value its parts allow (a size of n holds the indices
0 .. n - 1; several parts on one index must hold at one index). Parts that test data, or more than one
dimension at once, are left out: the special values and the single crossings see to them.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from evo.contracts.task import Size
from fitness.check.change_points import DOMAIN, is_condition
from fitness.check.data_flow import call_name

Literal = tuple[ast.expr, bool]  # a condition and the outcome wanted of it


@dataclass(frozen=True)
class Part:
    """A solved part of a conjunction: where it holds over its unknown's values (the outcome wanted
    applied), whether the unknown is an index, the dimension that moves it, and the unknown's text."""

    holds: np.ndarray
    index: bool
    dim: str
    unknown: str


def conjunctions(fn: ast.FunctionDef, turns: Callable[[ast.expr], bool] = lambda _: False,
                 ) -> Iterator[tuple[int, list[Literal]]]:
    """(line, conjunction) for each condition of `fn` with each of its outcomes, under the outcomes of the
    conditions its branch sits under; only those of two parts or more. `turns`: whether an expression is a
    value that can turn without a comparison (``min(n_cols // 1501, 1)``), which arithmetic mixes with
    conditions as one more part (true: past its turn)."""
    yield from _statements(fn.body, [], turns)


def _statements(stmts: list[ast.stmt], guards: list[Literal], turns: Callable[[ast.expr], bool],
                ) -> Iterator[tuple[int, list[Literal]]]:
    for s in stmts:
        if isinstance(s, (ast.If, ast.While)):
            yield from _expression(s.test, guards, turns, whole=True)
            yield from _together(s.test, guards, turns)
            yield from _statements(s.body, guards + split(s.test, True), turns)
            yield from _statements(s.orelse, guards + split(s.test, False), turns)
        elif isinstance(s, (ast.For, ast.With)):
            for e in [s.iter] if isinstance(s, ast.For) else [i.context_expr for i in s.items]:
                yield from _expression(e, guards, turns)
                yield from _together(e, guards, turns)
            yield from _statements(s.body, guards, turns)
            yield from _statements(getattr(s, "orelse", []), guards, turns)
        elif not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)):
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    yield from _expression(child, guards, turns)
                    yield from _together(child, guards, turns)


MAX_TOGETHER = 4  # conditions of one expression taken in every combination of their outcomes (16 at most)


def _together(e: ast.expr, guards: list[Literal], turns: Callable[[ast.expr], bool],
              ) -> Iterator[tuple[int, list[Literal]]]:
    """Every combination of the outcomes of the conditions (and values that turn) that meet in `e`
    (``(row > 600) * (n_cols > 1500)``, a sum of two, such a product compared): arithmetic mixes them as a join
    does. None where more than `MAX_TOGETHER` meet (each still goes both ways alone)."""
    found: list[ast.expr] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Call) and call_name(node.func) == "where" and node.args:
            visit(node.args[0])  # its branches sit under its condition (`_expression`)
            return
        inner = _compares_in(node)
        if isinstance(node, ast.expr) and ((is_condition(node) and not (isinstance(node, ast.Compare) and inner))
                                           or (turns(node) and not inner)):
            found.append(node)  # a condition (a product of conditions compared is not one), a value that turns
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(e)
    if not 2 <= len(found) <= MAX_TOGETHER:
        return
    for outcomes in itertools.product((True, False), repeat=len(found)):
        yield e.lineno, guards + [p for c, o in zip(found, outcomes) for p in split(c, o)]


def _expression(e: ast.expr, guards: list[Literal], turns: Callable[[ast.expr], bool], whole: bool = False,
                ) -> Iterator[tuple[int, list[Literal]]]:
    """The conjunctions of the conditions in `e` (an ``if``'s test when `whole`), a select's branches under
    its condition; a value that turns in a branch is a part there too (true: it has turned)."""
    if isinstance(e, ast.Call) and call_name(e.func) == "where" and len(e.args) == 3:
        c = e.args[0]
        yield from _both(c, guards)
        yield from _expression(c, guards, turns, whole=True)
        yield from _expression(e.args[1], guards + split(c, True), turns)
        yield from _expression(e.args[2], guards + split(c, False), turns)
        return
    if is_condition(e):
        if whole or _joined(e) or guards:
            yield from _both(e, guards)
        return
    if guards and turns(e) and not _compares_in(e):
        yield from _both(e, guards)
        return
    if isinstance(e, ast.IfExp):
        yield from _both(e.test, guards)
        yield from _expression(e.body, guards + split(e.test, True), turns)
        yield from _expression(e.orelse, guards + split(e.test, False), turns)
        return
    if isinstance(e, ast.Lambda):
        return
    for child in ast.iter_child_nodes(e):
        if isinstance(child, ast.expr):
            yield from _expression(child, guards, turns)


def _both(c: ast.expr, guards: list[Literal]) -> Iterator[tuple[int, list[Literal]]]:
    for outcome in (True, False):
        parts = guards + split(c, outcome)
        if len(parts) >= 2:
            yield c.lineno, parts


def _joined(e: ast.expr) -> bool:
    return isinstance(e, ast.BoolOp) or (isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr)))


def split(c: ast.expr, outcome: bool) -> list[Literal]:
    """`c` taking `outcome`, as parts that must all hold: ``a & b`` true is a true and b true, ``a | b``
    false is a false and b false; any other condition is one part."""
    if isinstance(c, ast.UnaryOp) and isinstance(c.op, ast.Not):
        return split(c.operand, not outcome)
    conj = (ast.And, ast.BitAnd) if outcome else (ast.Or, ast.BitOr)
    if isinstance(c, ast.BoolOp) and isinstance(c.op, conj):
        return [p for v in c.values for p in split(v, outcome)]
    if isinstance(c, ast.BinOp) and isinstance(c.op, conj) and is_condition(c):
        return split(c.left, outcome) + split(c.right, outcome)
    return [(c, outcome)]


class Joint:
    """The sizes at which every part of a conjunction holds, by dimension (see the module docstring)."""

    def __init__(self, parts: list[Part]) -> None:
        self.parts = parts
        self.allowed = {dim: _allowed([p for p in parts if p.dim == dim]) for dim in {p.dim for p in parts}}

    @property
    def possible(self) -> bool:
        """Whether some size holds every part."""
        return all(a is not None for a in self.allowed.values())

    def holds_at(self, size: Size) -> bool:
        return all(a is not None and _at(a, size.get(dim)) for dim, a in self.allowed.items())

    def size_from(self, base: Size) -> Size:
        """`base` with each dimension a part moves at the smallest value that holds its parts, where the base's
        own value does not (`possible` holds)."""
        out = dict(base)
        for dim, a in self.allowed.items():
            assert a is not None
            if not _at(a, out.get(dim)):
                out[dim] = int(np.flatnonzero(a[1:])[0]) + 1
        return out


def _at(allowed: np.ndarray, v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 1 <= v < DOMAIN and bool(allowed[v])


def _allowed(parts: list[Part]) -> np.ndarray | None:
    """Over a dimension's values: whether a size there holds every part on it (a size's own value for a
    part on the size, some index below it for a part on an index: one index for all the parts on it)."""
    out = np.ones(DOMAIN, dtype=bool)
    indices: dict[str, np.ndarray] = {}
    for p in parts:
        if p.index:
            indices[p.unknown] = indices[p.unknown] & p.holds if p.unknown in indices else p.holds
        else:
            out &= p.holds
    for holds in indices.values():
        first = np.flatnonzero(holds)
        if not first.size:
            return None
        out[:int(first[0]) + 1] = False  # a size of n holds the indices 0 .. n - 1
    return out if out[1:].any() else None



def _compares_in(node: ast.AST) -> bool:
    """Whether a comparison sits inside `node` (below it)."""
    return any(isinstance(n, ast.Compare) for n in ast.walk(node) if n is not node)
