"""STOKE moves that restructure loops and keep their meaning: fusion and hoisting.

- `FuseLoops`: two loops over the same range (the same arguments, whether `range`, `tl.range` with its
  pipelining hints, or `tl.static_range`) become one, the second's body after the first's in each
  iteration (simple statements between them that do not touch what the first loop does, such as the
  second's accumulator set to zero, move before the first), then what the second recomputes is dropped
  (the same offsets, the same load): two passes over a row that read it independently (a sum and a
  maximum, a sum and a sum of squares) become one pass that reads it once. Refused where an iteration
  of one loop could see what the other did in another iteration: the second reads a value the first
  carries or leaves behind, either reads a value the other assigns without defining it first in each
  iteration, one writes memory the other may touch, the range depends on what the first loop assigns,
  or either loop can leave early.
- `HoistInvariant`: an assignment at the top of a loop's body whose value is the same in every iteration,
  or a load inside one whose pointer, mask and fill are, moves to just before the loop. Refused where
  the loop writes memory the load may read, where the name is assigned elsewhere in the loop or read
  before its assignment, or where it is read outside the loop (a loop that runs zero times would then
  leave it different). A hoisted load runs even when the loop runs zero times: it reads where the loop
  would have read in its first iteration.
Both return None where they find no site.
"""

from __future__ import annotations

import ast
import copy
import random
from dataclasses import dataclass
from typing import ClassVar

from mutators.stoke.moves.ast_edit import AstMove, Kernels, bodies, local_names, pick, tl_function
from mutators.stoke.moves.loop_facts import EXITS, Memory, conflict, defined_first, reads, stores
from mutators.stoke.moves.value_numbering import drop_redundant

_COMPOUND = (ast.For, ast.While, ast.If, ast.With, ast.AsyncFor, ast.AsyncWith, ast.Try)


def _loop(s: ast.stmt, k: Kernels) -> ast.For | None:
    """`s` when it is a ``for name in range(...)`` / ``tl.range`` / ``tl.static_range`` loop with no exit."""
    if not (isinstance(s, ast.For) and isinstance(s.target, ast.Name) and not s.orelse):
        return None
    it = s.iter
    if not isinstance(it, ast.Call):
        return None
    plain = isinstance(it.func, ast.Name) and it.func.id == "range"
    if not (plain or tl_function(it, k) in ("range", "static_range")):
        return None
    return None if any(isinstance(n, EXITS) for n in ast.walk(s)) else s


def _movable(s: ast.stmt, a: ast.For, memory: Memory) -> bool:
    """Whether a simple statement after loop `a` may run before it instead (neither sees the other)."""
    if isinstance(s, _COMPOUND) or memory.accesses(s) != []:
        return False
    assert isinstance(a.target, ast.Name)
    touched = stores(a.body) | {a.target.id}
    return not (reads(s) & touched or stores(s) & (touched | reads(a.body) | reads(a.iter)))


# keywords of `tl.range` that change how a loop is compiled, not the values it walks
_LOOP_HINTS = frozenset({"num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer", "flatten",
                         "warp_specialize"})


def _walk(loop: ast.For) -> str:
    """What a loop's range walks: its arguments, whichever of range / tl.range / tl.static_range it is."""
    assert isinstance(loop.iter, ast.Call)
    kept = [k for k in loop.iter.keywords if k.arg not in _LOOP_HINTS]
    return ast.unparse(ast.Call(func=ast.Name(id="range", ctx=ast.Load()), args=loop.iter.args, keywords=kept))


def _fusable(a: ast.For, b: ast.For, memory: Memory) -> bool:
    assert isinstance(a.target, ast.Name) and isinstance(b.target, ast.Name)
    if _walk(a) != _walk(b):
        return False  # the fused loop keeps the first's range call (and its hints)
    va, vb = a.target.id, b.target.id
    stored_a, stored_b = stores(a.body), stores(b.body)
    if va in stored_a or vb in stored_b:
        return False  # a loop variable reassigned in the body
    if reads(a.iter) & (stored_a | {va}):
        return False  # the second range would be read before the first loop changed it
    if va != vb and va in reads(b.body) | stored_b:
        return False  # the second body already means something else by the first's variable
    # a name one loop assigns and the other reads must be defined first in each iteration of the reader
    if any(not defined_first(b.body, x) for x in (stored_a | {va}) & reads(b.body) - {vb}):
        return False
    if any(not defined_first(a.body, x) for x in (stored_b | {vb}) & reads(a.body) - {va}):
        return False
    # assigned in both: the last value must be the second's in both orders
    if any(not (defined_first(a.body, x) and defined_first(b.body, x)) for x in stored_a & stored_b):
        return False
    acc_a, acc_b = memory.accesses(a.body), memory.accesses(b.body)
    if acc_a is None or acc_b is None:
        return False
    return not any(conflict(x, y) for x in acc_a for y in acc_b)


@dataclass(frozen=True)
class FuseLoops(AstMove):
    """Fuse two loops over the same range (one body list, independent statements between) when no iteration
    of one depends on the other."""

    label: ClassVar[str] = "fuse loops"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        sites = _fusions(k)
        if not sites:
            return None
        body, i, j = pick(rng, sites)
        first, later = body[i], body[j]
        assert isinstance(first, ast.For) and isinstance(first.target, ast.Name)
        assert isinstance(later, ast.For) and isinstance(later.target, ast.Name)
        second = copy.deepcopy(later.body)
        if first.target.id != later.target.id:
            second.insert(0, ast.Assign(targets=[ast.Name(id=later.target.id, ctx=ast.Store())],
                                        value=ast.Name(id=first.target.id, ctx=ast.Load())))
        first.body = first.body + second
        dropped = drop_redundant(first.body)
        between = body[i + 1:j]  # independent of the first loop: they run before it now
        body[i:j + 1] = [*between, first]
        moved = f" ({len(between)} statement(s) between them moved before)" if between else ""
        return f"fused two loops over {ast.unparse(first.iter)}{moved}, {dropped} recomputation(s) dropped"


def _fusions(k: Kernels) -> list[tuple[list[ast.stmt], int, int]]:
    """(body, i, j): `body[i]` and `body[j]` are loops that fuse, the statements between them movable."""
    out: list[tuple[list[ast.stmt], int, int]] = []
    for fn in k.functions:
        memory = Memory(fn, k)
        for body in bodies(Kernels(k.tree, [fn], k.tl_names)):
            for i, s in enumerate(body):
                a = _loop(s, k)
                if a is None:
                    continue
                j = i + 1
                while j < len(body) and _loop(body[j], k) is None and _movable(body[j], a, memory):
                    j += 1
                b = _loop(body[j], k) if j < len(body) else None
                if b is not None and _fusable(a, b, memory):
                    out.append((body, i, j))
    return out


@dataclass(frozen=True)
class _Hoist:
    fn: ast.FunctionDef
    body: list[ast.stmt]  # the list holding the loop
    loop: ast.For
    statement: ast.Assign | None  # a whole assignment moved out, or
    load: ast.Call | None  # a load inside a statement, replaced by a new name


def _invariant(e: ast.expr, loop: ast.For, memory: Memory) -> bool:
    """Whether `e` has the same value in every iteration of `loop` (and computing it earlier is harmless)."""
    if reads(e) & (stores(loop.body) | stores(loop.target)):
        return False
    mine = memory.accesses(e)
    if mine is None or any(a.writes for a in mine):
        return False
    if not mine:
        return True
    theirs = memory.accesses(loop.body)
    return theirs is not None and not any(conflict(m, t) for m in mine for t in theirs)


def _loads_in(s: ast.stmt, k: Kernels) -> list[ast.Call]:
    """The loads a simple statement always runs (not under a conditional expression)."""
    if isinstance(s, _COMPOUND):
        return []
    out: list[ast.Call] = []
    stack: list[ast.AST] = [s]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.IfExp):
            continue
        if isinstance(n, ast.Call) and tl_function(n, k) == "load":
            out.append(n)
            continue
        stack.extend(ast.iter_child_nodes(n))
    return out


def _hoists(k: Kernels) -> list[_Hoist]:
    out: list[_Hoist] = []
    for fn in k.functions:
        memory = Memory(fn, k)
        for body in bodies(Kernels(k.tree, [fn], k.tl_names)):
            for s in body:
                loop = _loop(s, k)
                if loop is None:
                    continue
                inside = {id(n) for n in ast.walk(loop)}
                outside = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                           and id(n) not in inside}
                for j, st in enumerate(loop.body):
                    if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                            and not isinstance(st.value, (ast.Name, ast.Constant))):
                        x = st.targets[0].id
                        once = sum(isinstance(n, ast.Name) and n.id == x and isinstance(n.ctx, ast.Store)
                                   for n in ast.walk(loop)) == 1
                        if (once and x not in reads(loop.body[:j]) and x not in outside
                                and _invariant(st.value, loop, memory)):
                            out.append(_Hoist(fn, body, loop, st, None))
                            continue
                    # the statement stays (its name is needed outside, or reassigned): its loads may still go
                    out += [_Hoist(fn, body, loop, None, load) for load in _loads_in(st, k)
                            if _invariant(load, loop, memory)]
    return out


def _replace(root: ast.AST, old: ast.AST, new: ast.expr) -> None:
    for parent in ast.walk(root):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    if v is old:
                        value[i] = new


@dataclass(frozen=True)
class HoistInvariant(AstMove):
    """Move one loop-invariant assignment, or one loop-invariant load, to just before its loop."""

    label: ClassVar[str] = "hoist invariant"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        sites = _hoists(k)
        if not sites:
            return None
        site = pick(rng, sites)
        at = next(i for i, s in enumerate(site.body) if s is site.loop)
        if site.statement is not None:
            site.loop.body.remove(site.statement)
            if not site.loop.body:
                site.loop.body.append(ast.Pass())
            moved: ast.stmt = site.statement
        else:
            assert site.load is not None
            taken = set(local_names(site.fn))
            name = next(f"hoisted{i}" for i in range(len(taken) + 1) if f"hoisted{i}" not in taken)
            moved = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=site.load)
            _replace(site.loop, site.load, ast.Name(id=name, ctx=ast.Load()))
        site.body.insert(at, ast.fix_missing_locations(moved))
        shown = ast.unparse(moved).splitlines()[0][:60]
        return f"hoisted '{shown}' out of the loop over {ast.unparse(site.loop.iter)}"
