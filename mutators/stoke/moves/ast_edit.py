"""The frame of STOKE's moves: a move is a frozen value applied to a copy of a candidate.

An `AstMove` parses the candidate's source into a fresh tree (the copy), edits nodes inside its
``@triton.jit`` functions and unparses the result; the parent is never touched. Site lists are
collected in `ast.walk` order, so the same random stream picks the same site every time.
"""

from __future__ import annotations

import ast
import random
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from evo.contracts.candidate import Candidate
from evo.contracts.syntax import parse_module

T = TypeVar("T")

TL = "tl"  # the triton.language alias moves write; sites are recognized under any alias


@dataclass(frozen=True)
class Applied:
    """A move's result: the new candidate and what changed (for notes and traces)."""

    candidate: Candidate
    detail: str


class Move(ABC):
    """One kind of local change. Subclasses are frozen dataclasses (moves are data)."""

    label: ClassVar[str] = ""

    @property
    def name(self) -> str:
        """Stable label used in statistics and configs."""
        return self.label

    @abstractmethod
    def apply(self, candidate: Candidate, rng: random.Random) -> Applied | None:
        """A changed copy of `candidate`, or None when the move has no site in it."""


@dataclass(frozen=True)
class Kernels:
    """A parsed copy of a module, its jit functions and the names that mean triton.language."""

    tree: ast.Module
    functions: list[ast.FunctionDef]
    tl_names: frozenset[str]


class AstMove(Move):
    """A move that edits the source; `edit` returns a detail string, or None for no site."""

    def apply(self, candidate: Candidate, rng: random.Random) -> Applied | None:
        kernels = parse_kernels(candidate.source)
        if kernels is None:
            return None
        detail = self.edit(kernels, rng)
        if detail is None:
            return None
        source = unparse(kernels.tree)
        return None if source is None else Applied(Candidate(source, dict(candidate.params)), detail)

    @abstractmethod
    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        """Change `k.tree` in place at one randomly chosen site."""


def parse_kernels(source: str) -> Kernels | None:
    """A fresh parse of `source` with its jit functions; None when it does not parse or has none."""
    try:
        tree = parse_module(source)
    except SyntaxError:
        return None
    kernels = Kernels(tree, jit_functions(tree), language_aliases(tree))
    return kernels if kernels.functions else None


def unparse(tree: ast.Module) -> str | None:
    """The edited module's source, or None when the edit left a tree that cannot be written back."""
    ast.fix_missing_locations(tree)
    try:
        return ast.unparse(tree) + "\n"
    except (ValueError, TypeError, AttributeError):
        return None


def jit_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    def is_jit(d: ast.expr) -> bool:
        target = d.func if isinstance(d, ast.Call) else d
        return (isinstance(target, ast.Attribute) and target.attr == "jit") or (
            isinstance(target, ast.Name) and target.id == "jit")

    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and any(map(is_jit, n.decorator_list))]


def language_aliases(tree: ast.Module) -> frozenset[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name == "triton.language" and a.asname}
    return frozenset(names or {TL})


def tl_attr(name: str, tl: str = TL) -> ast.Attribute:
    return ast.Attribute(value=ast.Name(id=tl, ctx=ast.Load()), attr=name, ctx=ast.Load())


def tl_call(name: str, args: Sequence[ast.expr], keywords: Sequence[ast.keyword] = (), tl: str = TL) -> ast.Call:
    return ast.Call(func=tl_attr(name, tl), args=list(args), keywords=list(keywords))


def tl_function(node: ast.AST, k: Kernels) -> str | None:
    """`exp` for a call ``tl.exp(...)`` (or ``tl.math.exp``), else None."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    head = node.func.value
    if isinstance(head, ast.Attribute) and head.attr == "math":
        head = head.value
    return node.func.attr if isinstance(head, ast.Name) and head.id in k.tl_names else None


def calls_to(k: Kernels, names: set[str]) -> list[ast.Call]:
    return [n for f in k.functions for n in ast.walk(f)
            if isinstance(n, ast.Call) and tl_function(n, k) in names]


@dataclass(frozen=True)
class Slot:
    """Where a node sits: ``parent.field`` or ``parent.field[index]``, so it can be replaced."""

    parent: ast.AST
    field: str
    index: int | None
    node: ast.AST

    def replace(self, new: ast.AST) -> None:
        if self.index is None:
            setattr(self.parent, self.field, new)
        else:
            getattr(self.parent, self.field)[self.index] = new


def slots(k: Kernels) -> Iterator[Slot]:
    """Every node inside the kernels' bodies (not their signatures or decorators)."""
    for fn in k.functions:
        for i, stmt in enumerate(fn.body):
            yield Slot(fn, "body", i, stmt)
            for parent in ast.walk(stmt):
                for field, value in ast.iter_fields(parent):
                    if isinstance(value, list):
                        for j, v in enumerate(value):
                            if isinstance(v, ast.AST):
                                yield Slot(parent, field, j, v)
                    elif isinstance(value, ast.AST):
                        yield Slot(parent, field, None, value)


def bodies(k: Kernels) -> list[list[ast.stmt]]:
    """Every statement list inside the kernels (function, loop and branch bodies)."""
    out: list[list[ast.stmt]] = []
    for fn in k.functions:
        for node in ast.walk(fn):
            for field in ("body", "orelse"):
                value = getattr(node, field, None)
                if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                    out.append(value)
    return out


def local_names(fn: ast.FunctionDef) -> list[str]:
    """Arguments and assigned names of a function, in order of first appearance."""
    names = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]]
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
    return list(dict.fromkeys(names))


def owner(k: Kernels, node: ast.AST) -> ast.FunctionDef:
    for fn in k.functions:
        if any(n is node for n in ast.walk(fn)):
            return fn
    raise LookupError("node is outside the kernels")


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((kw for kw in call.keywords if kw.arg == name), None)


def set_keyword(call: ast.Call, name: str, value: ast.expr | None) -> None:
    """Set, replace or (value None) remove a keyword argument."""
    call.keywords = [kw for kw in call.keywords if kw.arg != name]
    if value is not None:
        call.keywords.append(ast.keyword(arg=name, value=value))


def pick(rng: random.Random, items: Sequence[T]) -> T:
    return items[rng.randrange(len(items))]
