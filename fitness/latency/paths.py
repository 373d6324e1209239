"""Programs that take another path: strata of a launch's grid by the path each program takes, for the
latency model's sample (`fitness.latency.sampling`).

The model interprets a sample of a launch's programs and scales what they did to the grid. A program that
does far more work than the others (``if row % 64 == 37:`` a loop of 400 extra loads) is missed by a
uniform sample most of the time, and the kernel is modelled as fast as one without it. So the sample is
stratified by path too: each ``if``/``while`` test and conditional expression of a launched kernel, and the
trip count of each ``for`` loop (to a power of two), that turns on the program id along one axis and
otherwise only on the launch's scalar arguments, literals and the grid is evaluated for every program along
that axis (`fitness.check.change_points`); programs with the same outcomes form a stratum, every stratum
gets a sampled program (the smallest first, up to `MAX_STRATA`), and the samples of a stratum stand for its
programs. Paths that turn on data, on a loop's variable or on two axes at once are not followed: work that
only some data takes is sampled as the data falls.
"""

from __future__ import annotations

import ast
import inspect
import random
import textwrap
from collections import defaultdict
from typing import Any

import numpy as np

from evo.contracts.syntax import parse_expression, parse_module
from fitness.check.bound_names import bound_once, inline
from fitness.check.change_points import DOMAIN, values
from fitness.latency.sampling import Pid

MAX_STRATA = 32  # strata per axis given a sample of their own, the smallest first
_PID = "__evo_pid{}__"


def kernel_tree(fn: Any) -> ast.FunctionDef | None:
    """The definition of the Python function `fn` (a kernel's), or None where its source cannot be read."""
    try:
        tree = parse_module(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, ast.FunctionDef) else None


def path_labels(fn: ast.FunctionDef, args: dict[str, Any], grid: Pid) -> dict[int, np.ndarray]:
    """Per axis of `grid` along which programs take different paths (see the module docstring): the stratum
    of each index along it (0, 1, ...). `args`: the launch's arguments by name (its integers are read)."""
    names = {k: v for k, v in args.items() if isinstance(v, int) and not isinstance(v, bool)}
    once = bound_once(fn)
    found: dict[int, list[np.ndarray]] = defaultdict(list)
    for e, trips in _turning(fn):
        e = _placed(inline(e, once), grid)
        axes = {a for a in range(3) if any(isinstance(n, ast.Name) and n.id == _PID.format(a) for n in ast.walk(e))}
        if len(axes) != 1:
            continue
        axis = axes.pop()
        if not 2 <= grid[axis] <= DOMAIN:  # past the evaluator's domain: sampled as before
            continue
        got = values(e, names, first=grid[axis])
        if got is None or got[1] != _PID.format(axis):
            continue
        v = got[0]
        if trips:  # by powers of two: a loop whose trips grow with the program id is not a stratum per program
            v = np.where(v > 0, np.floor(np.log2(np.maximum(v, 1))).astype(np.int64) + 1, 0)
        found[axis].append(np.asarray(v))
    out: dict[int, np.ndarray] = {}
    for axis, arrays in found.items():
        _, label = np.unique(np.stack(arrays, axis=1), axis=0, return_inverse=True)
        if label.max() > 0:
            out[axis] = label.reshape(-1).astype(np.int64)
    return out


def with_strata(samples: list[Pid], labels: dict[int, np.ndarray], rng: random.Random) -> list[Pid]:
    """`samples` and, for each stratum along each axis of `labels` that none of them is in (the smallest
    first, up to `MAX_STRATA`), a program drawn inside it (at a sample's indices along the other axes)."""
    out = list(samples)
    for axis, label in labels.items():
        have = {int(label[p[axis]]) for p in out}
        counts = np.bincount(label)
        missing = sorted((int(n), s) for s, n in enumerate(counts) if n and s not in have)[:MAX_STRATA]
        for _, s in missing:
            index = int(rng.choice(np.flatnonzero(label == s).tolist()))
            base = list(out[rng.randrange(len(out))]) if out else [0, 0, 0]
            base[axis] = index
            p = (base[0], base[1], base[2])
            if p not in out:
                out.append(p)
    return out


def stratified(scales: dict[Pid, float], labels: dict[int, np.ndarray]) -> dict[Pid, float]:
    """`scales` (how many programs each sample stands for) reweighted so that the samples in each stratum of
    `labels` stand for its share of the programs (strata without a sample are shared among those with one)."""
    out = dict(scales)
    for axis, label in labels.items():
        total = sum(out.values())
        weight: dict[int, float] = defaultdict(float)
        for p, s in out.items():
            weight[int(label[p[axis]])] += s
        counts = np.bincount(label)
        covered = sum(int(counts[s]) for s, w in weight.items() if w > 0)
        for p in out:
            s = int(label[p[axis]])
            if weight[s] > 0:
                out[p] *= (counts[s] / covered) * total / weight[s]
    return out


def _turning(fn: ast.FunctionDef) -> list[tuple[ast.expr, bool]]:
    """(expression, whether it is a loop's trip count) for each test and loop range of `fn`."""
    out: list[tuple[ast.expr, bool]] = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            out.append((node.test, False))
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
                ast.unparse(node.iter.func).rsplit(".", 1)[-1] in ("range", "static_range"):
            args = node.iter.args
            if not 1 <= len(args) <= 3:
                continue
            lo, hi, step = (ast.Constant(0), args[0], ast.Constant(1)) if len(args) == 1 else (
                args[0], args[1], args[2] if len(args) == 3 else ast.Constant(1))
            a, b, c = (ast.unparse(x) for x in (lo, hi, step))
            text = f"max(0, (({b}) - ({a}) + ({c}) - 1) // ({c}))"
            out.append((parse_expression(text).body, True))
    return out


def _placed(e: ast.expr, grid: Pid) -> ast.expr:
    """`e` with ``tl.program_id(a)`` as a name of its own per axis and ``tl.num_programs(a)`` as the grid's."""

    class _Place(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.expr:
            name = ast.unparse(node.func).rsplit(".", 1)[-1]
            axis = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "axis"), None)
            if name in ("program_id", "num_programs") and isinstance(axis, ast.Constant) \
                    and isinstance(axis.value, int) and axis.value in (0, 1, 2):
                a = axis.value
                return ast.Name(_PID.format(a), ast.Load()) if name == "program_id" else ast.Constant(grid[a])
            self.generic_visit(node)
            return node

    out = _Place().visit(parse_expression(ast.unparse(e)).body)
    assert isinstance(out, ast.expr)
    return out
