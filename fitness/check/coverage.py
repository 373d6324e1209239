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
every call site: `fixed_conditions`) has one outcome for every input, and the other is dead code.
A condition on sizes, strides, dtypes or values is not fixed: both of its outcomes must run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from evo.contracts.syntax import parse_module
from fitness.check.fixed import fixed_conditions, reachable

STMT, TAKEN, NOT_TAKEN = 0, 1, 2
PROBE = "__evo_probe__"  # a dunder name: the lint forbids candidate code to name it


def key(line: int, kind: int) -> int:
    return line * 4 + kind


@dataclass(frozen=True)
class Point:
    """A point of the candidate's code (see the module docstring); `required`: statically, before the
    fixed conditions are known."""

    line: int
    kind: int
    function: str
    required: bool

    @property
    def key(self) -> int:
        return key(self.line, self.kind)

    def describe(self, lines: list[str]) -> str:
        text = lines[self.line - 1].strip() if 0 < self.line <= len(lines) else ""
        outcome = {STMT: "", TAKEN: ", its condition true", NOT_TAKEN: ", its condition false"}[self.kind]
        return f"line {self.line} (in {self.function}{outcome}): {text}"


def _trivial(body: list[ast.stmt]) -> bool:
    """A body that computes nothing a check could find wrong: only ``pass`` and ``raise``."""
    return all(isinstance(s, (ast.Pass, ast.Raise)) for s in body)


def _constant_true(test: ast.expr) -> bool:
    return isinstance(test, ast.Constant) and bool(test.value)


class _Points:
    """Enumerates the points of function bodies (and, with `probe`, inserts a probe before each)."""

    def __init__(self, probe: bool) -> None:
        self.probe = probe
        self.points: list[Point] = []
        self.branches: dict[int, ast.If | ast.While] = {}  # line of a condition -> its statement

    def function(self, fn: ast.FunctionDef) -> None:
        body = fn.body
        doc = body[:1] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str) else []
        fn.body = doc + self.body(body[len(doc):], fn.name)

    def body(self, stmts: list[ast.stmt], fn: str) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            if not isinstance(s, ast.Pass):
                out += self.point(s, s.lineno, STMT, fn, required=not isinstance(s, ast.Raise))
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

    def point(self, at: ast.stmt, line: int, kind: int, fn: str, *, required: bool) -> list[ast.stmt]:
        self.points.append(Point(line, kind, fn, required))
        if not self.probe:
            return []
        call = ast.Expr(ast.Call(ast.Name(PROBE, ast.Load()), [ast.Constant(key(line, kind))], []))
        return [ast.copy_location(call, at)]


def is_jit(fn: ast.FunctionDef) -> bool:
    return any(ast.unparse(d.func if isinstance(d, ast.Call) else d).endswith("jit") for d in fn.decorator_list)


def instrument(tree: ast.Module, *, kernel: bool) -> ast.Module:
    """`tree` with a probe before every point of its functions: with `kernel`, of the one kernel the
    interpreter parsed (from its ``def``, decorators cut off); else of the host functions of the
    candidate module (the kernels there are never run: the interpreter parses their source again)."""
    walker = _Points(probe=True)
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
    the outcome of a fixed condition (`fixed_conditions`) that was never taken."""
    tree = parse_module(source)
    found, branches = points(tree)
    dead: set[int] = set()
    for line in fixed_conditions(tree):
        node = branches.get(line)
        if node is None:
            continue
        taken, skipped = key(line, TAKEN) in seen, key(line, NOT_TAKEN) in seen
        if taken and not skipped:
            dead |= {key(line, NOT_TAKEN)} | set(_keys(node.orelse))
        elif skipped and not taken:
            dead |= {key(line, TAKEN)} | set(_keys(node.body))
    missing = [p for p in found if p.required and p.key not in seen and p.key not in dead]
    return sorted(missing, key=lambda p: (p.kind != STMT, p.line, p.kind))  # a line first, then an outcome


def _keys(body: list[ast.stmt]) -> Iterator[int]:
    """The keys of every point inside `body` (statements, and both outcomes of nested conditions)."""
    for s in body:
        for node in ast.walk(s):
            if isinstance(node, ast.stmt):
                yield key(node.lineno, STMT)
                if isinstance(node, (ast.If, ast.While)):
                    yield key(node.lineno, TAKEN)
                    yield key(node.lineno, NOT_TAKEN)
