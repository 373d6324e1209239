"""STOKE moves that change a kernel's structure and keep its meaning: changes no SPACE sweep makes.

- `SingleBlock`: when a block parameter may cover a loop's whole extent, branch on it at run time:
  ``if (0 < n) & (n <= BLOCK):`` runs the loops of a run over that extent once each, as straight
  code, and drops what a later pass recomputes (the row loaded again by a second and third pass);
  ``else:`` keeps the loops as they were. On softmax and layer norm this is "one pass over the row
  instead of three" whenever the row fits one block.
- `ReuseValue`: in one straight-line body, delete an assignment that recomputes the value its name
  already holds (see `mutators.stoke.moves.value_numbering`).
Both return None where they find no site.
"""

from __future__ import annotations

import ast
import copy
import random
from dataclasses import dataclass
from typing import ClassVar

from mutators.stoke.moves.ast_edit import AstMove, Kernels, bodies, pick
from mutators.stoke.moves.loop_facts import EXITS, constexprs
from mutators.stoke.moves.value_numbering import drop_redundant, redundant, stored_names


@dataclass(frozen=True)
class _Run:
    """Statements ``body[first:last + 1]`` whose loops (at `loops`) all walk `range(start, stop, step)`."""

    body: list[ast.stmt]
    first: int
    last: int
    loops: tuple[int, ...]
    start: ast.expr
    stop: ast.expr
    step: str


def _range_of(s: ast.stmt, k: Kernels, blocks: set[str]) -> tuple[str, ast.expr, ast.expr, str] | None:
    """(key, start, stop, step) of ``for v in range(start, stop, BLOCK)`` with BLOCK a constexpr, else None."""
    if not (isinstance(s, ast.For) and isinstance(s.target, ast.Name) and not s.orelse):
        return None
    it = s.iter
    if not (isinstance(it, ast.Call) and len(it.args) == 3 and not it.keywords):
        return None
    f = it.func
    plain = isinstance(f, ast.Name) and f.id == "range"
    tl_range = isinstance(f, ast.Attribute) and f.attr == "range" and isinstance(f.value, ast.Name) and (
        f.value.id in k.tl_names)
    start, stop, step = it.args
    if not (plain or tl_range) or not (isinstance(step, ast.Name) and step.id in blocks):
        return None
    if any(isinstance(n, EXITS) for n in ast.walk(s)):
        return None
    return f"{ast.unparse(start)}|{ast.unparse(stop)}|{step.id}", start, stop, step.id


def _condition(start: ast.expr, stop: ast.expr, step: str) -> ast.expr:
    """``(start < stop) & (stop - start <= step)``: the loop runs exactly once (``0 < stop`` when start is 0)."""
    zero = isinstance(start, ast.Constant) and start.value == 0
    span = copy.deepcopy(stop) if zero else ast.BinOp(copy.deepcopy(stop), ast.Sub(), copy.deepcopy(start))
    runs = ast.Compare(copy.deepcopy(start), [ast.Lt()], [copy.deepcopy(stop)])
    fits = ast.Compare(span, [ast.LtE()], [ast.Name(id=step, ctx=ast.Load())])
    return ast.BinOp(runs, ast.BitAnd(), fits)


def _specialized_already(k: Kernels) -> set[int]:
    """ids of the bodies that are the `else` of a branch this move wrote (not specialized twice)."""
    out: set[int] = set()
    for fn in k.functions:
        for n in ast.walk(fn):
            if isinstance(n, ast.If) and n.orelse and isinstance(n.orelse[0], ast.For):
                key = _range_of(n.orelse[0], k, constexprs(fn))
                if key is not None and ast.unparse(n.test) == ast.unparse(_condition(*key[1:])):
                    out.add(id(n.orelse))
    return out


def _runs(k: Kernels) -> list[_Run]:
    done = _specialized_already(k)
    out: list[_Run] = []
    for fn in k.functions:
        blocks = constexprs(fn)
        lists = [b for b in bodies(Kernels(k.tree, [fn], k.tl_names)) if id(b) not in done]
        for body in lists:
            groups: dict[str, list[int]] = {}
            ranges: dict[str, tuple[ast.expr, ast.expr, str]] = {}
            for i, s in enumerate(body):
                found = _range_of(s, k, blocks)
                if found is not None:
                    groups.setdefault(found[0], []).append(i)
                    ranges[found[0]] = found[1:]
            for key, loops in groups.items():
                start, stop, step = ranges[key]
                used = {n.id for e in (start, stop) for n in ast.walk(e) if isinstance(n, ast.Name)} | {step}
                # the extent must not change inside the run, else one test cannot speak for every loop
                if used & set().union(*(stored_names(s) for s in body[loops[0]:loops[-1] + 1])):
                    loops = [i for i in loops if not used & stored_names(body[i])][:1]
                if loops:
                    out.append(_Run(body, loops[0], loops[-1], tuple(loops), start, stop, step))
    return out


@dataclass(frozen=True)
class SingleBlock(AstMove):
    """Branch on one block covering a loop's whole extent: the loops of the run as straight code (their
    recomputations dropped) when it does, the loops as they were when it does not."""

    label: ClassVar[str] = "single block"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        runs = _runs(k)
        if not runs:
            return None
        run = pick(rng, runs)
        original = run.body[run.first:run.last + 1]
        straight: list[ast.stmt] = []
        for i, s in enumerate(original, start=run.first):
            if i in run.loops:
                assert isinstance(s, ast.For) and isinstance(s.target, ast.Name)
                straight.append(ast.Assign(targets=[ast.Name(id=s.target.id, ctx=ast.Store())],
                                           value=copy.deepcopy(run.start)))
                straight += copy.deepcopy(s.body)
            else:
                straight.append(copy.deepcopy(s))
        dropped = drop_redundant(straight)
        test = _condition(run.start, run.stop, run.step)
        run.body[run.first:run.last + 1] = [ast.If(test=test, body=straight, orelse=original)]
        return (f"if {ast.unparse(test)}: {len(run.loops)} loop(s) as one block, "
                f"{dropped} recomputation(s) dropped")


@dataclass(frozen=True)
class ReuseValue(AstMove):
    """Delete the assignments of one body that recompute the value their name already holds."""

    label: ClassVar[str] = "reuse value"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        sites = [b for b in bodies(k) if redundant(b)]
        if not sites:
            return None
        body = pick(rng, sites)
        shown = ast.unparse(body[redundant(body)[0]]).splitlines()[0][:60]
        n = drop_redundant(body)
        return f"dropped {n} recomputation(s), first '{shown}'"
