"""Conditions fixed for a candidate: they depend on no input, so one of their outcomes is dead code.

A value is fixed when it is a literal, a module-level name (constants, functions, module aliases), a
meta-parameter (a keyword-only parameter of ``launch``: the candidate's params), a local assigned only
fixed values, a function's parameter that every call site passes a fixed value (``kernel[grid](...,
IS_CAUSAL=False)``, a device function called with a kernel's fixed constexpr), or arithmetic,
comparisons and calls of pure functions of fixed values (``triton.next_power_of_2(BLOCK)``, ``min``).
Anything reached from a tensor (``x.shape[1]``, ``x.dtype``, ``x.stride(0)``), a loop variable, or a
call of the candidate's own functions is not: a condition on it can go either way for some input.
The analysis errs toward "not fixed": a wrong "fixed" would leave a reachable line unchecked.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from fitness.check.data_flow import call_name

_PURE_BUILTINS = frozenset("min max abs int float bool round divmod pow len".split())
# functions of their arguments alone (tl.program_id, tl.load and torch's calls are not: they read the
# program, memory or tensors)
_PURE = frozenset({"triton.next_power_of_2", "triton.cdiv", "triton.language.cdiv", "triton.language.constexpr",
                   "triton.language.core.constexpr", "triton.language.arange", "triton.language.full",
                   "triton.language.zeros"})


def reachable(tree: ast.Module) -> set[str]:
    """Module-level functions ``launch`` can reach: those it names, and those they name."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen: set[str] = set()
    todo = ["launch"]
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        todo += [n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name) and n.id in functions]
    return seen


class _Analysis:
    def __init__(self, tree: ast.Module) -> None:
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.aliases: dict[str, str] = {}
        self.module_names: set[str] = set(self.functions)
        for node in tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module or ''}.{a.name}"
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    self.module_names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        self.module_names |= set(self.aliases)
        self.live = reachable(tree)
        # (function, parameter) -> fixed; optimistic for all but launch's tensors, refuted by call sites
        self.params: dict[tuple[str, str], bool] = {}
        for name, fn in self.functions.items():
            for p in [*fn.args.posonlyargs, *fn.args.args]:
                self.params[(name, p.arg)] = name != "launch"
            for p in fn.args.kwonlyargs:
                self.params[(name, p.arg)] = True  # launch's meta-parameters; others' keyword-only ones
            for extra in (fn.args.vararg, fn.args.kwarg):
                if extra is not None:
                    self.params[(name, extra.arg)] = False
        self.fixed_names: dict[str, set[str]] = {}

    def run(self) -> None:
        changed = True
        while changed:
            changed = False
            for name in self.live:
                self.fixed_names[name] = self._locals(name)
            for name in self.live:
                changed |= self._refute_calls(name)

    def _locals(self, name: str) -> set[str]:
        """The fixed names inside function `name`: fixed parameters, module names, fixed locals."""
        fn = self.functions[name]
        params = {p for (f, p), fixed in self.params.items() if f == name and fixed}
        assigned: dict[str, list[ast.expr | None]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    self._bind(t, node.value, assigned)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                self._bind(node.target, None if isinstance(node, ast.AugAssign) else node.value, assigned)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                self._bind(node.target, None, assigned)
        every_param = {p for (f, p) in self.params if f == name}
        fixed = params | (self.module_names - set(assigned) - every_param)
        candidates = {n for n in assigned if n not in every_param}
        while True:
            more = {n for n in candidates - fixed
                    if all(v is not None and self.fixed(v, fixed) for v in assigned[n])}
            if not more:
                return fixed
            fixed |= more

    @staticmethod
    def _bind(target: ast.expr, value: ast.expr | None, assigned: dict[str, list[ast.expr | None]]) -> None:
        if isinstance(target, ast.Name):
            assigned.setdefault(target.id, []).append(value)
        else:  # unpacking, a starred or subscript target: the value of each name is not followed
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    assigned.setdefault(n.id, []).append(None)

    def fixed(self, e: ast.expr, names: set[str]) -> bool:
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.Name):
            return e.id in names
        if isinstance(e, ast.Attribute):
            root = e
            while isinstance(root, ast.Attribute):
                root = root.value  # type: ignore[assignment]
            if isinstance(root, ast.Name) and root.id in self.aliases:
                return True  # a name of a module: tl.float16, math.pi
            return self.fixed(e.value, names)
        if isinstance(e, ast.Call):
            return self._pure(e.func) and all(self.fixed(a, names) for a in e.args) and all(
                k.value is not None and self.fixed(k.value, names) for k in e.keywords)
        if isinstance(e, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Tuple, ast.List,
                          ast.Subscript, ast.Slice)):
            return all(self.fixed(c, names) for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr))
        return False

    def _pure(self, func: ast.expr) -> bool:
        if isinstance(func, ast.Name) and func.id not in self.aliases:
            return func.id in _PURE_BUILTINS
        attrs: list[str] = []
        root = func
        while isinstance(root, ast.Attribute):
            attrs.append(root.attr)
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in self.aliases):
            return False
        name = ".".join([self.aliases[root.id], *reversed(attrs)])
        return name in _PURE or name.startswith("math.")

    def _refute_calls(self, name: str) -> bool:
        """Mark parameters that a call site in `name` passes an unfixed value (or passes as a value) unfixed."""
        changed = False
        names = self.fixed_names[name]
        called: set[int] = set()
        for node in ast.walk(self.functions[name]):
            if not isinstance(node, ast.Call):
                continue
            target = node.func.value if isinstance(node.func, ast.Subscript) else node.func  # kernel[grid](...)
            if isinstance(target, ast.Name) and target.id in self.functions:
                called.add(id(target))
                changed |= self._bind_call(self.functions[target.id], node, names)
        for node in ast.walk(self.functions[name]):  # a function used as a value: its parameters are unknown
            if isinstance(node, ast.Name) and node.id in self.functions and id(node) not in called:
                for (f, p), fixed in self.params.items():
                    if f == node.id and fixed and f != "launch":
                        self.params[(f, p)] = False
                        changed = True
        return changed

    def _bind_call(self, callee: ast.FunctionDef, call: ast.Call, names: set[str]) -> bool:
        positional = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]]
        bound: list[tuple[str, ast.expr | None]] = []
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred) or i >= len(positional):
                bound += [(p, None) for p in positional]
                break
            bound.append((positional[i], arg))
        for k in call.keywords:
            if k.arg is None:  # **kwargs: anything may be passed
                bound += [(p, None) for (f, p) in self.params if f == callee.name]
            else:
                bound.append((k.arg, k.value))
        changed = False
        for param, value in bound:
            if self.params.get((callee.name, param)) and (value is None or not self.fixed(value, names)):
                self.params[(callee.name, param)] = False
                changed = True
        return changed


class Fixed(NamedTuple):
    """What is fixed for a candidate in the functions ``launch`` reaches (`fixed_code`)."""

    conditions: set[int]  # lines of the ``if`` and ``while`` statements whose condition is fixed
    # (line, column) of the comparisons and select conditions (``tl.where(c, ...)``) that are fixed (a lane of
    # ``tl.arange(0, SPLITS_P2) < NUM_SPLITS`` is true or false for every input alike)
    comparisons: set[tuple[int, int]]


def fixed_code(tree: ast.Module) -> Fixed:
    """The fixed conditions and comparisons of `tree`, from one analysis of it."""
    analysis = _Analysis(tree)
    analysis.run()
    out = Fixed(set(), set())
    for name in analysis.live:
        names = analysis.fixed_names[name]
        for node in ast.walk(analysis.functions[name]):
            if isinstance(node, (ast.If, ast.While)) and analysis.fixed(node.test, names):
                out.conditions.add(node.lineno)
            out.comparisons.update((c.lineno, c.col_offset) for c in conditions(node) if analysis.fixed(c, names))
    return out


def fixed_conditions(tree: ast.Module) -> set[int]:
    """Lines of the ``if`` and ``while`` statements, in functions ``launch`` reaches, whose condition is fixed."""
    return fixed_code(tree).conditions


CLIPS = ("minimum", "maximum")  # two-argument calls that choose per lane: a comparison without the operator


def conditions(node: ast.AST) -> list[ast.expr]:
    """The per-lane condition `node` is, if any: a comparison itself, a select's (``tl.where(c, a, b)``), the
    choice a clip makes (``tl.minimum(a, b)``: a < b or not; the call stands for it), or comparisons joined by
    ``&`` or ``|``."""
    if isinstance(node, ast.Compare):
        return [node]
    if isinstance(node, ast.Call) and node.args and call_name(node.func) == "where":
        return [node.args[0]]
    if isinstance(node, ast.Call) and is_clip(node):
        return [node]
    if is_joined(node):
        assert isinstance(node, ast.expr)
        return [node]
    return []


def is_joined(node: ast.AST) -> bool:
    """`node` joins a comparison with another condition per lane (``(s > 2.0) & (s < 2.5)``, ``mask | (x ==
    0)``): true and false in lanes where neither part alone tells (a window is never true where each of its
    bounds goes both ways)."""
    return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)) and any(
        isinstance(side, ast.Compare) for side in (node.left, node.right))


def is_clip(node: ast.AST) -> bool:
    """`node` is ``tl.minimum(a, b)`` or ``tl.maximum(a, b)`` (a tensor function: Python's min and max are
    of compile-time numbers)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLIPS
            and len(node.args) == 2 and not node.keywords)
