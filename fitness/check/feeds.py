"""Which of a task's dimensions can feed a value in a candidate's code: a conservative dataflow over its source.

`fitness.check.crossings` moves a dimension to cross a condition only where that dimension can change the
condition's value. A value is followed back through the assignments of its function (with the conditions
and loops each assignment sits under: ``n = 0`` under ``if rows > 8192:`` is fed by rows), through the
arguments of every call and launch site of that function (and the conditions those sites sit under), to
``launch``'s tensors, whose shape axes are mapped to the dimensions that change them (the task's shapes at
the base size and with each dimension moved). A program id is fed by the grids of the kernel's launches.
Meta-parameters, literals, imported modules and module constants feed nothing.

Anything it does not follow may be fed by every dimension: data (a load, a torch call, a method of a
tensor other than its shape, size, stride and element count), containers, a function used other than by
calling or launching it, ``*args``, a name bound other than by assignment or a ``for`` loop (``global``,
``:=``, ``with``, ``try``, comprehensions, nested functions), a call to a function of the module. An
answer here can only make the check cross along more dimensions than needed, never fewer.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator

from evo.contracts.candidate import Candidate
from evo.contracts.task import Size, Task

# pure functions of their arguments: what they return is fed by what feeds the arguments
PURE_MODULE_CALLS = {
    "triton": {"cdiv", "next_power_of_2"},
    "tl": {"arange", "zeros", "full", "cdiv", "minimum", "maximum", "where", "abs", "multiple_of",
           "max_contiguous", "cast", "broadcast_to", "reshape", "expand_dims", "sum", "max", "min", "constexpr",
           "full_like", "zeros_like", "sqrt", "exp", "log", "fma", "umulhi", "range", "static_range"},
    "math": {"ceil", "floor", "log2", "sqrt", "isqrt", "prod", "gcd"},
}
PURE_BUILTINS = {"min", "max", "abs", "int", "float", "round", "bool", "len", "range"}
SHAPE_METHODS = {"stride", "size", "numel", "dim", "element_size", "to"}
GRID_CALLS = {"program_id", "num_programs"}


class Feeds:
    """The dimensions (of `free`) that can feed values of a candidate's code (see the module docstring)."""

    def __init__(self, task: Task, candidate: Candidate, tree: ast.Module, base: Size, free: list[str]) -> None:
        self.tree = tree
        self.every = frozenset(free)
        self.functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
        self.modules = _imported(tree)
        self.fixed = _module_constants(tree) | {k for k in candidate.params}
        self.axes = _axes(task, base, free)
        self.scopes = {name: _Scope(f, set(self.functions)) for name, f in self.functions.items()}
        self.sites = {name: _sites(tree, name, self.scopes) for name in self.functions}

    def of(self, function: str, node: ast.expr) -> frozenset[str]:
        """The dimensions that can feed the value of `node`, an expression of the top-level `function`."""
        scope = self.scopes.get(function)
        if scope is None or id(node) in scope.nested:
            return self.every
        return self._expr(function, node, set())

    # -- expressions ---------------------------------------------------------------------------------------

    def _expr(self, fn: str, e: ast.expr, seen: set[tuple[str, str]]) -> frozenset[str]:
        if isinstance(e, ast.Constant):
            return frozenset()
        if isinstance(e, ast.Name):
            return self._name(fn, e.id, seen)
        if isinstance(e, (ast.BinOp, ast.BoolOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.Tuple)):
            return self._all(fn, ast.iter_child_nodes(e), seen)
        if isinstance(e, ast.Subscript):
            axis = self._shape_axis(fn, e)
            if axis is not None:
                return axis
            return self._all(fn, [e.value, e.slice], seen)
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id in self.modules and not self._local(fn, e.value.id):
                return frozenset()
            return self._expr(fn, e.value, seen)
        if isinstance(e, ast.Call):
            return self._call(fn, e, seen)
        return self.every

    def _all(self, fn: str, nodes: Iterator[ast.AST] | list[ast.expr], seen: set[tuple[str, str]]) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for n in nodes:
            if isinstance(n, ast.expr):
                out |= self._expr(fn, n, seen)
                if out == self.every:
                    break
            elif not isinstance(n, (ast.operator, ast.boolop, ast.unaryop, ast.cmpop, ast.expr_context)):
                return self.every
        return out

    def _call(self, fn: str, call: ast.Call, seen: set[tuple[str, str]]) -> frozenset[str]:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return self.every
        args = [*call.args, *(k.value for k in call.keywords)]
        f = call.func
        if isinstance(f, ast.Name) and f.id in PURE_BUILTINS and not self._local(fn, f.id) \
                and f.id not in self.functions:
            return self._all(fn, args, seen)
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and not self._local(fn, f.value.id):
            module = f.value.id
            if module in self.modules and f.attr in GRID_CALLS and module == "tl":
                return self._grid(fn, seen) | self._all(fn, args, seen)
            if module in self.modules and f.attr in PURE_MODULE_CALLS.get(module, set()):
                return self._all(fn, args, seen)
        if isinstance(f, ast.Attribute) and f.attr in SHAPE_METHODS:
            return self._expr(fn, f.value, seen) | self._all(fn, args, seen)
        return self.every

    def _shape_axis(self, fn: str, e: ast.Subscript) -> frozenset[str] | None:
        """``x.shape[i]`` of a tensor of ``launch`` with a literal ``i``: the dimensions that change that axis."""
        v = e.value
        if not (isinstance(v, ast.Attribute) and v.attr == "shape" and isinstance(v.value, ast.Name)
                and isinstance(e.slice, ast.Constant) and isinstance(e.slice.value, int)):
            return None
        axes = self._tensor_axes(fn, v.value.id)
        if axes is None or not -len(axes) <= e.slice.value < len(axes):
            return None
        return axes[e.slice.value]

    def _tensor_axes(self, fn: str, name: str) -> list[frozenset[str]] | None:
        """The dimensions feeding each axis of `name` where it is a tensor parameter of ``launch``, unassigned."""
        scope = self.scopes[fn]
        if fn != "launch" or self.axes is None or name not in scope.shape_only:
            return None
        positional = [a.arg for a in self.functions[fn].args.args]
        if name not in positional:
            return None
        i = positional.index(name)
        return self.axes[i] if i < len(self.axes) else None

    # -- names ---------------------------------------------------------------------------------------------

    def _local(self, fn: str, name: str) -> bool:
        scope = self.scopes[fn]
        return name in scope.bound or name in scope.params

    def _name(self, fn: str, name: str, seen: set[tuple[str, str]]) -> frozenset[str]:
        if (fn, name) in seen:
            return frozenset()  # a cycle adds nothing to the union its first visit is taking
        seen.add((fn, name))
        scope = self.scopes[fn]
        if name in scope.opaque or (name in scope.mutated and name not in self.modules):
            return self.every
        if name in scope.params:
            return self._param(fn, name, seen)
        if name in scope.bound:
            return self._all(fn, scope.bound[name], seen)
        if name in self.fixed or name in self.modules or name in PURE_BUILTINS:
            return frozenset()
        return self.every  # a module variable, a function used as a value, a builtin

    def _param(self, fn: str, name: str, seen: set[tuple[str, str]]) -> frozenset[str]:
        node = self.functions[fn]
        if fn == "launch":
            if name in self.fixed and name in [a.arg for a in node.args.kwonlyargs]:
                return frozenset()  # a meta-parameter
            axes = self._tensor_axes(fn, name)  # none for a number among the inputs: it may be a size
            return frozenset().union(*axes) if axes else self.every
        sites = self.sites[fn]
        if sites is None or node.args.vararg or node.args.kwarg or node.args.posonlyargs:
            return self.every
        positional = [a.arg for a in node.args.args]
        out: frozenset[str] = frozenset()
        for caller, call, _ in sites:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return self.every  # `*args` or `**kwargs` at a site: which argument is which is not followed
            given = argument(call, positional, name)
            if given is None:
                default = _default(node, name)
                if not isinstance(default, ast.Constant):
                    return self.every
                given = default
            out |= self._expr(caller, given, seen) | self._control(caller, call, seen)
        return out

    def _grid(self, fn: str, seen: set[tuple[str, str]]) -> frozenset[str]:
        """What feeds the program ids of kernel `fn`: the grids of its launches."""
        sites = self.sites.get(fn)
        if not sites or any(not launch for _, _, launch in sites):
            return self.every
        out: frozenset[str] = frozenset()
        for caller, call, _ in sites:
            assert isinstance(call.func, ast.Subscript)
            out |= self._expr(caller, call.func.slice, seen) | self._control(caller, call, seen)
        return out

    def _control(self, fn: str, node: ast.AST, seen: set[tuple[str, str]]) -> frozenset[str]:
        """What feeds whether `node` runs: the tests and loops it sits under."""
        scope = self.scopes[fn]
        if id(node) in scope.opaque_region:
            return self.every
        return self._all(fn, scope.guards.get(id(node), []), seen)


class _Scope:
    """One top-level function: its parameters, the values bound to each local name (each with the tests of
    the statements its binding sits under), the names it cannot follow, and the guards of every node."""

    def __init__(self, fn: ast.FunctionDef, functions: set[str]) -> None:
        args = fn.args
        self.params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        self.opaque = {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        self.mutated: set[str] = set()  # receivers of methods and bases of stores: maybe changed in place
        self.bound: dict[str, list[ast.expr]] = {}
        self.guards: dict[int, list[ast.expr]] = {}
        self.nested: set[int] = set()  # nodes inside nested functions, lambdas and comprehensions
        self.opaque_region: set[int] = set()  # nodes inside try, with and match: what runs there is not followed
        for node in ast.walk(fn):
            if node is not fn and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp,
                                                    ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.ClassDef)):
                self.nested |= {id(n) for n in ast.walk(node)}
                self.opaque |= {n.id for n in ast.walk(node)
                                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.opaque |= set(node.names)
            elif isinstance(node, ast.NamedExpr):
                self.opaque |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
            elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.mutated |= _base_names(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr not in SHAPE_METHODS:
                self.mutated |= _base_names(node.func.value)
        # a jump under a condition (break, continue, return, raise) decides whether the statements after it
        # run: where there is one, every binding also depends on every test and loop of the function
        jumps = any(isinstance(n, (ast.Break, ast.Continue, ast.Return, ast.Raise)) and id(n) not in self.nested
                    and n not in fn.body for n in ast.walk(fn))
        every_test = [e for n in ast.walk(fn) if id(n) not in self.nested
                      for e in ([n.test] if isinstance(n, (ast.If, ast.While)) else
                                [n.iter] if isinstance(n, (ast.For, ast.AsyncFor)) else [])]
        self._body(fn.body, every_test if jumps else [])
        self.shape_only = _shape_only(fn, functions) - set(self.bound) - self.opaque - self.mutated

    def _body(self, stmts: list[ast.stmt], guards: list[ast.expr]) -> None:
        for s in stmts:
            for node in ast.walk(s):  # the statements nested in `s` get their own guards below
                self.guards[id(node)] = guards
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                self._assign(s, guards)
            elif isinstance(s, (ast.For, ast.AsyncFor)):
                inner = [*guards, s.iter]
                self._bind(s.target, s.iter, inner)
                self._body(s.body, inner)
                self._body(s.orelse, inner)
            elif isinstance(s, (ast.If, ast.While)):
                inner = [*guards, s.test]
                self._body(s.body, inner)
                self._body(s.orelse, inner)
            elif isinstance(s, (ast.Try, ast.With, ast.AsyncWith, ast.Match)) or type(s).__name__ == "TryStar":
                for node in ast.walk(s):
                    self.opaque_region.add(id(node))
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        self.opaque.add(node.id)
                    elif isinstance(node, ast.ExceptHandler) and node.name:
                        self.opaque.add(node.name)
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                self.opaque |= {(a.asname or a.name).split(".")[0] for a in s.names}
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.opaque.add(s.name)

    def _assign(self, s: ast.Assign | ast.AugAssign | ast.AnnAssign, guards: list[ast.expr]) -> None:
        if s.value is None:
            return
        if isinstance(s, ast.AugAssign):
            t = s.target
            if isinstance(t, ast.Name):
                self._bind(t, ast.BinOp(ast.Name(t.id, ast.Load()), s.op, s.value), guards)
            return  # a subscript or attribute target: its base is `mutated`
        for target in (s.targets if isinstance(s, ast.Assign) else [s.target]):
            self._bind(target, s.value, guards)

    def _bind(self, target: ast.expr, value: ast.expr, guards: list[ast.expr]) -> None:
        if isinstance(target, ast.Name):
            # the value, and the tests that decide whether this binding runs, feed the name
            self.bound.setdefault(target.id, []).extend([value, *guards])
        elif isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(t, ast.Starred) for t in target.elts):
                self.opaque |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
                return
            parts: list[ast.expr]
            if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
                parts = list(value.elts)
            elif isinstance(value, ast.Attribute) and value.attr == "shape":
                parts = [ast.Subscript(value, ast.Constant(i), ast.Load()) for i in range(len(target.elts))]
            else:
                parts = [value] * len(target.elts)
            for t, v in zip(target.elts, parts):
                self._bind(t, v, guards)
        # a subscript or attribute target changes an object in place: its base is `mutated`


def _shape_only(fn: ast.FunctionDef, functions: set[str]) -> set[str]:
    """The parameters of `fn` used only where their shape cannot change: read for a shape, a stride, a size,
    an element count, a dtype or a device, or passed to a kernel launch. One used otherwise (bound to
    another name, passed to a function, a method called on it) may be reshaped in place under an alias."""
    parents = {id(child): node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    kernels = functions - stored - params
    unsafe: set[str] = set()
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Name) and node.id in params and isinstance(node.ctx, ast.Load)):
            continue
        up = parents.get(id(node))
        if isinstance(up, ast.Attribute) and up.attr in ("shape", "dtype", "device", "ndim"):
            continue
        if isinstance(up, ast.Attribute) and up.attr in ("stride", "size", "numel", "dim"):
            call = parents.get(id(up))
            if isinstance(call, ast.Call) and call.func is up:
                continue
        call = parents.get(id(up)) if isinstance(up, ast.keyword) else up
        passed = isinstance(up, ast.keyword) or (isinstance(call, ast.Call) and node in call.args)
        if passed and isinstance(call, ast.Call) and _launches(call, kernels):
            continue  # an argument of a launch `kernel[grid](...)`
        unsafe.add(node.id)
    return params - unsafe


def _launches(call: ast.Call, kernels: set[str]) -> bool:
    """Whether `call` is ``kernel[grid](...)`` of one of the module's functions `kernels` (not shadowed)."""
    f = call.func
    return isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and f.value.id in kernels


def _base_names(node: ast.expr) -> set[str]:
    """The name an attribute or subscript chain starts from (``a`` of ``a.b[0].c``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return {node.id} if isinstance(node, ast.Name) else set()


def argument(call: ast.Call, positional: list[str], name: str) -> ast.expr | None:
    if name in positional and positional.index(name) < len(call.args):
        return call.args[positional.index(name)]
    return next((k.value for k in call.keywords if k.arg == name), None)


def _default(fn: ast.FunctionDef, name: str) -> ast.expr | None:
    args = fn.args
    pairs = [*zip(reversed(args.args), reversed(args.defaults)),
             *((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)]
    return next((d for a, d in pairs if a.arg == name), None)


def _sites(tree: ast.Module, name: str, scopes: dict[str, _Scope]) -> list[tuple[str, ast.Call, bool]] | None:
    """Every (calling top-level function, call, is a launch) of function `name`; None when the name is
    used other than by calling or launching it (passed, stored, called from module level) or bound in
    another function (`scopes`: each top-level function's)."""
    sites: list[tuple[str, ast.Call, bool]] = []
    direct: set[int] = set()
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id == name:
                sites.append((fn.name, node, False))
                direct.add(id(f))
            elif isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and f.value.id == name:
                sites.append((fn.name, node, True))
                direct.add(id(f.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load) and id(node) not in direct:
            return None
    if any(other != name and name in scope.bound for other, scope in scopes.items()):
        return None  # shadowed somewhere: the sites found may not be this function's
    return sites


def _imported(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            out |= {a.asname or a.name for a in node.names}
    return out


def _module_constants(tree: ast.Module) -> set[str]:
    """Top-level names bound once, to a literal or arithmetic of literals, and never declared global."""
    counts: dict[str, int] = {}
    values: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        counts[n.id] = counts.get(n.id, 0) + 1
                        if isinstance(t, ast.Name) and node.value is not None and not isinstance(node, ast.AugAssign):
                            values[n.id] = node.value
    declared = {n for node in ast.walk(tree) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
    return {name for name, v in values.items()
            if counts[name] == 1 and name not in declared and _literal(v)}


def _literal(e: ast.expr) -> bool:
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float, bool, str))
    if isinstance(e, ast.UnaryOp):
        return _literal(e.operand)
    if isinstance(e, ast.BinOp):
        return _literal(e.left) and _literal(e.right)
    return False


def _axes(task: Task, base: Size, free: list[str]) -> list[list[frozenset[str]]] | None:
    """Per tensor of a case (inputs, then outputs) and per axis, the dimensions of `free` that change it:
    the task's shapes at `base` against those with each dimension moved (by 1 and by 7); None where the
    shapes cannot be had or change their number of axes."""
    try:
        shapes = _shapes(task, base)
        out = [[set[str]() for _ in s] for s in shapes]
        for dim, step in itertools.product(free, (1, 7)):
            moved = _shapes(task, {**base, dim: int(base[dim]) + step})
            if [len(s) for s in moved] != [len(s) for s in shapes]:
                return None
            for i, (a, b) in enumerate(zip(shapes, moved)):
                for axis, (x, y) in enumerate(zip(a, b)):
                    if x != y:
                        out[i][axis].add(dim)
    except Exception:
        return None
    return [[frozenset(a) for a in t] for t in out]


def _shapes(task: Task, size: Size) -> list[tuple[int, ...]]:
    case = task.bench_case(size, data=False)
    return [tuple(s) for s in [*case.input_shapes, *case.output_shapes]]
