"""Sizes past the thresholds a kernel compares with, tried even when every line ran.

A path can split without a line of its own: ``tl.where(n_cols > 8192, a, b)``, ``scale = 1.0 - 0.5 *
(n > LIMIT)``, a mask on a size. Where the code compares a value with a threshold fixed for the candidate
(an integer expression of literals, meta-parameters and module constants: `fitness.check.thresholds`),
the values of the other side at which the outcome changes are solved for where it is arithmetic of one
unknown (`fitness.check.change_points`: ``n_cols // 100 > 21`` turns at 2200), else taken one past the
threshold. Where no check size of some free dimension reaches such a value, the check also runs a small
check size with that dimension at it (one more for an index: rows 201 hold row 200; at most
`MAX_CROSSINGS` sizes, cheapest first), checked like a check size. A wrong result there is the verdict,
at a size the check chose.

A value can turn without a comparison: ``bad = min(rows // 5000, 1)``, ``rows - min(rows, 5000)``. Every
step, remainder, shift, mask, ``min``/``max``, clip, cast and ``where`` on one unknown is evaluated over
the unknown's values, and a size is tried where it first leaves the law it follows up to the largest check
size (`fitness.check.change_points.first_break`). Conditions and values are read through the names their
function binds once, and in a kernel once more per launch site, with each parameter replaced by what the
site passes (``half // 3000`` with ``rows // 2`` for ``half`` turns at 6000 rows).

A condition in a loop's body on the loop's target or a counter it steps (``start >= 3 * BLOCK``, ``it > 3``)
turns with the loop's iterations: the size at which the loop's end passes the first iteration that turns it is
tried (`fitness.check.loops`). Conditions on several sizes that must hold together (a joined condition, a
select nested in another's branch, a comparison under an ``if``) are tried where they all hold
(`fitness.check.joint`).

Which dimensions can change a condition's value is followed through the code (`fitness.check.feeds`): a
softmax's ``if triton.next_power_of_2(cols) <= MAX_BLOCK`` is crossed at cols 8193 and not also at rows
8193 (8193 programs in the interpreter), since no row count changes it. Where the code does not say (a
value loaded from memory, a container, a helper's result), every free dimension is moved in turn.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import itertools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from evo.contracts.candidate import Candidate
from evo.contracts.syntax import parse_expression, parse_module
from evo.contracts.task import Size, Task, size_key
from fitness.check.bound_names import bound_once, inline, replace_names
from fitness.check.change_points import DOMAIN, change_points, first_break, is_condition, outcomes, values
from fitness.check.feeds import GRID_CALLS, SHAPE_METHODS, Feeds, argument
from fitness.check.fixed import reachable
from fitness.check.joint import Joint, Part, conjunctions
from fitness.check.loops import Loop, enclosing_loops, end_size, turning_ends
from fitness.check.thresholds import LARGEST_THRESHOLD, MAX_ELEMENTS, base_size, constants, cost, value

MAX_CROSSINGS = 8  # sizes tried per candidate; a kernel whose code turns at more is not verified


@dataclasses.dataclass(frozen=True)
class Split:
    """A condition's outcomes over its unknown's values (`fitness.check.change_points`), or only the value
    one past a threshold (`outcome` None) where its arithmetic could not be followed."""

    line: int
    index: bool  # the unknown is built from a program id or an arange: a size of n holds 0 .. n - 1
    outcome: np.ndarray | None = None
    past: int = 0
    dims: frozenset[str] | None = None  # the dimensions that can change it (`fitness.check.feeds`); None: any
    turn: ast.expr | None = None  # a value that may turn without a comparison (``min(n // 5000, 1)``)
    valued: bool = False  # a value's split (`turn`, or one past the fixed side of a step, clip or mask)
    one: bool = False  # one past a fixed side, of a comparison or value solved for one unknown elsewhere
    names: dict[str, int] = dataclasses.field(default_factory=dict)  # the fixed names `turn` reads

    @property
    def exact(self) -> bool:
        """Whether the value it turns at is a value of the dimension moved, not of a sum or product of them."""
        return self.outcome is not None or self.turn is not None or self.one

    @functools.cached_property
    def points(self) -> np.ndarray:
        """Where the outcome turns (`change_points`), found once for every dimension asked about."""
        return change_points(self.outcome) if self.outcome is not None else np.array([], dtype=np.int64)

    def first_unseen(self, seen_sizes: list[int]) -> int | None:
        """The first value at which the outcome differs from every outcome the sizes `seen_sizes` of the
        unknown's dimension gave (None when none does): the value a size must take or hold. For a value
        (`turn`), the first value past the sizes seen at which it leaves the law it followed up to them."""
        if self.turn is not None:
            largest = max(seen_sizes, default=0)
            found = values(self.turn, self.names)  # made again when asked: 16 MB a value, not kept
            point = None if found is None else first_break(found[0], largest - 1 if self.index else largest)
            return point if point is not None and 2 <= point <= LARGEST_THRESHOLD + 1 else None
        if self.outcome is None:
            return self.past if max(seen_sizes, default=0) < self.past else None
        if self.index:
            largest = max(seen_sizes, default=0)
            seen = set(np.unique(self.outcome[:min(largest, DOMAIN)]).tolist())
        else:
            seen = {bool(self.outcome[v]) for v in seen_sizes if 0 <= v < DOMAIN}
        if len(seen) == 2:  # both outcomes seen: none is new (and a periodic condition turns a million times)
            return None
        for point in self.points:
            if bool(self.outcome[point]) not in seen and 2 <= point <= LARGEST_THRESHOLD + 1:
                return int(point)
        return None


def compared(candidate: Candidate, feeds: Feeds | None = None) -> list[Split]:
    """Every condition in the code ``launch`` reaches on a value not fixed for the candidate (each comparison
    and each boolean combination of them), and every value that can turn without one (a step, a clip, a
    cast, ...): solved for the one unknown where the arithmetic allows, else one past the fixed side; with
    `feeds`, each with the dimensions that can change it. Values and conditions of loaded data are left to
    the special-value checks."""
    tree = parse_module(candidate.source) if feeds is None else feeds.tree
    names = constants(candidate, tree)
    live = reachable(tree)
    functions = {fn.name: fn for fn in tree.body if isinstance(fn, ast.FunctionDef)}
    once = {name: bound_once(fn) for name, fn in functions.items()}
    assigned = {name: _assignments(fn) for name, fn in functions.items()}
    out: list[Split] = []
    for fn in functions.values():
        if fn.name not in live:
            continue
        loops = enclosing_loops(fn)
        for node in ast.walk(fn):
            if not isinstance(node, ast.expr):
                continue
            condition = is_condition(node)
            if not condition and not _turns(node):
                continue
            if condition and loops.get(id(node)):
                out += _loop_splits(node, fn, loops[id(node)], once, feeds, names)
            dims = feeds.of(fn.name, node) if feeds is not None else None
            if not condition and dims is not None and not dims:
                continue  # a value no size changes (a condition is kept: the tests read which it is)
            texts: set[str] = set()
            solved_any = data = False
            for form, scope in _forms(node, fn, once, feeds):
                text = ast.unparse(form)
                if text in texts:
                    continue
                texts.add(text)
                if not condition:
                    found = values(form, names, first=64)  # whether it is one unknown's: the law is found later
                    if found is not None and _data(found[1], assigned[scope]):
                        solved_any = data = True  # a value of loaded data (``acc.to(tl.float16)``), not of sizes
                    elif found is not None:
                        solved_any = True
                        out.append(Split(node.lineno, _is_index(found[1], assigned[scope]), dims=dims, turn=form,
                                         names=names, valued=True))
                        out.extend(Split(node.lineno, False, past=t + 1, dims=dims, valued=True)
                                   for t in _opaque_thresholds(found[1], names, functions))
                    continue
                solved = outcomes(form, names)
                if solved is not None:
                    solved_any = True
                    truth, unknown = solved
                    data = data or _data(unknown, assigned[scope])
                    out.append(Split(node.lineno, _is_index(unknown, assigned[scope]), truth, dims=dims))
                    out.extend(Split(node.lineno, False, past=t + 1, dims=dims)
                               for t in _opaque_thresholds(unknown, names, functions))
            # where no form was solved (more than one unknown: ``min((rows + cols) // 9000, 1)``), or past the values
            # a solved one is evaluated at (``rows > 3000000``), one past the fixed side
            fixed = _fixed_turns(node, names) if not condition else _compared_with(node, names) if isinstance(
                node, ast.Compare) else []
            out.extend(Split(node.lineno, False, past=t, dims=dims, valued=not condition, one=solved_any)
                       for t in fixed if not solved_any or (t >= DOMAIN - 1 and not data))
    return out


def _loop_splits(node: ast.expr, fn: ast.FunctionDef, loops: list[Loop], once: dict[str, dict[str, ast.expr]],
                 feeds: Feeds | None, names: dict[str, int]) -> list[Split]:
    """A condition in a loop's body on the loop's target or a counter it steps (`fitness.check.loops`): the
    size at which the loop runs the first iteration that turns it, along the dimensions that feed the loop's
    end. Values fixed for the candidate are read through names bound once and through call sites (a kernel's
    ``BLOCK`` is what its launch passes)."""

    def fixed(e: ast.expr) -> int | None:
        for form, _ in reversed(_forms(e, fn, once, feeds)):
            v = value(form, names)
            if v is not None:
                return v
        return None

    out: list[Split] = []
    local = inline(node, once[fn.name])
    for loop in loops:
        for past in turning_ends(local, loop, fixed, names):
            dims = feeds.of(fn.name, loop.end) if feeds is not None else None
            for form, _ in reversed(_forms(loop.end, fn, once, feeds)):
                size = end_size(form, names, past)
                if size is not None:
                    out.append(Split(node.lineno, False, past=size, dims=dims, one=True))
                    break
    return out


def _compared_with(node: ast.Compare, names: dict[str, int]) -> list[int]:
    """Where each of a comparison's pairs of one fixed side t (1 .. `LARGEST_THRESHOLD`) and one other side
    turns as the other side grows: ``n > t`` and ``n <= t`` at t + 1, ``n >= t``, ``n < t``, ``n == t`` and
    ``n != t`` at t (a product of sizes compared ``>= 4096 * 4096`` is reached by the bench size 4096 x 4096)."""
    out = []
    for (a, b), op in zip(itertools.pairwise([node.left, *node.comparators]), node.ops, strict=True):
        va, vb = value(a, names), value(b, names)
        t = va if vb is None else vb
        if (va is None) != (vb is None) and t is not None and 1 <= t <= LARGEST_THRESHOLD:
            after = isinstance(op, (ast.Gt, ast.LtE)) if vb is not None else isinstance(op, (ast.Lt, ast.GtE))
            out.append(t + 1 if after else t)
    return out


# an unknown read through one of these is a size (or an index) itself; `to` converts, it measures nothing
_SIZE_CALLS = (SHAPE_METHODS - {"to"}) | GRID_CALLS | {"arange"}


def _opaque_thresholds(unknown: str, names: dict[str, int], functions: dict[str, ast.FunctionDef]) -> list[int]:
    """Where the unknown a form was solved for is not a size itself but a call this cannot evaluate over a
    size (``libdevice.double2int_rd(rows / 5000.0)``, a helper's result), the crossings take it for the size
    and may miss where it turns: the integer values written inside it, and inside the bodies of the module's
    functions it calls (literals and fixed names), are crossed one past, as thresholds of their own."""
    tree = parse_expression(unknown)
    if isinstance(tree, ast.Name) or (isinstance(tree, ast.Subscript) and isinstance(tree.value, ast.Attribute)
                                      and tree.value.attr == "shape") or (
            isinstance(tree, ast.Call) and ast.unparse(tree.func).rsplit(".", 1)[-1] in _SIZE_CALLS):
        return []
    out = set()
    called = [functions[n.func.id] for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in functions]
    for n in itertools.chain(ast.walk(tree), *(ast.walk(f) for f in called)):
        v = n.value if isinstance(n, ast.Constant) else names.get(n.id) if isinstance(n, ast.Name) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() \
                and 2 <= v <= LARGEST_THRESHOLD:
            out.add(int(v))
    return sorted(out)


def _fixed_turns(node: ast.expr, names: dict[str, int]) -> list[int]:
    """Where a turning operation whose other side is not followed turns, read from its fixed side: a step or
    remainder by ``t`` at ``t``, a shift by ``k`` at ``2**k``, a mask at its lowest bit, a clip at ``t`` one
    past it; moving one dimension there moves a sum or a product of sizes past it too."""
    out: list[int] = []
    if isinstance(node, ast.BinOp):
        t = value(node.right, names)
        if t is None or t < 1:
            t = value(node.left, names) if isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)) else None
        if t is not None and t >= 1:
            out.append(1 << t if isinstance(node.op, ast.RShift) and t <= 40 else
                       t & -t if isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)) else t)
    elif isinstance(node, ast.Call):
        fixed = [v for v in (value(a, names) for a in node.args) if v is not None and v >= 1]
        out.extend(t + 1 for t in fixed)
    return [t for t in out if 2 <= t <= LARGEST_THRESHOLD]


def _forms(node: ast.expr, fn: ast.FunctionDef, once: dict[str, dict[str, ast.expr]],
           feeds: Feeds | None) -> list[tuple[ast.expr, str]]:
    """`node` read through the names its function binds once; and, in a function called or launched from
    others (a kernel), once more for each call site with each parameter it reads replaced by the value the
    site passes (read through the caller's names bound once): a kernel's ``tl.minimum(half // 3000, 1)``
    launched with ``rows // 2`` for ``half`` turns at 6000 rows, not 3000. Each with the function whose
    names it is written in."""
    local = inline(node, once[fn.name])
    out = [(local, fn.name)]
    sites = feeds.sites.get(fn.name) if feeds is not None else None
    if not sites or fn.args.vararg or fn.args.kwarg or fn.args.posonlyargs:
        return out
    params = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]}
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    names = {n.id for n in ast.walk(local) if isinstance(n, ast.Name)}
    read = names & (params - stored)
    if not read or names & stored:  # none to replace, or it still reads the function's own names: not mixed
        return out
    positional = [a.arg for a in fn.args.args]
    for caller, call, _ in sites:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            continue
        given = {name: argument(call, positional, name) for name in read}
        if all(v is not None for v in given.values()):
            out.append((replace_names(local, {k: inline(v, once[caller]) for k, v in given.items() if v is not None}),
                        caller))
    return out


# operations through which a value can turn without a comparison: a step, a remainder, a clip, a cast
_TURNING_OPS = (ast.FloorDiv, ast.Mod, ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor)
_TURNING_CALLS = {"min", "max", "minimum", "maximum", "abs", "fabs", "floor", "ceil", "trunc", "int", "clamp",
                  "where", "to", "cdiv", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos",
                  "pow", "round", "isqrt", "gcd", "lcm", "fmod", "log10", "log1p", "expm1", "tan", "atan", "erf",
                  "erfc"}


def _turns(node: ast.expr) -> bool:
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _TURNING_OPS)
    if isinstance(node, ast.Subscript):  # ``divmod(rows, 5000)[0]``
        return isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "divmod"
    return isinstance(node, ast.Call) and ast.unparse(node.func).rsplit(".", 1)[-1] in _TURNING_CALLS


# calls whose result is data, not a size: a value read through them turns with the data (the special value
# distributions' concern), not with a size
_DATA_CALLS = {"load", "dot", "dot_scaled", "sum", "max", "min", "reduce", "cumsum", "cumprod", "argmax", "argmin",
               "xor_sum", "sort", "rand", "randn", "randint", "zeros", "full", "zeros_like", "full_like", "reshape",
               "view", "trans", "permute", "broadcast_to", "expand_dims", "join", "split", "gather", "histogram",
               "atomic_add", "atomic_max", "atomic_min", "atomic_cas", "atomic_xchg", "atomic_and", "atomic_or",
               "atomic_xor", "load_tensor_descriptor", "item"}


def _data(unknown: str, assigned: dict[str, list[str]]) -> bool:
    """Whether the unknown `unknown` (a text) is read from data: a load, a dot, a reduction, a tensor made in
    the kernel, following local assignments (`assigned`). A length kept in memory (MLA decode's cache lengths)
    is data too: how it relates to a dimension is the task's choice of inputs, not the code's."""
    return _built_from(unknown, assigned, lambda _, tree: any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _DATA_CALLS
        for n in ast.walk(tree)))


def _assignments(fn: ast.FunctionDef) -> dict[str, list[str]]:
    """The text of every value assigned to each local name of `fn`."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for name in ast.walk(t):
                    if isinstance(name, ast.Name):
                        out.setdefault(name.id, []).append(ast.unparse(node.value))
    return out


def _is_index(text: str, assigned: dict[str, list[str]]) -> bool:
    """Whether `text` is built from a program id or an ``arange`` (an index, which a size must exceed to
    take: rows 201 hold row 200), following local assignments."""
    return _built_from(text, assigned, lambda t, _: "program_id" in t or "arange" in t)


def _built_from(text: str, assigned: dict[str, list[str]], found: Callable[[str, ast.AST], bool],
                seen: frozenset[str] = frozenset()) -> bool:
    """Whether `found` holds of `text` (its text, its tree) or of a value assigned to a local name it reads
    (`assigned`), and so on through those values' names."""
    tree = parse_expression(text)
    if found(text, tree):
        return True
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - seen
    return any(_built_from(v, assigned, found, seen | names) for n in names for v in assigned.get(n, []))


class Crossing(NamedTuple):
    """A size to try: a free dimension moved to `change` (or past it, for an index) for the condition or the
    value (`turn`) on `line`."""

    size: Size
    change: int
    line: int
    turn: bool
    joint: bool = False  # a size at which conditions hold together (`fitness.check.joint`)

    def why(self, lines: list[str]) -> str:
        if self.joint:
            return f"which the check chose {self.where(lines)}"
        return f"which the check chose to reach {self.change}, {self.where(lines)}"

    def where(self, lines: list[str]) -> str:
        text = lines[self.line - 1].strip() if 0 < self.line <= len(lines) else ""
        if self.joint:
            return (f"where the condition on line {self.line} ({text}) and the conditions its path sits under "
                    "hold together, as at no check size")
        if self.turn:
            return f"where the value on line {self.line} ({text}) turns, unlike at every check size"
        return f"where the condition on line {self.line} ({text}) takes an outcome no check size gave it"


@dataclasses.dataclass
class Crossings:
    """The sizes to try (`sizes`, cheapest first, at most `MAX_CROSSINGS`), how many more the code needs
    (`more`), and those no run of the check reaches (`beyond`: past the elements the check affords and every
    bench size): a kernel with either is not verified (`fitness.check.reach`)."""

    sizes: list[Crossing]
    more: int
    beyond: list[Crossing]


def crossing_sizes(task: Task, candidate: Candidate) -> Crossings:
    """Sizes to try: a free dimension of the small check size that can change a condition or a value
    (`fitness.check.feeds`) moved to the first value at which the condition takes an outcome no check size of
    that dimension gave it, or the value leaves its law (holding that value, for an index). Where that size is
    more than the check affords, the other dimensions are taken from the smallest check size instead."""
    base, free = base_size(task)
    smallest = min(task.check_sizes, key=cost)
    known = {size_key(s) for s in task.check_sizes}
    found: dict[str, Crossing] = {}
    beyond: dict[str, Crossing] = {}
    feeds = Feeds(task, candidate, parse_module(candidate.source), base, free)
    for split in compared(candidate, feeds):
        for dim in free if split.dims is None else [d for d in free if d in split.dims]:
            change = split.first_unseen([int(s[dim]) for s in task.check_sizes if dim in s])
            if change is None:
                continue
            at = change + 1 if split.index else change
            size = {**base, dim: at}
            if cost(size) > MAX_ELEMENTS:
                size = {**smallest, dim: at}
            key = size_key(size)
            crossing = Crossing(size, change, split.line, split.valued)
            if key in known or key in found or key in beyond:
                continue
            if cost(size) <= MAX_ELEMENTS:
                found[key] = crossing
            elif not any(int(b.get(dim, 0)) >= at or (not split.exact and cost(b) >= at) for b in task.bench_sizes):
                beyond[key] = crossing
    for crossing in joint_crossings(task, candidate, feeds):
        key = size_key(crossing.size)
        if key in known or key in found or key in beyond:
            continue
        if cost(crossing.size) <= MAX_ELEMENTS:
            found[key] = crossing
        else:
            beyond[key] = crossing
    ranked = sorted(found.values(), key=lambda f: cost(f.size))
    return Crossings(ranked[:MAX_CROSSINGS], max(len(ranked) - MAX_CROSSINGS, 0), list(beyond.values()))


def joint_crossings(task: Task, candidate: Candidate, feeds: Feeds) -> list[Crossing]:
    """Sizes at which conditions on sizes and indices that no check size holds together do
    (`fitness.check.joint`): one per conjunction, from the base size (from the smallest check size where
    that costs more than the check affords); none where a check size, or a bench size past the check's
    reach, holds them already."""
    base, _ = base_size(task)
    smallest = min(task.check_sizes, key=cost)
    names = constants(candidate, feeds.tree)
    functions = {fn.name: fn for fn in feeds.tree.body if isinstance(fn, ast.FunctionDef)}
    once = {name: bound_once(fn) for name, fn in functions.items()}
    assigned = {name: _assignments(fn) for name, fn in functions.items()}
    out: dict[str, Crossing] = {}
    for name in reachable(feeds.tree):
        fn = functions[name]
        solved: dict[tuple[str, bool], Part | None] = {}  # a condition recurs in many conjunctions: solved once
        for line, literals in conjunctions(_read_through(fn, once[name]), _turns):
            parts = []
            for c, outcome in literals:
                key = (ast.dump(c), outcome)
                if key not in solved:
                    solved[key] = _part(c, outcome, fn, once, assigned, feeds, names, base)
                part = solved[key]
                if part is not None:
                    parts.append(part)
            if len({(p.dim, p.unknown) for p in parts}) < 2:  # one unknown's: the single crossings' concern
                continue
            joint = Joint(parts)
            if not joint.possible or any(joint.holds_at(s) for s in task.check_sizes):
                continue
            size = joint.size_from(base)
            if cost(size) > MAX_ELEMENTS:
                size = joint.size_from(smallest)
            if cost(size) > MAX_ELEMENTS and any(joint.holds_at(b) for b in task.bench_sizes):
                continue
            out.setdefault(size_key(size), Crossing(size, 0, line, False, joint=True))
    return list(out.values())


def _read_through(fn: ast.FunctionDef, once: dict[str, ast.expr]) -> ast.FunctionDef:
    """A copy of `fn` in which each name it binds once to a condition is read as that condition: conditions
    named apart (``tall = row > 600``, ``wide = n_cols > 1500``, ``tl.where(tall & wide, ...)``) are joined
    again. (Other names are read through where each part is solved.)"""
    mapping = {name: v for name, v in ((n, inline(value, once)) for n, value in once.items()) if is_condition(v)}

    class _Read(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            value = mapping.get(node.id)
            return copy.deepcopy(value) if value is not None and isinstance(node.ctx, ast.Load) else node

    out = _Read().visit(copy.deepcopy(fn))
    assert isinstance(out, ast.FunctionDef)
    return out


def _part(c: ast.expr, outcome: bool, fn: ast.FunctionDef, once: dict[str, dict[str, ast.expr]],
          assigned: dict[str, dict[str, list[str]]], feeds: Feeds, names: dict[str, int], base: Size) -> Part | None:
    """The condition `c` of `fn` wanted to take `outcome`, as a part of a conjunction: solved over its one
    unknown (read through names bound once, and through a call site's arguments, the last form that solves),
    moved by one dimension; None for a condition on data, on several unknowns or dimensions, or fixed. A value
    that turns (`_turns`) is a part too: true where it differs from its value at the base size (at index 0 for
    an index)."""
    condition = is_condition(c)
    for form, scope in reversed(_forms(c, fn, once, feeds)):
        solved = outcomes(form, names) if condition else values(form, names)
        if solved is None:
            continue
        found, unknown = solved
        if _data(unknown, assigned[scope]):
            return None
        # the unknown's own dimensions first: a name's include every test a jump in its function sits under
        dims = feeds.of(scope, parse_expression(unknown).body)
        if len(dims) != 1:
            dims = feeds.of(fn.name, c)
        if len(dims) != 1:
            return None
        dim, index = next(iter(dims)), _is_index(unknown, assigned[scope])
        if not condition:
            at = 0 if index else int(base.get(dim, 1))
            found = found != found[min(at, DOMAIN - 1)]
        return Part(found if outcome else ~found, index, dim, unknown)
    return None
