"""Where a condition on one unknown changes outcome: ``n_cols // 100 > 21`` turns at 2200 columns,
``row // 8 == 25`` at rows 200 and 208, ``(n > 100) & (n < 200)`` at 101 and 200.

A condition (comparisons, joined by boolean operators) that holds one unknown value (a size argument,
``x.shape[1]``, the program id, wherever it appears) and otherwise only literals, meta-parameters and
module constants under integer arithmetic is evaluated at every value of the unknown from 0 to `DOMAIN`;
the values at which its outcome differs from the value before are where a path may split
(`fitness.check.crossings` tries sizes there). Integer division and remainder follow Python's rounding
(Triton's truncation agrees on the non-negative values sizes and program ids take).
"""

from __future__ import annotations

import ast
import functools
import itertools
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

DOMAIN = 1 << 21  # the unknown's values tried: 0 .. DOMAIN - 1 (sizes past it cost more than the check affords)

Value = Any  # an int, a float or an int64 array over the domain

_BIN: dict[type, Callable[[Value, Value], Value]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Div: operator.truediv, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}
_CMP: dict[type, Callable[[Value, Value], Value]] = {
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


@functools.cache
def _domain() -> np.ndarray:
    """The unknown's values, made once (16 MB); read only: every operation on it makes a new array."""
    x = np.arange(DOMAIN, dtype=np.int64)
    x.flags.writeable = False
    return x


class _NotSolvable(Exception):
    pass


class _Side:
    """Evaluates the sides of a comparison over the domain, the one unknown standing for ``np.arange``."""

    def __init__(self, names: dict[str, int]) -> None:
        self.names = names
        self.unknown: str | None = None
        self.x = _domain()

    def eval(self, e: ast.expr) -> Value:
        if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
            return e.value
        if isinstance(e, ast.Name) and e.id in self.names:
            return self.names[e.id]
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            return -self.eval(e.operand)
        if isinstance(e, ast.Compare) and all(type(op) in _CMP for op in e.ops):
            operands = [self.eval(v) for v in (e.left, *e.comparators)]
            out: Value = True
            for (a, b), op in zip(itertools.pairwise(operands), e.ops, strict=True):
                out = np.logical_and(out, _CMP[type(op)](a, b))
            return out
        if isinstance(e, ast.BoolOp) and is_condition(e):
            parts = [self.eval(v) for v in e.values]
            join = np.logical_and if isinstance(e.op, ast.And) else np.logical_or
            out = parts[0]
            for part in parts[1:]:
                out = join(out, part)
            return out
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not) and is_condition(e.operand):
            return np.logical_not(self.eval(e.operand))
        if isinstance(e, ast.BinOp) and is_condition(e):
            a, b = self.eval(e.left), self.eval(e.right)
            return {ast.BitAnd: np.logical_and, ast.BitOr: np.logical_or, ast.BitXor: np.logical_xor}[type(e.op)](a, b)
        if isinstance(e, ast.BinOp) and type(e.op) in _BIN:
            return self._binop(e)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Pow):
            base, power = self.eval(e.left), self.eval(e.right)
            if isinstance(power, np.ndarray) or not 0 <= power <= 3:
                raise _NotSolvable  # past a cube an int64 over the domain overflows
            return base ** power
        if isinstance(e, ast.Call) and not e.keywords:
            name = ast.unparse(e.func).rsplit(".", 1)[-1]
            if name in ("min", "max") and len(e.args) >= 2:
                args = [self.eval(a) for a in e.args]
                out = args[0]
                for a in args[1:]:
                    out = (np.minimum if name == "min" else np.maximum)(out, a)
                return out
            if name == "cdiv" and len(e.args) == 2:
                a, b = self.eval(e.args[0]), self.eval(e.args[1])
                self._nonzero(b)
                return (a + b - 1) // b
        return self._atom(e)

    def _binop(self, e: ast.BinOp) -> Value:
        a, b = self.eval(e.left), self.eval(e.right)
        if isinstance(e.op, (ast.FloorDiv, ast.Mod, ast.Div)):
            self._nonzero(b)
        if isinstance(e.op, (ast.LShift, ast.RShift)) and (isinstance(b, np.ndarray) or not 0 <= b <= 40):
            raise _NotSolvable
        if isinstance(e.op, (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)) and (
                isinstance(a, float) or isinstance(b, float)):
            raise _NotSolvable
        with np.errstate(all="ignore"):
            return _BIN[type(e.op)](a, b)

    @staticmethod
    def _nonzero(b: Value) -> None:
        if (isinstance(b, np.ndarray) and not b.all()) or (not isinstance(b, np.ndarray) and b == 0):
            raise _NotSolvable

    def _atom(self, e: ast.expr) -> Value:
        """The unknown: any other expression, provided it is the only one (by its text) in the comparison."""
        text = ast.unparse(e)
        if self.unknown is None:
            self.unknown = text
        elif self.unknown != text:
            raise _NotSolvable
        return self.x


def outcomes(condition: ast.expr, names: dict[str, int]) -> tuple[np.ndarray, str] | None:
    """(the outcome of `condition` at each value of its one unknown over the domain; the unknown's text), or
    None when it has no unknown, more than one, or arithmetic this cannot follow. `condition` is a
    comparison, or comparisons joined by ``and``/``or``/``not``/``&``/``|``/``^``."""
    side = _Side(names)
    try:
        truth = side.eval(condition)
    except (_NotSolvable, OverflowError, ZeroDivisionError, TypeError, ValueError):
        return None
    if side.unknown is None:
        return None
    return np.broadcast_to(np.asarray(truth, dtype=bool), (DOMAIN,)), side.unknown


def change_points(truth: np.ndarray) -> np.ndarray:
    """The values at which an outcome over the domain differs from the value before, sorted."""
    return np.flatnonzero(truth[1:] != truth[:-1]) + 1


def is_condition(e: ast.expr) -> bool:
    """Whether `e` is a comparison, or comparisons joined by boolean operators."""
    if isinstance(e, ast.Compare):
        return True
    if isinstance(e, ast.BoolOp):
        return all(is_condition(v) for v in e.values)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        return is_condition(e.operand)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return is_condition(e.left) and is_condition(e.right)
    return False
