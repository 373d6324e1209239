"""Input values at which an expression of one data value equals a number, found numerically
(`fitness.check.data_values`).

The analytic solver inverts arithmetic with a number and a few functions. A kernel can single out a value
through anything else: ``x * x - 6.5 * x + 10.5625`` is zero only at 3.25 (a double root: it never changes
sign), ``tl.sin(x) == 0.5`` holds at 0.5236, a select or a floor turns between two values. Where an
expression reads one data value and is made of numbers, arithmetic, elementwise functions, clips, casts
and selects, it is evaluated in float64 over a grid of values (every 1/512 in [-64, 64], and magnitudes
from 1e-30 to 1e30 of both signs); each change of sign of ``f(x) - t`` is narrowed by bisection to where it
turns (a root, or the edge of a step), and each local minimum of ``|f(x) - t|`` by golden-section search,
kept where it comes near zero or far below its grid neighbours (a double root). The values nearest zero
come first, at most `MAX_ROOTS` per expression.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable

import numpy as np

from fitness.check.data_flow import call_name

MAX_ROOTS = 4
_STEPS = 80  # bisection and golden-section iterations: far below a float32 step
_TOUCH = 1e-9  # |f(x) - t| at a local minimum, relative to 1 + |t| or to its grid neighbours', that reaches t

Fn = Callable[[np.ndarray], np.ndarray]

_UNARY: dict[str, Fn] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "expm1": np.expm1, "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "rsqrt": lambda a: 1.0 / np.sqrt(a), "abs": np.abs,
    "fabs": np.abs, "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "sinh": np.sinh,
    "cosh": np.cosh, "sigmoid": lambda a: 1.0 / (1.0 + np.exp(-a)), "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "rint": np.rint, "round": np.rint,
}
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "minimum": np.minimum, "maximum": np.maximum, "min": np.minimum, "max": np.maximum, "fmin": np.fmin,
    "fmax": np.fmax, "pow": np.power, "atan2": np.arctan2,
}
_ARITH: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide, ast.Pow: np.power,
    ast.FloorDiv: np.floor_divide, ast.Mod: np.mod,
}
_COMPARE: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal, ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}
_LOGIC: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ast.BitAnd: np.logical_and, ast.BitOr: np.logical_or,
}


def _grid() -> np.ndarray:
    magnitudes = np.logspace(-30, 30, 2401)
    return np.unique(np.concatenate([-magnitudes, np.linspace(-64.0, 64.0, 2**16 + 1), magnitudes, [0.0]]))


_GRID = _grid()


def function_of(e: ast.expr, var: str, numbers: dict[str, float]) -> Fn | None:
    """`e` as a function of the data name `var` (the other names are `numbers`), or None where `e` has a part
    this module does not evaluate."""
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
        c = float(e.value)
        return lambda x: np.full_like(x, c)
    if isinstance(e, ast.Name):
        if e.id == var:
            return lambda x: x
        if e.id in numbers:
            k = numbers[e.id]
            return lambda x: np.full_like(x, k)
        return None
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        return _of(np.negative if isinstance(e.op, ast.USub) else np.positive, [e.operand], var, numbers)
    if isinstance(e, ast.BinOp) and type(e.op) in (*_ARITH, *_LOGIC):
        return _of({**_ARITH, **_LOGIC}[type(e.op)], [e.left, e.right], var, numbers)
    if isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in _COMPARE:
        cmp = _COMPARE[type(e.ops[0])]
        return _of(lambda a, b: cmp(a, b).astype(np.float64), [e.left, e.comparators[0]], var, numbers)
    if isinstance(e, ast.Call) and (not e.keywords or call_name(e.func) in ("to", "cast")):
        return _call(e, var, numbers)
    return None


def _of(h: Callable[..., np.ndarray], parts: list[ast.expr], var: str, numbers: dict[str, float]) -> Fn | None:
    """``h`` of `parts`, each a function of `var` (None where one is not)."""
    fs = [function_of(p, var, numbers) for p in parts]
    if any(f is None for f in fs):
        return None
    ready = [f for f in fs if f is not None]
    return lambda x: h(*(f(x) for f in ready))


def _where(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(c != 0, a, b)


def _clamp(a: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(a, lo), hi)


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a * b + c


def _call(e: ast.Call, var: str, numbers: dict[str, float]) -> Fn | None:
    name = call_name(e.func)
    if name in ("to", "cast"):
        if any(k.arg == "bitcast" for k in e.keywords) or (not e.args and not isinstance(e.func, ast.Attribute)):
            return None
        method = isinstance(e.func, ast.Attribute) and len(e.args) < 2
        arg = e.func.value if method and isinstance(e.func, ast.Attribute) else e.args[0]
        kind = ast.unparse(e.args[0] if method and e.args else e.args[-1]) if e.args else ""
        return _of(np.trunc if "int" in kind else np.positive, [arg], var, numbers)
    if isinstance(e.func, ast.Attribute) and not e.args and name in _UNARY:  # x.exp()
        return _of(_UNARY[name], [e.func.value], var, numbers)
    table: dict[int, dict[str, Callable[..., np.ndarray]]] = {
        1: _UNARY, 2: _BINARY, 3: {"fma": _fma, "clamp": _clamp, "where": _where}}
    h = table.get(len(e.args), {}).get(name)
    return None if h is None else _of(h, list(e.args), var, numbers)


def roots(f: Fn, t: float) -> list[float]:
    """Values of x at which `f` reaches `t` or steps across it, the nearest zero first (`MAX_ROOTS`)."""
    with np.errstate(all="ignore"):
        g = f(_GRID) - t
        ok = np.isfinite(g)
        xs, gs = _GRID[ok], g[ok]
        if xs.size < 3:
            return []
        zero = gs == 0.0  # a stretch of exact zeros counts by its ends (not by the grid's)
        edges = zero & ~(np.concatenate([[True], zero[:-1]]) & np.concatenate([zero[1:], [True]]))
        found: list[float] = [float(x) for x in xs[edges]]
        crossed = np.nonzero(np.sign(gs[:-1]) * np.sign(gs[1:]) < 0)[0]
        found += [_bisect(f, t, float(xs[i]), float(xs[i + 1])) for i in _nearest(xs, crossed)]
        a = np.abs(gs)
        # a dip, deeper than rounding makes where f is flat
        dips = np.nonzero((a[1:-1] < a[:-2]) & (a[1:-1] <= a[2:]) & (a[1:-1] > 0)
                          & (a[1:-1] < (1 - 1e-6) * np.maximum(a[:-2], a[2:])))[0] + 1
        for i in _nearest(xs, dips):  # touches t: near it, or far below where the grid's neighbours are
            x = _golden(f, t, float(xs[i - 1]), float(xs[i + 1]))
            low = abs(_value(f, x, t))
            if low <= _TOUCH * (1.0 + abs(t)) or low <= _TOUCH * min(float(a[i - 1]), float(a[i + 1])):
                found.append(x)
    out = sorted({float(np.float32(v)): v for v in found if math.isfinite(v)}.values(), key=abs)
    return out[:MAX_ROOTS]  # one per float32 value


def _nearest(xs: np.ndarray, at: np.ndarray) -> list[int]:
    return [int(i) for i in at[np.argsort(np.abs(xs[at]), kind="stable")][: 4 * MAX_ROOTS]]


def value_at(f: Fn, x: float) -> float:
    """`f` at the one value `x`."""
    return float(f(np.array([x]))[0])


def _value(f: Fn, x: float, t: float) -> float:
    return value_at(f, x) - t


def _bisect(f: Fn, t: float, lo: float, hi: float) -> float:
    """Where ``f - t`` changes sign in [lo, hi] (a root, or a step's edge), to within floating point."""
    glo = _value(f, lo, t)
    for _ in range(_STEPS):
        mid = lo / 2 + hi / 2
        if mid in (lo, hi):
            break
        gm = _value(f, mid, t)
        if gm == 0.0:
            return mid
        if not math.isfinite(gm) or (gm > 0) == (glo > 0):
            lo, glo = mid, gm
        else:
            hi = mid
    return lo if abs(_value(f, lo, t)) <= abs(_value(f, hi, t)) else hi


def _golden(f: Fn, t: float, lo: float, hi: float) -> float:
    """The minimum of ``|f - t|`` in [lo, hi] (one dip)."""
    r = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(_STEPS):
        a, b = hi - r * (hi - lo), lo + r * (hi - lo)
        if not lo < a < b < hi:
            break
        if abs(_value(f, a, t)) <= abs(_value(f, b, t)):
            hi = b
        else:
            lo = a
    return lo / 2 + hi / 2
