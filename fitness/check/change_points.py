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
import math
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


def _next_power_of_2(a: Value) -> Value:
    if isinstance(a, np.ndarray):
        return np.left_shift(1, np.ceil(np.log2(np.maximum(a, 1))).astype(np.int64))
    if isinstance(a, float):
        raise _NotSolvable
    return 1 << max(a - 1, 0).bit_length()


def _int(a: Value) -> Value:
    return np.trunc(a).astype(np.int64) if isinstance(a, np.ndarray) else int(a)


# calls a value may take a turn through, by their last name: (arguments, the function over the domain)
_CALLS: dict[str, tuple[int, Callable[..., Value]]] = {
    "minimum": (2, np.minimum), "maximum": (2, np.maximum), "abs": (1, np.abs), "fabs": (1, np.abs),
    "floor": (1, np.floor), "ceil": (1, np.ceil), "trunc": (1, np.trunc), "int": (1, _int),
    "float": (1, lambda a: a * 1.0), "clamp": (3, lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi)),
    "where": (3, np.where), "next_power_of_2": (1, _next_power_of_2), "round": (1, lambda a: _int(np.rint(a))),
    # smooth, but a steep one is a step: ``tl.sigmoid((row - 5000.0) * 100.0)`` is 0 up to 4999, then 0.5 and 1
    "exp": (1, lambda a: np.exp(a * 1.0)), "exp2": (1, lambda a: np.exp2(a * 1.0)),
    "log": (1, lambda a: np.log(a * 1.0)), "log2": (1, lambda a: np.log2(a * 1.0)),
    "sqrt": (1, lambda a: np.sqrt(a * 1.0)),
    "rsqrt": (1, lambda a: 1.0 / np.sqrt(a * 1.0)), "sigmoid": (1, lambda a: 1.0 / (1.0 + np.exp(-a * 1.0))),
    "tanh": (1, lambda a: np.tanh(a * 1.0)), "sin": (1, lambda a: np.sin(a * 1.0)),
    "cos": (1, lambda a: np.cos(a * 1.0)), "pow": (2, lambda a, b: np.power(a * 1.0, b)),
}


# Python's math functions of one size a candidate may call (`fitness.check.allowed`), evaluated value by value
_MATH_CALLS = frozenset("sqrt isqrt log log2 log10 log1p exp exp2 expm1 ceil floor trunc gcd lcm fabs sin cos tan tanh "
                        "atan atan2 erf erfc copysign fmod hypot".split())


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

    def __init__(self, names: dict[str, int], first: int = DOMAIN) -> None:
        self.names = names
        self.unknown: str | None = None
        self.x = _domain()[:first]

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
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Call) and len(e.value.args) == 2 \
                and ast.unparse(e.value.func) == "divmod" and isinstance(e.slice, ast.Constant) \
                and e.slice.value in (0, 1):
            a, b = self.eval(e.value.args[0]), self.eval(e.value.args[1])  # ``divmod(n, 5000)[0]``
            self._nonzero(b)
            return a // b if e.slice.value == 0 else a % b
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
            if name in _CALLS and len(e.args) == _CALLS[name][0]:
                with np.errstate(all="ignore"):
                    return _CALLS[name][1](*(self.eval(a) for a in e.args))
            if isinstance(e.func, ast.Attribute) and ast.unparse(e.func.value) == "math" and name in _MATH_CALLS:
                return self._math(name, [self.eval(a) for a in e.args])  # numpy's above where it has one
            if name == "to" and len(e.args) == 1 and isinstance(e.func, ast.Attribute):
                inner = self.eval(e.func.value)  # a cast: ``(n / 7).to(tl.int32)`` truncates
                return np.trunc(inner).astype(np.int64) if "int" in ast.unparse(e.args[0]) else inner * 1.0
        return self._atom(e)

    @staticmethod
    def _math(name: str, args: list[Value]) -> Value:
        """A function of Python's math module, value by value over the domain (an integer square root, a gcd)."""
        f = getattr(math, name)
        if not any(isinstance(a, np.ndarray) for a in args):
            return f(*args)
        try:
            out = np.frompyfunc(f, len(args), 1)(*args)
            return np.array(out.tolist(), dtype=np.float64 if any(isinstance(v, float) for v in out[:64]) else np.int64)
        except (ValueError, OverflowError, TypeError) as err:
            raise _NotSolvable from err

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


def values(e: ast.expr, names: dict[str, int], first: int = DOMAIN) -> tuple[np.ndarray, str] | None:
    """(the value of the expression `e` at each value of its one unknown over the domain, or over its `first`
    values, as float64 where it is fractional; the unknown's text), or None as for `outcomes`."""
    side = _Side(names, first)
    try:
        out = side.eval(e)
    except (_NotSolvable, OverflowError, ZeroDivisionError, TypeError, ValueError):
        return None
    if side.unknown is None or not isinstance(out, np.ndarray) or out.shape != side.x.shape:
        return None
    if out.dtype == bool:
        out = out.astype(np.int64)
    if out.dtype.kind == "f" and not np.isfinite(out).all():  # an overflow or a NaN: a value of its own
        out = np.nan_to_num(out, nan=-3e300, posinf=1e300, neginf=-1e300)
    return out, side.unknown


LAW_PERIODS = 4096  # the longest period a value's law is looked for with (a block of 4096 elements)
_ORDERS = (1, 2, 3)


def first_break(v: np.ndarray, last: int) -> int | None:
    """The first value past `last` at which `v` leaves the law it follows up to `last`, or None.

    A law is a (period, order) under which the order-th difference of `v` at that lag is zero: a constant or
    a line (period 1, order 1 or 2), a square or a cube (order 3), a staircase such as ``cdiv(n, 128)`` or
    ``n % 100`` (period 128 or 100). The law taken is the first, shortest period first, that holds over a
    long window ending at `last` (sixteen periods, 256 values at least), else the first that holds over a
    short one (four periods, 16 values): ``n % 100`` seen up to 2053 is a staircase, not the line it is
    from 2000 to 2053; ``max(min(n, 100), n - 4900)`` is the constant 100 from 101 on. ``min(n, 5000)``
    leaves its line at 5001; ``n // 5000`` leaves its constant at 5000; ``cdiv(n, 128)`` never leaves its
    staircase. Past `last` the check has not seen what the value does; a kernel that takes another path
    where the value turns is checked there (`fitness.check.crossings`)."""
    if last < 2 or last >= DOMAIN - 1:  # a law needs three values at least (rows 1 .. 3 hold programs 0 .. 2)
        return None
    x = v.astype(np.float64)
    fallback: tuple[int, int] | None = None
    for period in range(1, min(LAW_PERIODS, last // 2) + 1):
        for order in _ORDERS:
            if not _holds_up_to(x, period, order, last, max(4 * period, 16)):
                continue
            if _holds_up_to(x, period, order, last, max(16 * period, 256)):
                return _leaves(x, period, order, last)
            fallback = fallback or (period, order)
    return None if fallback is None else _leaves(x, *fallback, last)


def _holds_up_to(x: np.ndarray, period: int, order: int, last: int, window: int) -> bool:
    start = max(order * period, last - window)
    return last - start + 1 >= max(2 * period, 2) and bool(_holds(x, period, order, start, last + 1).all())


def _leaves(x: np.ndarray, period: int, order: int, last: int) -> int | None:
    beyond = np.flatnonzero(~_holds(x, period, order, last + 1, DOMAIN))
    return int(last + 1 + beyond[0]) if beyond.size else None


def _holds(x: np.ndarray, period: int, order: int, lo: int, hi: int) -> np.ndarray:
    """Whether the order-th difference of `x` at lag `period` is zero, at each of the values lo .. hi - 1."""
    d = x[lo - order * period:hi]
    for _ in range(order):
        d = d[period:] - d[:-period]
    scale = np.abs(x[lo:hi]) + np.abs(x[lo - order * period:hi - order * period]) + 1.0
    return np.abs(d) <= 1e-9 * scale


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
