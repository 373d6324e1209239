"""Which expressions of a candidate may be a module-level object (`fitness.check.module_state`).

Python's scopes first (a function's locals are the names bound anywhere in its own body; comprehensions
have their own; defaults, decorators and a comprehension's first iterable belong to the enclosing
scope), then a flow-insensitive fixpoint over every binding: assignments, unpacking, loop and
comprehension targets, walrus, augmented assignments, the parameters a call passes a module-level object
to, a default, a function's return values. An alias made anywhere counts everywhere; what a call of a
listed library function returns (an allocation, a number) is new.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

IS, IN = 1, 2  # an expression may be a module-level object / may hold one, at any depth
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# builtins whose result is a new number or bool, never one of the arguments or a part of one
_SCALAR_BUILTINS = frozenset("len int float bool abs round divmod pow isinstance print".split())
Function = ast.FunctionDef | ast.Lambda
Key = tuple[int, str]  # a local name (its scope's id, the name), or a function's return value
_RETURN = "<return>"


@dataclass
class _Scope:
    parent: _Scope | None
    local: set[str]
    owner: Function | None = None  # None for the module and for comprehensions
    taint: dict[str, int] = field(default_factory=dict)  # local name -> IS | IN
    defs: dict[str, list[Function]] = field(default_factory=dict)  # what a local name may call

    @property
    def is_module(self) -> bool:
        return self.parent is None


def chain(node: ast.Attribute) -> tuple[ast.expr, list[str]]:
    """The root of an attribute chain and its attribute names, outermost last."""
    attrs: list[str] = []
    target: ast.expr = node
    while isinstance(target, ast.Attribute):
        attrs.append(target.attr)
        target = target.value
    return target, list(reversed(attrs))


def root(node: ast.expr) -> ast.expr:
    """What an attribute, item or starred expression is taken from, at the bottom."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node


def arguments(args: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (args.vararg, args.kwarg) if a is not None]
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *extra]


def defaults(args: ast.arguments) -> Iterator[tuple[ast.arg, ast.expr]]:
    """Each parameter that has a default, with it."""
    positional = [*args.posonlyargs, *args.args]
    yield from zip(positional[len(positional) - len(args.defaults):], args.defaults)
    yield from ((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)


def _own_bindings(fn: Function) -> set[str]:
    """The names local to `fn`: its parameters and any name bound anywhere in its own body."""
    names = {a.arg for a in arguments(fn.args)}
    todo: list[ast.AST] = list(fn.body) if isinstance(fn, ast.FunctionDef) else [fn.body]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
            todo.extend([*node.decorator_list, *(d for _, d in defaults(node.args))])
        elif isinstance(node, ast.Lambda):
            todo.extend(d for _, d in defaults(node.args))
        elif isinstance(node, _COMPREHENSIONS):  # its targets are its own; a walrus in it binds here
            names.update(n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr)
                         and isinstance(n.target, ast.Name))
            todo.append(node.generators[0].iter)
        else:
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            todo.extend(ast.iter_child_nodes(node))
    return names


class Aliases:
    """`kind(expr)`: IS when `expr` may evaluate to a module-level object, IN when to something that may
    hold one. `bound` is every name the module level binds; `library` those that name a listed library
    module or function (module aliases and names imported by name), whose calls return new values."""

    def __init__(self, tree: ast.Module, bound: frozenset[str], library: Mapping[str, str]) -> None:
        self.library_names = library
        self.scope_of: dict[int, _Scope] = {}
        self.inner: dict[int, _Scope] = {}  # function or lambda -> its scope
        self.returns: dict[int, int] = {}  # function or lambda -> what it may return (IS | IN)
        self.nodes = list(ast.walk(tree))
        self._visit(tree, _Scope(None, set(bound)))
        self._propagate()

    def _visit(self, node: ast.AST, scope: _Scope) -> None:
        self.scope_of[id(node)] = scope
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            outer: list[ast.AST] = [d for _, d in defaults(node.args)]
            outer += [a.annotation for a in arguments(node.args) if a.annotation is not None]
            if isinstance(node, ast.FunctionDef):
                outer += [*node.decorator_list, *([node.returns] if node.returns else [])]
                scope.defs.setdefault(node.name, []).append(node)
            for child in outer:
                self._visit(child, scope)
            inner = self.inner[id(node)] = _Scope(scope, _own_bindings(node), node)
            for a in arguments(node.args):
                self.scope_of[id(a)] = inner
            for child in node.body if isinstance(node, ast.FunctionDef) else [node.body]:
                self._visit(child, inner)
        elif isinstance(node, _COMPREHENSIONS):
            self._visit(node.generators[0].iter, scope)
            targets = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            inner = _Scope(scope, targets)
            for i, g in enumerate(node.generators):
                self.scope_of[id(g)] = inner
                for child in [g.target, *([g.iter] if i else []), *g.ifs]:
                    self._visit(child, inner)
            for child in [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]:
                self._visit(child, inner)
        else:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        scope.defs.setdefault(t.id, []).append(node.value)
            for child in ast.iter_child_nodes(node):
                self._visit(child, scope)

    def resolve(self, name: ast.Name, *, walrus: bool = False) -> _Scope | None:
        """The scope `name` is local to; None for a builtin (or an unknown name)."""
        scope: _Scope | None = self.scope_of[id(name)]
        while scope is not None and (name.id not in scope.local
                                     or (walrus and scope.owner is None and not scope.is_module)):
            scope = scope.parent
        return scope

    def module_level(self, name: ast.Name) -> bool:
        scope = self.resolve(name)
        return scope is not None and scope.is_module

    def library(self, node: ast.expr) -> bool:
        """A chain from a module alias or a name imported by name: a listed library function."""
        base = root(node)
        return isinstance(base, ast.Name) and base.id in self.library_names and self.module_level(base)

    def callees(self, call: ast.Call) -> list[Function]:
        f = call.func.value if isinstance(call.func, ast.Subscript) else call.func  # kernel[grid](...)
        if isinstance(f, ast.Lambda):
            return [f]
        if isinstance(f, ast.Name) and (scope := self.resolve(f)) is not None:
            return scope.defs.get(f.id, [])
        return []

    def kind(self, node: ast.expr | None) -> int:
        if node is None or isinstance(node, ast.Constant):
            return 0
        if isinstance(node, ast.Name):
            scope = self.resolve(node)
            return 0 if scope is None else IS | IN if scope.is_module else scope.taint.get(node.id, 0)
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):  # a part of what it is taken from
            return IS | IN if self.kind(node.value) else 0
        if isinstance(node, ast.NamedExpr):
            return self.kind(node.value)
        if isinstance(node, (ast.IfExp, ast.BoolOp)):
            found = 0
            for part in [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values:
                found |= self.kind(part)
            return found
        if isinstance(node, ast.Call):
            return self._call_kind(node)
        inside: list[ast.expr | None]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            inside = list(node.elts)
        elif isinstance(node, ast.Dict):
            inside = [*node.keys, *node.values]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            inside = [node.elt]
        elif isinstance(node, ast.DictComp):
            inside = [node.key, node.value]
        elif isinstance(node, ast.Lambda):
            inside = [node.body]
        else:
            return 0  # arithmetic, comparisons, f-strings: new values
        # a new container, comprehension or closure: not itself module-level, but it may hold what is
        return IN if any(self.kind(e) for e in inside) else 0

    def _call_kind(self, call: ast.Call) -> int:
        args = [*call.args, *(k.value for k in call.keywords)]
        callees = self.callees(call)
        if callees:
            found = 0
            for c in callees:
                found |= self.returns.get(id(c), 0)
            return found
        f = call.func
        if self.library(f):
            return 0
        if isinstance(f, ast.Name) and self.resolve(f) is None:  # a builtin: min, max, tuple(...) hand back arguments
            hands_back = f.id not in _SCALAR_BUILTINS and any(self.kind(a) for a in args)
        elif isinstance(f, ast.Attribute):  # a method hands back a part of its object, or get's default
            hands_back = bool(self.kind(f.value)) or (f.attr == "get" and any(self.kind(a) for a in args))
        else:
            hands_back = bool(self.kind(f)) or any(self.kind(a) for a in args)
        return IS | IN if hands_back else 0

    def _bind(self, target: ast.expr, kind: int, *, walrus: bool = False) -> Iterator[Key]:
        """`target` receives a value of `kind` (an unpacked name, a part of it): the names it changed."""
        for n in ast.walk(target) if kind else []:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                scope = self.resolve(n, walrus=walrus)
                got = kind if n is target else IS | IN
                if scope is not None and not scope.is_module and got & ~scope.taint.get(n.id, 0):
                    scope.taint[n.id] = scope.taint.get(n.id, 0) | got
                    yield id(scope), n.id

    def _taint_parameters(self, fn: Function, only: set[str] | None = None) -> Iterator[Key]:
        """Parameters that may receive a module-level object: those in `only`, or all of them where a call
        passes one (which parameter gets it is not worth telling)."""
        scope = self.inner[id(fn)]
        for a in arguments(fn.args):
            if (only is None or a.arg in only) and scope.taint.get(a.arg, 0) != IS | IN:
                scope.taint[a.arg] = IS | IN
                yield id(scope), a.arg

    def _returns(self, fn: Function, kind: int) -> Iterator[Key]:
        if kind & ~self.returns.get(id(fn), 0):
            self.returns[id(fn)] = self.returns.get(id(fn), 0) | kind
            yield id(fn), _RETURN

    @staticmethod
    def _sources(node: ast.AST) -> list[ast.expr]:
        """What a binding site reads (empty for a node that binds nothing)."""
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.Return)):
            return [node.value] if node.value is not None else []
        if isinstance(node, (ast.For, ast.comprehension)):
            return [node.iter]
        if isinstance(node, ast.Call):
            return [*node.args, *(k.value for k in node.keywords)]
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            return [*(d for _, d in defaults(node.args)), *([node.body] if isinstance(node, ast.Lambda) else [])]
        return []

    def _reads(self, sources: list[ast.expr]) -> Iterator[Key]:
        """The local names and return values whose kind the kind of `sources` depends on."""
        for expr in sources:
            for n in ast.walk(expr):
                if isinstance(n, ast.Name) and (scope := self.resolve(n)) is not None and not scope.is_module:
                    yield id(scope), n.id
                elif isinstance(n, ast.Call):
                    yield from ((id(fn), _RETURN) for fn in self.callees(n))

    def _update(self, node: ast.AST) -> Iterator[Key]:
        """Apply one binding site: the keys whose kind it changed."""
        if isinstance(node, ast.Assign):
            for t in node.targets:
                yield from self._bind(t, self.kind(node.value))
        elif isinstance(node, ast.AnnAssign):
            yield from self._bind(node.target, self.kind(node.value))
        elif isinstance(node, ast.AugAssign):  # `c += X` leaves c holding what X holds (a list's +=)
            yield from self._bind(node.target, IN if self.kind(node.value) else 0)
        elif isinstance(node, (ast.For, ast.comprehension)):  # each element is a part of the iterable
            yield from self._bind(node.target, IS | IN if self.kind(node.iter) else 0)
        elif isinstance(node, ast.NamedExpr):
            yield from self._bind(node.target, self.kind(node.value), walrus=True)
        elif isinstance(node, ast.Return) and (owner := self.scope_of[id(node)].owner) is not None:
            yield from self._returns(owner, self.kind(node.value))
        elif isinstance(node, ast.Call) and any(self.kind(a) for a in self._sources(node)):
            for fn in self.callees(node):
                yield from self._taint_parameters(fn)
        if isinstance(node, ast.Lambda):
            yield from self._returns(node, self.kind(node.body))
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            # a default is one object for the function's whole life: the module's, where the module defines it
            at_module = self.scope_of[id(node)].is_module
            kept = {a.arg for a, d in defaults(node.args)
                    if self.kind(d) or (at_module and not isinstance(d, ast.Constant))}
            yield from self._taint_parameters(node, kept)

    def _propagate(self) -> None:
        """Every site once, then again each time a name or return value it reads changes (a worklist: each
        key changes at most twice, so this is linear in the module, whatever order it binds in)."""
        sites = [n for n in self.nodes if self._sources(n)]
        readers: dict[Key, list[ast.AST]] = {}
        for site in sites:
            for key in set(self._reads(self._sources(site))):
                readers.setdefault(key, []).append(site)
        todo, queued = list(reversed(sites)), {id(s) for s in sites}
        while todo:
            site = todo.pop()
            queued.discard(id(site))
            for key in list(self._update(site)):
                for reader in readers.get(key, []):
                    if id(reader) not in queued:
                        queued.add(id(reader))
                        todo.append(reader)
