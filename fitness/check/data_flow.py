"""Which names of a kernel hold values read from memory (`fitness.check.data_values`,
`fitness.check.coverage`): the data its comparisons may test, as opposed to indices and sizes.

A name is data when it is bound to a load (or an atomic, which returns what memory held) or to anything
computed from data; a device function's parameters count (what a kernel passes it may be data). Data is
*direct* when it reaches the name other than through a reduction (``tl.sum``, ``tl.max``, ``tl.dot``,
...): ``x - tl.max(x, axis=0)`` is direct, a row's sum is not. A comparison of direct data turns on values
an input can hold; one of a sum turns on what many inputs add up to.
"""

from __future__ import annotations

import ast

MEMORY = frozenset({"load", "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
                    "atomic_xchg", "atomic_xor", "load_tensor_descriptor", "gather"})
REDUCTIONS = frozenset({"sum", "max", "min", "reduce", "dot", "dot_scaled", "cumsum", "cumprod", "argmax", "argmin",
                        "xor_sum", "sort", "histogram", "associative_scan", "reduce_or", "topk"})


def call_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def reads(e: ast.expr, data: set[str], *, direct: bool = False) -> bool:
    """`e` reads memory, or a name in `data`; with `direct`, other than inside a reduction."""
    if isinstance(e, ast.Name):
        return e.id in data
    if isinstance(e, ast.Call):
        name = call_name(e.func)
        if name in MEMORY:
            return True
        if direct and name in REDUCTIONS:
            return False
    return any(reads(c, data, direct=direct) for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr))


def launched(tree: ast.Module, name: str) -> bool:
    """Whether function `name` is launched (``name[grid](...)``) rather than called from a kernel."""
    return any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name
               for n in ast.walk(tree))


def data_names(fn: ast.FunctionDef, *, is_launched: bool, direct: bool = False) -> set[str]:
    """The names in `fn` bound to data (with `direct`, to direct data: see the module docstring)."""
    data = set() if is_launched else {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    while True:
        more = set()
        for node in ast.walk(fn):
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                targets, value = [node.target], node.value
            if value is not None and reads(value, data, direct=direct):
                more |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)} - data
        if not more:
            return data
        data |= more
