"""Names a kernel binds once, read through: ``bad = rows // 5000`` then ``bad > 0`` is ``rows // 5000 > 0``
(`fitness.check.crossings`, `fitness.latency.paths`)."""

from __future__ import annotations

import ast
import copy


def bound_once(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    """The local names of `fn` bound exactly once, by ``name = value`` (or ``a, b = x.shape``), with their
    value: a condition or value reading them is read through them (``bad = rows // 5000`` then ``bad > 0``
    is ``rows // 5000 > 0``)."""
    stores: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            stores[node.arg] = stores.get(node.arg, 0) + 2  # a parameter is bound by every call
    out: dict[str, ast.expr] = {}
    for s in ast.walk(fn):
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
            continue
        t = s.targets[0]
        if isinstance(t, ast.Name) and stores.get(t.id) == 1:
            out[t.id] = s.value
        elif isinstance(t, ast.Tuple) and isinstance(s.value, ast.Attribute) and s.value.attr == "shape":
            for i, e in enumerate(t.elts):
                if isinstance(e, ast.Name) and stores.get(e.id) == 1:
                    out[e.id] = ast.Subscript(s.value, ast.Constant(i), ast.Load())
    return out


def inline(node: ast.expr, once: dict[str, ast.expr], depth: int = 8) -> ast.expr:
    """`node` with each name bound once replaced by its value (to `depth` levels); a new tree."""
    read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in once}
    return replace_names(node, {name: inline(once[name], once, depth - 1) for name in read} if depth else {})


def replace_names(node: ast.expr, mapping: dict[str, ast.expr]) -> ast.expr:
    """`node` with each name in `mapping` replaced by its expression (not read further); a new tree."""

    class _Replace(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name) -> ast.expr:
            value = mapping.get(name.id)
            return copy.deepcopy(value) if value is not None and isinstance(name.ctx, ast.Load) else name

    return _Replace().visit(copy.deepcopy(node))
