"""STOKE moves on the code itself: meta-parameters, statements, operands and operations.

Each move is a frozen value; `apply` works on a copy and returns None where it finds no site.
"""

from __future__ import annotations

import ast
import copy
import math
import random
from dataclasses import dataclass
from typing import ClassVar

from evo.contracts.candidate import Candidate, CandidateError
from mutators.stoke.moves.ast_edit import (
    Applied,
    AstMove,
    Kernels,
    Move,
    bodies,
    local_names,
    owner,
    pick,
    slots,
    tl_call,
    tl_function,
)

# Without a SPACE, doubling stops at these bounds (the hardware's and Triton's limits).
_PARAM_LIMITS = {"num_warps": 32, "num_stages": 8}
_DEFAULT_LIMIT = 1 << 16


def _shown(node: ast.AST, width: int = 48) -> str:
    text = (ast.unparse(node).splitlines() or [""])[0]
    return text if len(text) <= width else text[: width - 3] + "..."


def next_value(key: str, value: int, values: list[object] | None, up: bool) -> int | None:
    """x2 (or /2) within `values` when given (the next listed value that way when the double is
    not listed, so num_stages [1..5] steps by one), else plain doubling/halving within bounds."""
    if values:
        numeric = sorted({v for v in values if isinstance(v, int) and not isinstance(v, bool)})
        target = value * 2 if up else value // 2
        if target in numeric and target != value:
            return target
        beyond = [v for v in numeric if (v > value if up else v < value)]
        if not beyond:
            return None
        return beyond[0] if up else beyond[-1]
    new = value * 2 if up else value // 2
    if new < 1 or new == value or new > _PARAM_LIMITS.get(key, _DEFAULT_LIMIT):
        return None
    return new


@dataclass(frozen=True)
class ScaleParam(Move):
    """Meta-parameter x2 or /2 (BLOCK sizes, num_warps, num_stages...), within SPACE if given."""

    up: bool

    @property
    def name(self) -> str:
        return "param x2" if self.up else "param /2"

    def apply(self, candidate: Candidate, rng: random.Random) -> Applied | None:
        try:
            space = candidate.space()
        except CandidateError:
            space = {}
        options = []
        for key, value in sorted(candidate.params.items()):
            if isinstance(value, int) and not isinstance(value, bool):
                new = next_value(key, value, space.get(key), self.up)  # type: ignore[arg-type]
                if new is not None:
                    options.append((key, value, new))
        if not options:
            return None
        key, old, new = pick(rng, options)
        return Applied(candidate.with_params(**{key: new}), f"{key} {old}->{new}")


@dataclass(frozen=True)
class SwapStatements(AstMove):
    """Swap two adjacent statements of a kernel body."""

    label: ClassVar[str] = "swap statements"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        options = [(b, i) for b in bodies(k) for i in range(len(b) - 1)
                   if ast.dump(b[i]) != ast.dump(b[i + 1])]
        if not options:
            return None
        body, i = pick(rng, options)
        body[i], body[i + 1] = body[i + 1], body[i]
        return f"swapped '{_shown(body[i + 1])}' and '{_shown(body[i])}'"


@dataclass(frozen=True)
class DeleteStatement(AstMove):
    """Delete one statement (a lone statement becomes `pass`)."""

    label: ClassVar[str] = "delete statement"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        options = [(b, i) for b in bodies(k) for i in range(len(b)) if not isinstance(b[i], ast.Pass)]
        if not options:
            return None
        body, i = pick(rng, options)
        shown = _shown(body[i])
        if len(body) == 1:
            body[0] = ast.Pass()
        else:
            del body[i]
        return f"deleted '{shown}'"


@dataclass(frozen=True)
class DuplicateStatement(AstMove):
    """Duplicate one statement in place (STOKE's copy move)."""

    label: ClassVar[str] = "duplicate statement"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        options = [(b, i) for b in bodies(k) for i in range(len(b))
                   if not isinstance(b[i], (ast.Return, ast.Pass))]
        if not options:
            return None
        body, i = pick(rng, options)
        body.insert(i + 1, copy.deepcopy(body[i]))
        return f"duplicated '{_shown(body[i])}'"


_CONSTANTS: tuple[int | float, ...] = (0, 1, 2, 0.0, 1.0)


def _finite_number(n: ast.AST) -> bool:
    return isinstance(n, ast.Constant) and type(n.value) in (int, float) and math.isfinite(n.value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ReplaceOperand(AstMove):
    """Replace an operand (a name or numeric constant) with another in-scope name or constant."""

    label: ClassVar[str] = "replace operand"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        sites = []
        for s in slots(k):
            n = s.node
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in k.tl_names:
                if not (isinstance(s.parent, ast.Attribute) or (isinstance(s.parent, ast.Call) and s.field == "func")):
                    sites.append(s)
            elif _finite_number(n):
                sites.append(s)
        if not sites:
            return None
        site = pick(rng, sites)
        fn = owner(k, site.node)
        constants = list(dict.fromkeys([*_CONSTANTS, *(
            n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and _finite_number(n))]))
        options: list[ast.expr] = [ast.Name(id=x, ctx=ast.Load()) for x in local_names(fn) if x not in k.tl_names]
        options += [ast.Constant(value=c) for c in constants]
        old = ast.unparse(site.node)
        options = [o for o in options if ast.unparse(o) != old or type(getattr(o, "value", None)) is not type(
            getattr(site.node, "value", None))]
        if not options:
            return None
        new = pick(rng, options)
        site.replace(new)
        return f"{old} -> {ast.unparse(new)}"


LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
REWRITES = ("exp->exp2", "exp2->exp", "fma", "unfma", "div->mul-recip", "mul-recip->div")


def _is_recip(node: ast.AST) -> bool:
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.left, ast.Constant)
            and node.left.value in (1, 1.0))


@dataclass(frozen=True)
class Rewrite(AstMove):
    """Replace an operation with an equivalent one: exp <-> exp2 (scaled by log2 e), a*b+c <-> fma,
    a / b <-> a * (1 / b)."""

    rewrite: str

    def __post_init__(self) -> None:
        if self.rewrite not in REWRITES:
            raise ValueError(f"unknown rewrite {self.rewrite!r}; valid: {', '.join(REWRITES)}")

    @property
    def name(self) -> str:
        return self.rewrite

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        tl = sorted(k.tl_names)[0]
        sites = [s for s in slots(k) if self._matches(s.node, k)]
        if not sites:
            return None
        site = pick(rng, sites)
        old = _shown(site.node)
        # the old node's place: fma of `a += x * y` makes an Assign, and `ast.unparse` reads an assignment's line
        new = ast.copy_location(self._rewritten(site.node, tl), site.node)
        site.replace(new)
        return f"'{old}' -> '{_shown(new)}'"

    def _matches(self, n: ast.AST, k: Kernels) -> bool:
        r = self.rewrite
        if r in ("exp->exp2", "exp2->exp"):
            return tl_function(n, k) == r.split("->")[0] and len(n.args) == 1  # type: ignore[attr-defined]
        if r == "fma":
            if isinstance(n, ast.AugAssign):
                return isinstance(n.op, ast.Add) and isinstance(n.target, ast.Name) and _is_mult(n.value)
            return isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and (_is_mult(n.left) or _is_mult(n.right))
        if r == "unfma":
            return tl_function(n, k) == "fma" and len(n.args) == 3  # type: ignore[attr-defined]
        if r == "div->mul-recip":
            return isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and not _is_recip(n)
        return isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and _is_recip(n.right)

    def _rewritten(self, n: ast.AST, tl: str) -> ast.AST:
        r = self.rewrite
        if r in ("exp->exp2", "exp2->exp"):
            assert isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            n.func.attr = r.split("->")[1]
            n.args[0] = ast.BinOp(n.args[0], ast.Mult(), ast.Constant(LOG2E if r == "exp->exp2" else LN2))
            return n
        if r == "fma":
            if isinstance(n, ast.AugAssign):
                assert isinstance(n.value, ast.BinOp) and isinstance(n.target, ast.Name)
                acc = ast.Name(id=n.target.id, ctx=ast.Load())
                return ast.Assign(targets=[n.target], value=tl_call("fma", [n.value.left, n.value.right, acc], tl=tl))
            assert isinstance(n, ast.BinOp)
            prod, other = (n.left, n.right) if _is_mult(n.left) else (n.right, n.left)
            assert isinstance(prod, ast.BinOp)
            return tl_call("fma", [prod.left, prod.right, other], tl=tl)
        if r == "unfma":
            assert isinstance(n, ast.Call)
            a, b, c = n.args
            return ast.BinOp(ast.BinOp(a, ast.Mult(), b), ast.Add(), c)
        assert isinstance(n, ast.BinOp)
        if r == "div->mul-recip":
            return ast.BinOp(n.left, ast.Mult(), ast.BinOp(ast.Constant(1.0), ast.Div(), n.right))
        assert isinstance(n.right, ast.BinOp)
        return ast.BinOp(n.left, ast.Div(), n.right.right)


def _is_mult(node: ast.AST) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)


_NEAR: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
}


@dataclass(frozen=True)
class NearOp(AstMove):
    """Replace an operator with a near one (+ <-> -, * <-> /, < <-> <=, & <-> |): STOKE's opcode move."""

    label: ClassVar[str] = "near operator"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        sites: list[tuple[ast.AST, int]] = []
        for s in slots(k):
            n = s.node
            if isinstance(n, (ast.BinOp, ast.AugAssign)) and type(n.op) in _NEAR:
                sites.append((n, -1))
            elif isinstance(n, ast.Compare):
                sites += [(n, i) for i, op in enumerate(n.ops) if type(op) in _NEAR]
        if not sites:
            return None
        node, i = pick(rng, sites)
        old = _shown(node)
        if isinstance(node, ast.Compare):
            node.ops[i] = _NEAR[type(node.ops[i])]()
        else:
            assert isinstance(node, (ast.BinOp, ast.AugAssign))
            node.op = _NEAR[type(node.op)]()
        return f"'{old}' -> '{_shown(node)}'"
