"""The values a kernel's code compares with, read from its ``@triton.jit`` functions: where its path may
turn on an input value that no distribution of the task draws.

A kernel can be wrong only where an input holds one value: ``tl.where(x == 1.0, 0.0, y)``, a window
``(x > 3.25) & (x < 3.5)``, a shortcut taken when a row's maximum is exactly 2.0. The task's draws are
smooth, so no draw holds such a value, and the special distributions (`evo.contracts.special_values`)
hold only zeros, ties, extreme magnitudes and non-finite values. So the check reads every comparison (and
clip) in the candidate's kernels that reads data (`fitness.check.data_flow`) and has a number on one side
(a literal, a meta-parameter, a module constant, a local, what a launch or call site passes, or arithmetic
of them), and solves the other side for the input value that makes the two equal: through ``+ - * /``
with a number, a negation, ``abs``, ``exp``/``exp2``/``log``/``log2``/``sqrt``, casts and bitcasts,
``//``, ``%``, shifts, masks, clips and selects, squares and powers, and else the value itself (a load, a
reduction). The midpoint of two values compared in one condition is added too (a window's inside), and
two data values compared a number apart give that difference (``x == top - 0.7071``). A kernel needs no
comparison to be wrong at one value: ``1e-30 / (x - 3.25)`` and ``tl.exp(-((x - 3.25) * 1e6) ** 2)`` are,
so wherever data and a number are added or subtracted (or fused, ``tl.fma``) the value at which the sum is
zero is solved too (`_zeros`, after the compared ones; past `MAX_VALUES` in all the kernel is refused:
a silent cap would let a kernel hide its one wrong value behind harmless ones). The evaluator
places these values, and their neighbours one step up and down in the task's dtype, into check cases
(`evo.contracts.check_cases.value_cases`, `evo.contracts.special_values`), with the numbers the
kernel's comparisons held for every lane in the check's runs at each size (`fitness.check.probes`: a
threshold made of a size, which no reading of the code gives). A condition on input values that still
went one way in every lane is `unsafe` (`fitness.check.coverage`).
"""

from __future__ import annotations

import ast
import copy
import itertools
import math
from collections.abc import Callable, Iterator

import numpy as np

from evo.contracts.candidate import Candidate
from evo.contracts.special_values import Compared
from evo.contracts.syntax import parse_module
from fitness.check.coverage import is_jit
from fitness.check.data_flow import MEMORY, REDUCTIONS, call_name, data_names, launched, reads
from fitness.check.feeds import argument
from fitness.check.numeric_roots import Fn, function_of, roots, value_at

MAX_VALUES = 96  # values placed per candidate (each brings two neighbours; `check_cases.value_cases` places
# them 24 to a case); a kernel with more is refused rather than checked on some of them
MAX_APART = 24  # differences placed per candidate

_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod)
# one-argument functions inverted: the value of the argument at which the function's result is t
_INVERSES = {
    "exp": lambda t: math.log(t) if t > 0 else None,
    "exp2": lambda t: math.log2(t) if t > 0 else None,
    "log": lambda t: math.exp(t) if t < 700 else None,
    "log2": lambda t: 2.0**t if t < 1000 else None,
    "sqrt": lambda t: t * t if t >= 0 else None,
    "sqrt_rn": lambda t: t * t if t >= 0 else None,
    "rsqrt": lambda t: 1.0 / (t * t) if t > 0 else None,
}
# functions of numbers evaluated where a kernel computes its threshold (``thr = tl.sqrt(2.0)``)
_FORWARD: dict[str, Callable[..., float]] = {
    "exp": math.exp, "exp2": lambda a: 2.0**a, "log": math.log, "log2": math.log2, "sqrt": math.sqrt,
    "rsqrt": lambda a: 1.0 / math.sqrt(a), "abs": abs, "fabs": abs, "floor": math.floor, "ceil": math.ceil,
    "minimum": min, "maximum": max, "min": min, "max": max, "fma": lambda a, b, c: a * b + c,
}
# reductions that are their argument's value at a row's one non-zero element (a sum: zeros add nothing,
# where the argument is zero at zero) or at a constant row (a maximum, a minimum): solved through
_REDUCED = {"sum", "max", "min"}
_SAME = {"to", "cast", "float", "int"}  # calls whose result equals their argument where it matters
_STEPS = (ast.Mod, ast.FloorDiv, ast.RShift, ast.LShift)
_CLIPS = {"minimum", "maximum", "clamp", "min", "max", "fmin", "fmax"}  # calls that turn where arguments meet
_BITS = {8: np.float16, 16: np.float16, 32: np.float32, 64: np.float64}  # a bitcast integer's float, by width


def _numbers(candidate: Candidate, tree: ast.Module) -> dict[str, float]:
    """The numeric meta-parameters and module constants of a candidate, by name."""
    names = {k: float(v) for k, v in candidate.params.items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)}
    for top in tree.body:
        target = top.targets[0] if isinstance(top, ast.Assign) and len(top.targets) == 1 else (
            top.target if isinstance(top, ast.AnnAssign) and top.value is not None else None)
        value = top.value if isinstance(top, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(target, ast.Name) and value is not None:
            v = fold(value, names)
            if v is not None:
                names.setdefault(target.id, v)
    return names


def fold(e: ast.expr, names: dict[str, float]) -> float | None:
    """The value of an expression of numbers and named numbers (None if it has another part)."""
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
        return float(e.value)
    if isinstance(e, ast.Name):
        return names.get(e.id)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        v = fold(e.operand, names)
        return None if v is None else (-v if isinstance(e.op, ast.USub) else v)
    if isinstance(e, ast.Call) and len(e.args) == 1 and not e.keywords and call_name(e.func) in {"constexpr", *_SAME}:
        return fold(e.args[0], names)
    if isinstance(e, ast.Call) and e.args and not e.keywords and call_name(e.func) in _FORWARD:
        args = [fold(a, names) for a in e.args]
        if any(a is None for a in args):
            return None
        try:
            v = float(_FORWARD[call_name(e.func)](*args))
        except (ArithmeticError, ValueError, TypeError):
            return None
        return v if math.isfinite(v) else None
    if isinstance(e, ast.BinOp) and isinstance(e.op, _ARITH):
        a, b = fold(e.left, names), fold(e.right, names)
        if a is None or b is None:
            return None
        try:
            v = _apply(e.op, a, b)
        except (ArithmeticError, ValueError):
            return None
        return v if math.isfinite(v) else None
    return None


def _apply(op: ast.operator, a: float, b: float) -> float:
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.Div):
        return a / b
    if isinstance(op, ast.FloorDiv):
        return float(a // b)
    if isinstance(op, ast.Mod):
        return a % b
    return float(a**b) if abs(b) <= 64 else math.inf


def solve(e: ast.expr, t: float, names: dict[str, float]) -> list[float]:
    """Values of the input `e` reads at which `e` equals `t`: inverted through arithmetic with a number and
    the functions above, else `t` itself (the value of a load, a reduction, a maximum is an input value)."""
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return solve(e.operand, -t, names)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) and ast.dump(e.left) == ast.dump(e.right):
        roots = (t**0.5, -(t**0.5)) if t > 0 else (0.0,) if t == 0 else ()
        return [v for r in roots for v in solve(e.left, r, names)]
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Pow) and (k := fold(e.right, names)) and t > 0:
        return [v for r in (t ** (1 / k), -(t ** (1 / k))) for v in solve(e.left, r, names)]
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left, right = fold(e.left, names), fold(e.right, names)
        if (left is None) == (right is None):
            return [t]
        k, other, on_left = (right, e.left, True) if right is not None else (left, e.right, False)
        assert k is not None
        inner = _invert(e.op, k, t, number_on_right=on_left)
        return [] if inner is None or not math.isfinite(inner) else solve(other, inner, names)
    if isinstance(e, ast.BinOp) and isinstance(e.op, _STEPS) and (k := fold(e.right, names)) is not None and k:
        return [v for v in _steps(e.op, k, t) for v in solve(e.left, v, names)]
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr)):  # a mask keeps what it compares
        return [*solve(e.left, t, names), *solve(e.right, t, names)] if fold(e.left, names) is None else solve(
            e.right, t, names)
    if isinstance(e, ast.Call):
        name = call_name(e.func)
        method = isinstance(e.func, ast.Attribute) and name in ("to", "cast", "abs", *_INVERSES) and (
            len(e.args) < 2 if name in ("to", "cast") else not e.args)
        if name in _REDUCED and e.args and not isinstance(e.func, ast.Name):  # tl.sum(x * 2.0, axis=0) == 3.0
            return list(dict.fromkeys([*solve(e.args[0], t, names), t]))
        if name in _CLIPS or name == "where":  # a clip is its argument between the bounds; a select, a branch
            free = e.args[1:] if name == "where" else e.args
            return [v for a in free if fold(a, names) is None for v in solve(a, t, names)] or [t]
        if isinstance(e.func, ast.Attribute) and method:  # x.to(tl.int32), x.exp(): the value is the object
            arg = e.func.value
        elif e.args:
            arg = e.args[0]
        else:
            return [t]
        if name in ("abs", "fabs"):
            return [*solve(arg, t, names), *solve(arg, -t, names)] if t > 0 else solve(arg, 0.0, names)
        if name in ("to", "cast") and any(k.arg == "bitcast" and _true(k.value, names) for k in e.keywords):
            v = _from_bits(t, ast.unparse(e.args[0] if method else e.args[-1]))
            return [] if v is None else solve(arg, v, names)
        if name in _SAME:  # to an integer: the middle of the values that truncate to t too
            middle = ("int" in ast.unparse(e.args[0] if method else e.args[-1]) if name in ("to", "cast")
                      else name == "int") and e.args
            return [*solve(arg, t, names), *(solve(arg, t + math.copysign(0.5, t), names) if middle else [])]
        if name in _INVERSES:
            inner = _INVERSES[name](t)
            return [] if inner is None or not math.isfinite(inner) else solve(arg, inner, names)
    return [t]


def _true(e: ast.expr, names: dict[str, float]) -> bool:
    return (isinstance(e, ast.Constant) and bool(e.value)) or bool(fold(e, names))


def _steps(op: ast.operator, k: float, t: float) -> list[float]:
    """Values of x at which ``x op k`` (a step: ``//``, ``%``, ``>>``, ``<<``) is `t`: its first, and the middle
    of the stretch that gives `t` too."""
    if isinstance(op, ast.Mod):
        return [t, t + k / 2]
    if isinstance(op, ast.FloorDiv):
        return [t * k, t * k + k / 2]
    width = 2.0 ** k if abs(k) <= 64 else 0.0
    if isinstance(op, ast.RShift):
        return [t * width, t * width + width / 2] if width else []
    return [t / width] if width else []


def _from_bits(t: float, dtype: str) -> float | None:
    """The float whose bits are the integer `t`, in the width `dtype` (written as code) names."""
    width = next((w for w in (64, 32, 16, 8) if str(w) in dtype), 32)
    kind = _BITS[width]
    if not float(t).is_integer():
        return None
    bits = int(t) % (1 << (8 * np.dtype(kind).itemsize))
    value = float(np.array([bits], dtype=f"u{np.dtype(kind).itemsize}").view(kind)[0])
    return value if math.isfinite(value) else None


def _invert(op: ast.operator, k: float, t: float, *, number_on_right: bool) -> float | None:
    """The other operand of ``x op k`` (or ``k op x``) that gives `t`."""
    if isinstance(op, ast.Add):
        return t - k
    if isinstance(op, ast.Sub):
        return t + k if number_on_right else k - t
    if isinstance(op, ast.Mult):
        return t / k if k else None
    if number_on_right:  # x / k
        return t * k
    return k / t if t else None  # k / x


def _conditions(fn: ast.FunctionDef) -> Iterator[ast.expr]:
    """The outermost expressions holding a comparison in `fn`: a whole condition (``a & b``) at a time."""
    inside: set[int] = set()
    for node in ast.walk(fn):
        if id(node) in inside or not isinstance(node, ast.expr):
            continue
        if any(_turns(n) for n in ast.walk(node)) and not isinstance(node, (ast.Call, ast.Compare)):
            if isinstance(node, (ast.BoolOp, ast.BinOp, ast.UnaryOp)):
                inside.update(id(n) for n in ast.walk(node))
                yield node
                continue
        if _turns(node):
            inside.update(id(n) for n in ast.walk(node))
            yield node


def _turns(node: ast.AST) -> bool:
    return isinstance(node, ast.Compare) or (isinstance(node, ast.Call) and call_name(node.func) in _CLIPS)


def _bound_once(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    """The names `fn` binds once, by a plain assignment, to the expression each is bound to (in code order)."""
    counts: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    return {target.id: node.value for node in ast.walk(fn) if isinstance(node, ast.Assign)
            and len(node.targets) == 1 and isinstance(target := node.targets[0], ast.Name) and counts[target.id] == 1}


def _locals(fn: ast.FunctionDef, names: dict[str, float]) -> dict[str, float]:
    """`names` and the numbers `fn` binds once to a name (``thr = 3.0 / 4.0``)."""
    out = dict(names)
    for name, value in _bound_once(fn).items():
        v = fold(value, out)
        if v is not None:
            out[name] = v
    return out


def _bindings(tree: ast.Module, fn: ast.FunctionDef, names: dict[str, float]) -> list[dict[str, float]]:
    """The numbers `fn`'s parameters hold, one map per call or launch site in the module that passes a
    number to some parameter (and `names` alone): ``_k[grid](x, y, THRESH=1.5)`` binds THRESH."""
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    every = [*params, *(a.arg for a in fn.args.kwonlyargs)]
    out = [names]
    for caller in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        scope = _locals(caller, names)
        for call in (n for n in ast.walk(caller) if isinstance(n, ast.Call)):
            f = call.func.value if isinstance(call.func, ast.Subscript) else call.func
            if not (isinstance(f, ast.Name) and f.id == fn.name):
                continue
            bound = {p: v for p in every if (a := argument(call, params, p)) is not None
                     and (v := fold(a, scope)) is not None}
            if bound:
                out.append({**names, **bound})
    return out


def _pairs(condition: ast.expr) -> Iterator[tuple[ast.expr, ast.expr]]:
    """The pairs of expressions `condition` sets against each other: the sides of each comparison, and a
    clip's argument against each bound (``tl.minimum(tl.maximum((x - 3.0) * 1e6, 0.0), 1.0)`` turns from
    0 to 1 between two values, without a comparison)."""
    for node in ast.walk(condition):
        if isinstance(node, ast.Compare):
            yield from itertools.pairwise([node.left, *node.comparators])
        elif isinstance(node, ast.Call) and call_name(node.func) in _CLIPS:
            args = [*node.args, *(k.value for k in node.keywords if k.arg in ("min", "max", "other"))]
            yield from ((a, b) for a in args for b in args if a is not b)


def _zeros(fn: ast.FunctionDef, data: set[str], names: dict[str, float]) -> Iterator[tuple[ast.expr, float]]:
    """(data, number) where data plus or minus a number is zero, compared or not: ``1e-30 / (x - 3.25)`` and
    ``tl.exp(-((x - 3.25) * 1e6) ** 2)`` are wrong only at 3.25 without a comparison, as is ``tl.fma(x,
    4.0, -13.0)`` as a divisor: each is ``x == 3.25`` (``x * 4.0 == 13.0``) in disguise."""
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            left, right, subtract = node.left, node.right, isinstance(node.op, ast.Sub)
        elif isinstance(node, ast.Call) and call_name(node.func) == "fma" and len(node.args) == 3:
            left, right, subtract = ast.BinOp(node.args[0], ast.Mult(), node.args[1]), node.args[2], False
        else:
            continue
        a, b = fold(left, names), fold(right, names)
        if a is None and b is not None and reads(left, data):
            yield left, b if subtract else -b
        elif b is None and a is not None and reads(right, data):
            yield right, a if subtract else -a


def _solved(e: ast.expr, t: float, names: dict[str, float], scope: _Scope | None = None) -> list[float]:
    """`solve`, and where what it gives does not make `e` equal `t` (it fell back on the value itself, or
    inverted only one of several roots), the values `fitness.check.numeric_roots` finds for `e` as a function
    of the one data value it reads (through the names `scope` binds once)."""
    try:
        found = solve(e, t, names)
    except (ArithmeticError, ValueError):  # a power or a reciprocal out of range
        found = []
    f = None if scope is None else scope.function(e, names)
    if f is None:
        return found
    try:
        with np.errstate(all="ignore"):
            exact = bool(found) and all(abs(value_at(f, v) - t) <= 1e-6 * (1.0 + abs(t)) for v in found)
            return found if exact else [*found, *(v for v in roots(f, t) if v not in found)]
    except (ArithmeticError, ValueError, TypeError):  # what numpy refuses to evaluate: the solved values only
        return found


class _Scope:
    """A kernel's data names and the expressions its names are bound to once (``q = x * x - 6.5 * x``),
    read through down to a load or a reduction: what an expression is a function of."""

    def __init__(self, fn: ast.FunctionDef, data: set[str]) -> None:
        self.data = data
        self.bound = {name: value for name, value in _bound_once(fn).items() if not _source(value)}

    def function(self, e: ast.expr, names: dict[str, float]) -> Fn | None:
        whole = self._inlined(e, 8)
        free = {n.id for n in ast.walk(whole) if isinstance(n, ast.Name) and n.id in self.data and n.id not in names}
        if len(free) != 1 or _source(whole):
            return None
        return function_of(whole, free.pop(), names)

    def _inlined(self, e: ast.expr, depth: int) -> ast.expr:
        if depth == 0:
            return e
        scope = self

        class _Inline(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.expr:
                value = scope.bound.get(node.id)
                return node if value is None or node.id not in scope.data else scope._inlined(value, depth - 1)

        return _Inline().visit(copy.deepcopy(e))


def _source(e: ast.expr) -> bool:
    """`e` reads memory or reduces: a value of its own, not a function of another data value."""
    return any(isinstance(n, ast.Call) and call_name(n.func) in MEMORY | REDUCTIONS for n in ast.walk(e))


def _difference(e: ast.expr, names: dict[str, float]) -> bool:
    """`e` is one value less another, neither a number."""
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and fold(e.left, names) is None \
        and fold(e.right, names) is None


def _offset(e: ast.expr, names: dict[str, float]) -> tuple[ast.expr, float]:
    """`e` as an expression plus a number (``m - 1.0`` is ``m`` and -1.0); the number is 0 where it has none."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        k = fold(e.right, names)
        if k is not None:
            return e.left, k if isinstance(e.op, ast.Add) else -k
        k = fold(e.left, names)
        if k is not None and isinstance(e.op, ast.Add):
            return e.right, k
    return e, 0.0


def compared_values(candidate: Candidate) -> Compared:
    """The input values at which a comparison (or a clip) in the candidate's kernels turns, and the
    differences it compares two input values at (see the module docstring): the first `MAX_VALUES` (and
    `MAX_APART`) in the order the code writes them, finite ones only, and how many more were found."""
    tree = parse_module(candidate.source)
    module = _numbers(candidate, tree)
    out: list[float] = []
    zeros: list[float] = []
    apart: list[float] = []
    for fn in ast.walk(tree):
        if not (isinstance(fn, ast.FunctionDef) and is_jit(fn)):
            continue
        data = data_names(fn, is_launched=launched(tree, fn.name))
        scope = _Scope(fn, data)
        for bound in _bindings(tree, fn, module):
            names = _locals(fn, bound)
            for condition in _conditions(fn):
                found: list[float] = []
                for a, b in _pairs(condition):
                    if not (reads(a, data) or reads(b, data)):
                        continue  # indices and sizes: the crossings' concern (`fitness.check.crossings`)
                    ka, kb = fold(a, names), fold(b, names)
                    if ka is None and kb is not None:
                        found.extend(_solved(a, kb, names, scope))
                        if _difference(a, names):
                            apart.append(kb)  # two values kb apart: ``nxt - x == 0.5``
                    elif ka is None and kb is None:
                        (a0, da), (b0, db) = _offset(a, names), _offset(b, names)
                        if da != db and ast.dump(a0) != ast.dump(b0):
                            apart.append(db - da)
                found = [v for v in found if math.isfinite(v)]
                ordered = sorted(set(found))
                out.extend(found + [m for lo, hi in itertools.pairwise(ordered) if math.isfinite(m := lo / 2 + hi / 2)])
            for side, t in _zeros(fn, data, names):
                zeros.extend(v for v in _solved(side, t, names, scope) if math.isfinite(v))
                if _difference(side, names):
                    apart.append(t)  # ``x - nxt - 0.5``: two values 0.5 apart
    found = list(dict.fromkeys([*out, *zeros]))  # what comparisons give first
    differences = list(dict.fromkeys(d for d in apart if math.isfinite(d)))
    unplaced = max(0, len(found) - MAX_VALUES) + max(0, len(differences) - MAX_APART)
    return Compared(tuple(found[:MAX_VALUES]), tuple(differences[:MAX_APART]), unplaced)
