"""The lint's rules against state and monkeypatching (`fitness.check.lint`).

A kernel must do the same on every call: the check calls it a few dozen times, the profile once more, a
user's model millions of times, and nothing one candidate does may reach another. So nothing a call does
may outlive the call:
- module-level values are immutable (numbers, strings, tuples, dtypes, ``tl.constexpr(...)``, calls of
  pure functions of constants); ``PARAMS`` and ``SPACE`` are dict literals that only the harness reads,
  so code may not use them; defaults are immutable too (a default is made once, for every call);
- no attribute is assigned, updated or deleted, anywhere (``tl.exp = ...`` changes every later kernel in
  the process, ``launch.calls = 0`` is a counter), and no kernel needs to;
- no item store, update or deletion and no mutating method reaches a module-level object, directly or
  through an alias (`fitness.check.aliases`). With the values immutable this is a second line: what is
  left at module level (functions, modules, constants) has no items to change.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from fitness.check.aliases import IS, Aliases, chain, defaults, root
from fitness.check.allowed import CHAINS, CONSTANT_CALLS, CONSTANT_NAMES, MUTATING_METHODS, canonical

Problem = tuple[ast.AST, str]
HARNESS_ONLY = ("PARAMS", "SPACE")
_CONTAINERS = {ast.List: "a list", ast.Set: "a set", ast.Dict: "a dict"}
_MADE = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)
IMMUTABLE = "numbers, strings, tuples, dtypes, tl.constexpr(...)"
OUTLIVES = "the change would outlive the call and a later call could behave differently (state across calls)"


@dataclass(frozen=True)
class ModuleNames:
    """What the lint collected about the module level."""

    bound: frozenset[str]  # every name bound at module level: imports, constants, functions, PARAMS/SPACE
    functions: frozenset[str]
    aliases: Mapping[str, str]  # module alias -> canonical module
    imported: Mapping[str, str]  # a name imported by name -> its canonical name


def state_problems(tree: ast.Module, names: ModuleNames) -> list[Problem]:
    """Every route by which a call could leave something behind for a later call or another module."""
    return [*_value_problems(tree, names), *_attribute_stores(tree), *_alias_problems(tree, names)]


class _Values:
    """What in a module-level value or a default is not an immutable constant."""

    def __init__(self, names: ModuleNames) -> None:
        self.names = names

    def called(self, call: ast.Call) -> str | None:
        """The canonical name a call reaches: a listed name, or a builtin's own."""
        f = call.func
        if isinstance(f, ast.Name):
            return self.names.imported.get(f.id, None if f.id in self.names.bound else f.id)
        if isinstance(f, ast.Attribute):
            base, attrs = chain(f)
            if isinstance(base, ast.Name) and base.id in self.names.aliases:
                return canonical(".".join([self.names.aliases[base.id], *attrs]))
        return None

    def listed(self, node: ast.Attribute | ast.Name) -> str | None:
        """The listed name a chain (or a name imported by name) reaches, if any."""
        if isinstance(node, ast.Name):
            return self.names.imported.get(node.id)
        base, attrs = chain(node)
        if not isinstance(base, ast.Name) or base.id not in self.names.aliases:
            return None
        prefixes = (canonical(".".join([self.names.aliases[base.id], *attrs[:k]])) for k in range(1, len(attrs) + 1))
        return next((name for name in prefixes if name in CHAINS), None)

    def problems(self, expr: ast.expr, *, containers: bool) -> Iterator[tuple[ast.AST, str]]:
        """(node, what it is) for each part of `expr` that is not an immutable constant."""
        called = {id(n.func) for n in ast.walk(expr) if isinstance(n, ast.Call)}
        inner = {id(n.value) for n in ast.walk(expr) if isinstance(n, ast.Attribute)}
        for node in ast.walk(expr):
            if type(node) in _CONTAINERS and not containers:
                yield node, _CONTAINERS[type(node)]
            elif isinstance(node, _MADE):
                yield node, "a lambda" if isinstance(node, ast.Lambda) else "a comprehension"
            elif isinstance(node, ast.Call) and self.called(node) not in CONSTANT_CALLS:
                yield node, f"a call of {ast.unparse(node.func)}"
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in called:
                if node.id in self.names.functions:
                    yield node, f"the function {node.id}"
                elif node.id in self.names.imported and self.listed(node) not in CONSTANT_NAMES:
                    yield node, f"{node.id} (a function, not a value)"
            elif isinstance(node, ast.Attribute) and id(node) not in called | inner:
                if (listed := self.listed(node)) is not None and listed not in CONSTANT_NAMES:
                    yield node, f"{ast.unparse(node)} (a function or module, not a value)"


def _value_problems(tree: ast.Module, names: ModuleNames) -> Iterator[Problem]:
    """Module-level values, and the defaults of every function, kernel and lambda."""
    values = _Values(names)
    for stmt in tree.body:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if any(isinstance(n, (ast.Attribute, ast.Subscript)) for t in targets for n in ast.walk(t)):
            continue  # not a constant's definition: refused as a store (and by the lint)
        literal = len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id in HARNESS_ONLY
        for node, what in values.problems(stmt.value, containers=literal):
            yield node, (f"{what} in the module-level value of {', '.join(ast.unparse(t) for t in targets)} is not "
                         f"allowed: module-level values must be immutable ({IMMUTABLE}; PARAMS and SPACE dict "
                         "literals), or a call could change one and the next call behave differently")
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.Lambda)):
            where = f"of {fn.name}" if isinstance(fn, ast.FunctionDef) else "of a lambda"
            for arg, default in defaults(fn.args):
                for node, what in values.problems(default, containers=False):
                    yield node, (f"{what} in the default of {arg.arg!r} {where} is not allowed: a default is made "
                                 "once and shared by every call, so a call could leave state in it for the next "
                                 f"(defaults must be immutable: {IMMUTABLE})")


def _verb(target: ast.Attribute | ast.Subscript, updated: set[int]) -> str:
    return "deleting" if isinstance(target.ctx, ast.Del) else "updating" if id(target) in updated else "assigning to"


def _attribute_stores(tree: ast.Module) -> Iterator[Problem]:
    """Every attribute assigned, updated or deleted: of a module it is monkeypatching (every later kernel in
    the process would see it, the seed's baseline included), of a function, a kernel or any other object
    it is state kept across calls."""
    updated = {id(n.target) for n in ast.walk(tree) if isinstance(n, ast.AugAssign)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            yield node, (f"{_verb(node, updated)} the attribute {ast.unparse(node)} is not allowed: it would "
                         "change a module, a function or an object that outlives the call (monkeypatching, "
                         "or state across calls)")


def _mutates(method: str) -> bool:
    return method in MUTATING_METHODS or (method.endswith("_") and not method.startswith("_"))


def _alias_problems(tree: ast.Module, names: ModuleNames) -> Iterator[Problem]:
    """Item stores and mutating methods on module-level objects and their aliases; PARAMS and SPACE in code."""
    aliases = Aliases(tree, names.bound, {**names.aliases, **names.imported})
    updated = {id(n.target) for n in aliases.nodes if isinstance(n, ast.AugAssign)}

    def holder(node: ast.expr) -> str:
        base = root(node)
        if not isinstance(base, ast.Name):
            return f"{ast.unparse(node)} may be a module-level object"
        if aliases.module_level(base):
            return f"{base.id} is a module-level name"
        return f"{base.id} may be a module-level object or a default (bound to one, or to a part of one)"

    for node in aliases.nodes:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and aliases.kind(node.value) & IS:
            yield node, (f"{_verb(node, updated)} an item of {ast.unparse(node.value)} ({ast.unparse(node)}) is "
                         f"not allowed: {holder(node.value)}, so {OUTLIVES}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _mutates(node.func.attr) \
                and aliases.kind(node.func.value) & IS and not aliases.library(node.func):
            yield node, (f"{ast.unparse(node.func)}(...) is not allowed: it changes its object in place and "
                         f"{holder(node.func.value)}, so {OUTLIVES}")
        elif isinstance(node, ast.Name) and node.id in HARNESS_ONLY and isinstance(node.ctx, ast.Load) \
                and aliases.module_level(node):
            yield node, (f"{node.id} may not be used in code: only the harness reads it, and code that changed it "
                         "would change the meta-parameters between calls (take them as keyword arguments of launch)")
