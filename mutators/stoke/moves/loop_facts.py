"""What the loop moves need to know about a kernel's names and memory, read from its AST.

Names: which a subtree reads and stores, and whether a statement list defines a name before it reads
it (a per-iteration local, which no other iteration or loop sees).

Memory: every load, store and atomic with the kernel parameter its pointer is rooted in. The root is
the one non-constexpr parameter among the additive terms of the pointer, followed through the local
names it was built from (``x_row = x_ptr + row * stride`` then ``tl.load(x_row + offs)`` is rooted in
``x_ptr``). A parameter the kernel reassigns also has the roots of what it is assigned, and both
sides of a difference count. Two accesses may touch the same memory unless both have a root and the roots
differ; a write that nothing can attribute (a barrier, a print, inline assembly, a call to another
function) makes the whole subtree unknown. Roots trust that `launch` passes different tensors to different
parameters; where it does not, the equivalence check is what finds out.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from mutators.stoke.moves.ast_edit import Kernels, tl_function
from mutators.stoke.moves.value_numbering import PURE_BUILTINS, stored_names

_UNKNOWN_EFFECTS = frozenset({"debug_barrier", "device_print", "device_assert", "inline_asm_elementwise"})
EXITS = (ast.Break, ast.Continue, ast.Return)


def reads(node: ast.AST | list[ast.stmt]) -> set[str]:
    """Names a subtree (or statement list) reads; an augmented assignment reads its target."""
    nodes = node if isinstance(node, list) else [node]
    out: set[str] = set()
    for top in nodes:
        for n in ast.walk(top):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                out.add(n.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                out.add(n.target.id)
    return out


def stores(node: ast.AST | list[ast.stmt]) -> set[str]:
    nodes = node if isinstance(node, list) else [node]
    return set().union(*(stored_names(n) for n in nodes))


def defined_first(body: list[ast.stmt], name: str) -> bool:
    """Whether every iteration of `body` assigns `name` (a plain top-level assignment) before reading it."""
    for s in body:
        if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                and s.targets[0].id == name):
            return name not in reads(s.value)
        if name in reads(s) or name in stores(s):
            return False
    return True


def constexprs(fn: ast.FunctionDef) -> set[str]:
    return {a.arg for a in fn.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}


@dataclass(frozen=True)
class Access:
    """One memory access: whether it writes, and the parameter its pointer is rooted in (None: unknown)."""

    writes: bool
    root: str | None


def conflict(a: Access, b: Access) -> bool:
    """Whether the two accesses may touch the same memory with at least one of them writing."""
    return (a.writes or b.writes) and (a.root is None or b.root is None or a.root == b.root)


class Memory:
    """The memory accesses of one kernel function, their pointers followed to a parameter."""

    def __init__(self, fn: ast.FunctionDef, k: Kernels) -> None:
        self.k = k
        self.params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]} - constexprs(fn)
        self.values: dict[str, list[ast.expr]] = {}
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    for name in stored_names(t):
                        # a plain `p = e` is followed; a tuple unpacking is not (its part is unknown)
                        plain = isinstance(t, ast.Name)
                        self.values.setdefault(name, []).append(n.value if plain else ast.Constant(None))
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                self.values.setdefault(n.target.id, []).append(n.value)

    def accesses(self, node: ast.AST | list[ast.stmt]) -> list[Access] | None:
        """The accesses inside a subtree, or None when it has an effect no access explains."""
        nodes = node if isinstance(node, list) else [node]
        out: list[Access] = []
        for n in (n for top in nodes for n in ast.walk(top)):
            if not isinstance(n, ast.Call):
                continue
            name = tl_function(n, self.k)
            if name in _UNKNOWN_EFFECTS or (isinstance(n.func, ast.Name) and n.func.id not in PURE_BUILTINS):
                return None
            if name == "load" or name == "store" or (name or "").startswith("atomic"):
                pointer = n.args[0] if n.args else next((kw.value for kw in n.keywords if kw.arg == "pointer"), None)
                volatile = any(kw.arg == "volatile" and not (isinstance(kw.value, ast.Constant) and not kw.value.value)
                               for kw in n.keywords)  # reads what other programs write: ordered like a write
                root = None if pointer is None else self.root(pointer)
                out.append(Access(writes=name != "load" or volatile, root=root))
        return out

    def root(self, pointer: ast.expr) -> str | None:
        found = self._roots(pointer, set())
        return found.pop() if found is not None and len(found) == 1 else None

    def _roots(self, e: ast.expr, seen: set[str]) -> set[str] | None:
        """Parameters among the additive terms of `e`, through local names; None where a term cannot be read."""
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            left = self._roots(e.left, seen)
            right = self._roots(e.right, seen)  # `x_ptr - (x_ptr - out_ptr)` is out_ptr's memory
            return None if left is None or right is None else left | right
        if isinstance(e, ast.Subscript):  # ptrs[:, None]: the same pointers, broadcast
            return self._roots(e.value, seen)
        if isinstance(e, ast.Name):
            if e.id in seen:
                return set()
            # a parameter is its own root, and also that of whatever the kernel assigns to it
            # (`x_ptr += row * stride` keeps x_ptr; `x_ptr = out_ptr` makes it either)
            out: set[str] = {e.id} if e.id in self.params else set()
            for value in self.values.get(e.id, []):
                if isinstance(value, ast.Constant) and value.value is None:
                    return None
                found = self._roots(value, seen | {e.id})
                if found is None:
                    return None
                out |= found
            return out
        return set()  # a product, a call, a constant: an offset, not a base
