"""Every line runs in the check: the points of a candidate's code the check must see run, and the probes
that record which did.

A point is a statement of ``launch``, of a host helper or of a kernel, or one outcome of an ``if`` or
``while`` condition (its body entered, or skipped: the path a kernel takes when the condition is false
has no line of its own when there is no ``else``). The interpreter runs kernels as Python, so a check run
records each point it reaches with a probe call (`instrument` inserts them: `fitness.sandbox.probes` puts
them in the host code at load and in each kernel as the interpreter rewrites it); what no run of the
check reached was never examined, however wrong (a STOKE move turned ``start + tl.arange(0, BLOCK)`` into
``start - tl.arange(0, BLOCK)`` in a branch for rows wider than the check's, and the kernel passed).

Not every point can be reached by some input. Not required: ``pass``; ``raise`` (a kernel that fails
loudly computes nothing wrong) and the outcome that only leads to one; the spinning of a ``while`` whose
body is ``pass`` (a lock that is free when the interpreter, running programs one by one, tries it);
the exit of ``while True``; code of functions ``launch`` never reaches; and the branch a compile-time
constant rules out, which the compiler drops: a condition that depends only on values fixed for the
candidate (its meta-parameters, literals, module constants, and what kernels are passed of them at
every call site: `fitness.check.fixed.fixed_conditions`) has one outcome for every input, and the other is dead code.
A condition on sizes, strides, dtypes or values is not fixed: both of its outcomes must run.

A kernel branches per lane too, without a line of its own: ``tl.where(x == 1.25, 0.0, y)`` and a mask
are an if and an else for each element. So each comparison in a kernel (one operator; not the whole test
of an ``if``/``while``, whose outcomes are the branch's points), each select's condition, each choice of a
clip between floats and comparisons joined by ``&`` or ``|`` (a window) are a pair of
points: true in some lane of some run, and false in some lane. They are required where their statement
ran and the condition tests direct data (`fitness.check.data_flow`: a loaded value or arithmetic of it) or
only indices and sizes, unless it is fixed (`fitness.check.fixed.fixed_code`) or compares with an infinity
or NaN written out (a guard the special values exercise where inputs can reach it). The check places the
values its kernels compare with (`fitness.check.data_values`) and crosses the thresholds of its conditions on
sizes and indices (`fitness.check.crossings`) before it judges these: a lane test no size the check ran
turned (``(row * 40503 + offs * 2654435) & 0xFFFFF == 777``, true for a handful of elements of a large
tensor) leaves the other way unverified; a guard no valid size turns (``0 < n_cols``, ``row < n_rows`` over
a grid of the rows, where every launch passes those a plain size) is not required. One on a sum or another
reduction is often a guard no valid input reaches for some meta-parameters (a split's weight ``l_i > 0``
with one split), and is not required unless it tests the sum for equality with a number other than zero or
holds it between two bounds, which no guard does.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from dataclasses import dataclass

from evo.contracts.syntax import parse_module
from fitness.check.bound_names import bound_once
from fitness.check.data_flow import call_name, data_names, launched, reads
from fitness.check.feeds import argument
from fitness.check.fixed import conditions, fixed_code, is_clip, is_joined, reachable

STMT, TAKEN, NOT_TAKEN = 0, 1, 2
TRUE, FALSE = 3, 4  # a kernel's comparison true in some lane, false in some lane (keyed by its column too)
PROBE = "__evo_probe__"  # a dunder name: the lint forbids candidate code to name it
COMPARED = "__evo_compared__"  # records the outcomes of a kernel's comparison (`fitness.check.probes`)
CLIPPED = "__evo_clipped__"  # and of a clip's choice, where it chose between floats


def key(line: int, kind: int, col: int = 0) -> int:
    """A point's probe key: a statement's or a branch outcome's by line, a comparison's outcome (negative
    keys) by line and column."""
    if kind in (TRUE, FALSE):
        return -(((line << 11) + min(col, 2047)) * 2 + (kind == TRUE)) - 1
    return line * 4 + kind


@dataclass(frozen=True)
class Point:
    """A point of the candidate's code (see the module docstring); `required`: statically, before the
    fixed conditions are known."""

    line: int
    kind: int
    function: str
    required: bool
    col: int = 0  # a comparison's column
    stmt: int = 0  # a comparison's statement's line: its outcomes are required where the statement ran
    text: str = ""  # a comparison's code

    @property
    def key(self) -> int:
        return key(self.line, self.kind, self.col)

    def describe(self, lines: list[str]) -> str:
        text = lines[self.line - 1].strip() if 0 < self.line <= len(lines) else ""
        if self.kind in (TRUE, FALSE):
            return (f"line {self.line} (in {self.function}, the condition `{self.text}` never "
                    f"{'true' if self.kind == TRUE else 'false'} in any lane): {text}")
        outcome = {STMT: "", TAKEN: ", its condition true", NOT_TAKEN: ", its condition false"}[self.kind]
        return f"line {self.line} (in {self.function}{outcome}): {text}"


def _trivial(body: list[ast.stmt]) -> bool:
    """A body that computes nothing a check could find wrong: only ``pass`` and ``raise``."""
    return all(isinstance(s, (ast.Pass, ast.Raise)) for s in body)


def _constant_true(test: ast.expr) -> bool:
    return isinstance(test, ast.Constant) and bool(test.value)


class _Points:
    """Enumerates the points of function bodies (and, with `probe`, inserts a probe before each, and wraps
    each comparison of a kernel in a probe of its outcomes). `kernels`: every function given is a kernel
    (the interpreter's parse of one); else those decorated ``@triton.jit`` are."""

    def __init__(self, probe: bool, kernels: bool = False) -> None:
        self.probe = probe
        self.kernels = kernels
        self.kernel = False
        self.points: list[Point] = []
        self.branches: dict[int, ast.If | ast.While] = {}  # line of a condition -> its statement

    def function(self, fn: ast.FunctionDef) -> None:
        body = fn.body
        doc = body[:1] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str) else []
        self.kernel = self.kernels or is_jit(fn)
        fn.body = doc + self.body(body[len(doc):], fn.name)

    def body(self, stmts: list[ast.stmt], fn: str) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            if not isinstance(s, ast.Pass):
                out += self.point(s, s.lineno, STMT, fn, required=not isinstance(s, ast.Raise))
            if self.kernel and not isinstance(s, ast.Raise):
                self.comparisons(s, fn)
            out.append(s)
            if isinstance(s, (ast.If, ast.While)):
                self.branches[s.lineno] = s
                loop_exit = isinstance(s, ast.While) and _constant_true(s.test)
                taken = self.point(s, s.lineno, TAKEN, fn, required=not _trivial(s.body))
                skipped = self.point(s, s.lineno, NOT_TAKEN, fn,
                                     required=not loop_exit and not (s.orelse and _trivial(s.orelse)))
                s.body = taken + self.body(s.body, fn)
                s.orelse = skipped + self.body(s.orelse, fn)
            elif isinstance(s, (ast.For, ast.AsyncFor)):
                s.body = self.body(s.body, fn)
                s.orelse = self.body(s.orelse, fn)
            elif isinstance(s, ast.FunctionDef):
                self.function(s)
        return out

    def comparisons(self, s: ast.stmt, fn: str) -> None:
        """The outcomes of each one-operator comparison in `s`'s own expressions (not its body's) as points;
        with `probe`, each wrapped in a call that records them and returns the comparison's value."""
        wrap = _Wrap(self, s.lineno, fn)
        if isinstance(s, (ast.If, ast.While)):  # a whole test's outcomes are the branch's points
            whole = isinstance(s.test, ast.Compare) or is_joined(s.test)
            test = wrap.generic_visit(s.test) if whole else wrap.visit(s.test)
            assert isinstance(test, ast.expr)
            s.test = test
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            s.iter = wrap.visit(s.iter)
        elif not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.With, ast.Try)):
            wrap.visit(s)

    def point(self, at: ast.stmt, line: int, kind: int, fn: str, *, required: bool) -> list[ast.stmt]:
        self.points.append(Point(line, kind, fn, required))
        if not self.probe:
            return []
        call = ast.Expr(ast.Call(ast.Name(PROBE, ast.Load()), [ast.Constant(key(line, kind))], []))
        return [ast.copy_location(call, at)]


class _Wrap(ast.NodeTransformer):
    """Records the comparisons of one statement as points of `points` (see `_Points.comparisons`)."""

    def __init__(self, points: _Points, stmt: int, fn: str) -> None:
        self.walker, self.stmt, self.fn = points, stmt, fn
        self.joined = False  # inside a joined condition: ``(a & b) & c`` is one, at the column of all three

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node  # a lambda's body runs elsewhere (a combine function of a reduction)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        if len(node.ops) != 1 or any(_nonfinite(side) for side in (node.left, *node.comparators)):
            return self.generic_visit(node)  # a guard for inf or NaN: the special values' concern
        return self._wrapped(node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        """Comparisons joined by ``&`` or ``|`` are a condition of their own (a window)."""
        if is_joined(node) and not self.joined and not any(_nonfinite(side) for side in (node.left, node.right)):
            return self._wrapped(node)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        """A select's condition (``tl.where(c, a, b)``) is a point too: the element-wise if and else; and so
        is the choice of a clip (``tl.minimum(a, b)``: whether a < b)."""
        if call_name(node.func) == "where" and node.args and not isinstance(node.args[0], ast.Compare) \
                and not _nonfinite(node.args[0]):
            node.args[0] = self._wrapped(node.args[0])  # its comparisons are visited there, once
            node.args[1:] = [self.visit(a) for a in node.args[1:]]
            node.keywords = [self.visit(k) for k in node.keywords]
            return node
        if is_clip(node) and not any(_nonfinite(a) for a in node.args):
            return self._clipped(node)
        return self.generic_visit(node)

    def _clipped(self, node: ast.Call) -> ast.expr:
        """`node` (a clip) with its choice as a point: ``(__evo_clipped__(kt, kf, (l:=a) < (r:=b), l, r),
        tl.minimum(l, r))[1]``, each argument evaluated once. A clip of integers is of indices and lengths
        (``tl.minimum(lo + chunk, n)``, a split's end), the crossings' concern: the probe counts both of
        its outcomes as run."""
        a, b = node.args
        keys = self._outcomes(node, f"{ast.unparse(a)} < {ast.unparse(b)}")
        node = self.generic_visit(node)  # type: ignore[assignment]
        if not self.walker.probe:
            return node
        names = [f"{COMPARED}{len(self.walker.points)}_{i}" for i in range(2)]
        bound = [ast.NamedExpr(ast.Name(n, ast.Store()), arg) for n, arg in zip(names, node.args)]
        read = [ast.Name(n, ast.Load()) for n in names]
        chose = ast.Compare(bound[0], [ast.Lt()], [bound[1]])
        probe = ast.Call(ast.Name(CLIPPED, ast.Load()), [*keys, chose, *read], [])
        clip = ast.Call(node.func, [ast.Name(n, ast.Load()) for n in names], [])
        out = ast.Subscript(ast.Tuple([probe, clip], ast.Load()), ast.Constant(1), ast.Load())
        return ast.fix_missing_locations(ast.copy_location(out, node))

    def _outcomes(self, node: ast.expr, text: str) -> list[ast.expr]:
        """The condition `node` (its code `text`) as two points, true and false; their keys as constants."""
        keys: list[ast.expr] = []
        for kind in (TRUE, FALSE):
            p = Point(node.lineno, kind, self.fn, True, node.col_offset, self.stmt, text)
            self.walker.points.append(p)
            keys.append(ast.Constant(p.key))
        return keys

    def _wrapped(self, node: ast.expr) -> ast.expr:
        """`node` as a probe call: ``__evo_compared__(true_key, false_key, node)``; a comparison's sides are
        bound to names on the way and passed too (the probe records a number a side holds for every lane)."""
        keys = self._outcomes(node, ast.unparse(node))
        outer, self.joined = self.joined, self.joined or is_joined(node)
        node = self.generic_visit(node)  # type: ignore[assignment]
        self.joined = outer
        if not self.walker.probe:
            return node
        sides: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            names = [f"{COMPARED}{len(self.walker.points)}_{i}" for i in range(2)]
            node.left = ast.NamedExpr(ast.Name(names[0], ast.Store()), node.left)
            node.comparators = [ast.NamedExpr(ast.Name(names[1], ast.Store()), node.comparators[0])]
            sides = [ast.Name(n, ast.Load()) for n in names]
        return ast.copy_location(ast.Call(ast.Name(COMPARED, ast.Load()), [*keys, node, *sides], []), node)


def _nonfinite(e: ast.expr) -> bool:
    """`e` is an infinity or NaN written out (``-float("inf")``, ``math.inf``)."""
    for n in ast.walk(e):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.strip().lstrip("+-").lower() in (
                "inf", "infinity", "nan"):
            return True
        if isinstance(n, ast.Attribute) and n.attr in ("inf", "nan"):
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, float) and not math.isfinite(n.value):
            return True
    return False


def is_jit(fn: ast.FunctionDef) -> bool:
    return any(ast.unparse(d.func if isinstance(d, ast.Call) else d).endswith("jit") for d in fn.decorator_list)


def instrument(tree: ast.Module, *, kernel: bool) -> ast.Module:
    """`tree` with a probe before every point of its functions: with `kernel`, of the one kernel the
    interpreter parsed (from its ``def``, decorators cut off); else of the host functions of the
    candidate module (the kernels there are never run: the interpreter parses their source again)."""
    walker = _Points(probe=True, kernels=kernel)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and (kernel or not is_jit(node)):
            walker.function(node)
    return ast.fix_missing_locations(tree)


def points(tree: ast.Module) -> tuple[list[Point], dict[int, ast.If | ast.While]]:
    """Every point of the functions ``launch`` reaches, and the ``if``/``while`` statements by line."""
    walker = _Points(probe=False)
    live = reachable(tree)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in live:
            walker.function(node)
    return walker.points, walker.branches


def unreached(source: str, seen: set[int]) -> list[Point]:
    """The required points of `source` that no check run reached (`seen`: probe keys), less those under
    the outcome of a fixed condition (`fitness.check.fixed.fixed_code`) that was never taken."""
    tree = parse_module(source)
    found, branches = points(tree)
    dead: set[int] = set()
    fixed = fixed_code(tree)
    for line in fixed.conditions:
        node = branches.get(line)
        if node is None:
            continue
        taken, skipped = key(line, TAKEN) in seen, key(line, NOT_TAKEN) in seen
        if taken and not skipped:
            dead |= {key(line, NOT_TAKEN)} | set(_keys(node.orelse))
        elif skipped and not taken:
            dead |= {key(line, TAKEN)} | set(_keys(node.body))
    judged = _judged(tree) - fixed.comparisons
    missing = [p for p in dict((p.key, p) for p in found).values() if p.required and p.key not in seen
               and p.key not in dead and (p.kind not in (TRUE, FALSE) or (key(p.stmt, STMT) in seen
                                                                       and (p.line, p.col) in judged))]
    return sorted(missing, key=lambda p: (p.kind != STMT, p.line, p.kind))  # a line first, then an outcome


def _judged(tree: ast.Module) -> set[tuple[int, int]]:
    """(line, column) of the comparisons and select conditions of kernels that must go both ways: those that
    test direct data (`fitness.check.data_flow`: what an input's value decides) or no data at all (indices and
    sizes: what the sizes the check ran and crossed decide). One on a sum or another reduction (a split's
    weight, a softmax's denominator) is often a guard no valid input reaches, for some meta-parameters, and is
    not required, unless it tests the sum for equality with a number other than zero (`_equal_to_a_number`) or
    holds it in a window (`_window`)."""
    out: set[tuple[int, int]] = set()
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and is_jit(fn)):
            continue
        is_launched = launched(tree, fn.name)
        direct = data_names(fn, is_launched=is_launched, direct=True)
        data = data_names(fn, is_launched=is_launched)
        params = _plain_sizes(tree, fn)
        pids = {n for n, v in bound_once(fn).items() if isinstance(v, ast.Call) and call_name(v.func) == "program_id"}
        for node in ast.walk(fn):
            out |= {(c.lineno, c.col_offset) for c in conditions(node)
                    if reads(c, direct, direct=True) or (not reads(c, data) and not _guard(c, params, pids))
                    or _equal_to_a_number(c, data) or _window(c, data)}
    return out


def _plain_sizes(tree: ast.Module, fn: ast.FunctionDef) -> set[str]:
    """The parameters of kernel `fn` that every launch of it passes a plain size: ``x.shape[0]``, ``x.size(1)``,
    ``x.numel()``, or a name its caller binds once to one (``rows, cols = x.shape``). Not ``rows * 0 + 100000``:
    a constant dressed as a size, which a guard's exemption must not cover."""
    positional = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    plain = set(positional) | {a.arg for a in fn.args.kwonlyargs}
    sites = 0
    for caller in tree.body:
        if not isinstance(caller, ast.FunctionDef) or is_jit(caller):
            continue
        once = bound_once(caller)
        for call in ast.walk(caller):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript) \
                    and isinstance(call.func.value, ast.Name) and call.func.value.id == fn.name:
                sites += 1
                plain = {name for name in plain if _is_size(argument(call, positional, name), once)}
    return plain if sites else set()


def _is_size(e: ast.expr | None, once: dict[str, ast.expr]) -> bool:
    """`e` is a plain size: ``x.shape[i]``, ``x.size(i)``, ``x.numel()``, or a name bound once (`once`) to one."""
    if isinstance(e, ast.Name):
        return e.id in once and _is_size(once[e.id], {})
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
        return True
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("size", "numel") \
        and not e.keywords


def _guard(c: ast.expr, params: set[str], pids: set[str]) -> bool:
    """`c` compares a size parameter (one every launch passes a plain size: `_plain_sizes`) with zero
    (``0 < n_cols``: true for every size) or a program id with a size parameter or zero (``row < n_rows``: true
    for every program of a grid over the rows): a guard no valid input turns."""
    if not (isinstance(c, ast.Compare) and len(c.ops) == 1
            and isinstance(c.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE))):
        return False

    def pid(e: ast.expr) -> bool:
        return (isinstance(e, ast.Name) and e.id in pids) or (
            isinstance(e, ast.Call) and call_name(e.func) == "program_id")

    def param(e: ast.expr) -> bool:
        return isinstance(e, ast.Name) and e.id in params

    def zero(e: ast.expr) -> bool:
        return isinstance(e, ast.Constant) and e.value == 0 and not isinstance(e.value, bool)

    a, b = c.left, c.comparators[0]
    return any((param(x) and zero(y)) or (pid(x) and (param(y) or zero(y))) for x, y in ((a, b), (b, a)))


def _window(c: ast.expr, data: set[str]) -> bool:
    """`c` holds one data value, through a reduction or not, between two bounds that are not data
    (``(s > 2.0) & (s < 2.0000005)``): no guard does; a guard is one bound."""
    if not (isinstance(c, ast.BinOp) and isinstance(c.op, ast.BitAnd)):
        return False
    sides = [_bounded(part, data) for part in (c.left, c.right)]
    return all(sides) and sides[0] == sides[1]


def _bounded(c: ast.expr, data: set[str]) -> str:
    """The data side of ``data < bound`` (or any one-operator inequality) as code, '' where `c` is not one."""
    sides = _against(c, data, (ast.Lt, ast.LtE, ast.Gt, ast.GtE))
    return "" if sides is None or any(_nonfinite(side) for side in sides) else ast.dump(sides[0])


def _equal_to_a_number(c: ast.expr, data: set[str]) -> bool:
    """`c` tests data, through a reduction or not, for equality with something that is not data and not zero
    (``tl.sum(x, axis=0) == 3.0``, ``x0 * x1 == n_cols * 0.5``). A guard tests a sum against zero (an empty
    split, a zero row) or with an inequality; no computation needs a float sum to be exactly another number,
    and a kernel that tests for it is wrong there at no cost elsewhere."""
    sides = _against(c, data, (ast.Eq, ast.NotEq))
    if sides is None:
        return False
    other = sides[1]
    return not (isinstance(other, ast.Constant) and isinstance(other.value, (int, float)) and other.value == 0)


def _against(c: ast.expr, data: set[str], ops: tuple[type, ...]) -> tuple[ast.expr, ast.expr] | None:
    """(data side, other side) of `c`, a one-operator comparison of one of `ops` with data on one side only."""
    if not (isinstance(c, ast.Compare) and len(c.ops) == 1 and isinstance(c.ops[0], ops)):
        return None
    a, b = c.left, c.comparators[0]
    if reads(a, data) == reads(b, data):
        return None
    return (a, b) if reads(a, data) else (b, a)


def _keys(body: list[ast.stmt]) -> Iterator[int]:
    """The keys of every point inside `body` (statements, and both outcomes of nested conditions)."""
    for s in body:
        for node in ast.walk(s):
            if isinstance(node, ast.stmt):
                yield key(node.lineno, STMT)
                if isinstance(node, (ast.If, ast.While)):
                    yield key(node.lineno, TAKEN)
                    yield key(node.lineno, NOT_TAKEN)
