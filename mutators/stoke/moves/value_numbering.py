"""Local value numbering over one straight-line statement list: finds recomputations of a value a
name already holds (the same load again, the same offsets again), which structural moves delete.

Two expressions are the same value when their text is equal after every name defined earlier in
the list is replaced by the value it holds. Loads are values only until the next statement that may
write memory (a store, an atomic, a barrier, a call to another function): after one, a load read
again is a new value. Compound statements (loops, branches) make the names they assign unknown.
"""

from __future__ import annotations

import ast
import copy
import itertools
from dataclasses import dataclass, field

from evo.contracts.syntax import parse_expression

# calls that write memory or order threads: values read from memory do not survive them
_EFFECTS = frozenset({"store", "debug_barrier", "device_print", "device_assert", "inline_asm_elementwise"})
PURE_BUILTINS = frozenset({"float", "int", "bool", "min", "max", "abs", "len", "range"})
_MAX_TEXT = 4000  # a longer value is given an opaque name instead (chains of updates grow quickly)


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def writes_memory(node: ast.AST) -> bool:
    """Whether `node` may write memory (a store, an atomic, a barrier, a call to a plain function) or
    reads what others write (a volatile load)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            name = _called(n)
            volatile = name == "load" and any(
                kw.arg == "volatile" and not (isinstance(kw.value, ast.Constant) and not kw.value.value)
                for kw in n.keywords)  # a volatile load waits on other programs' writes: never reused
            if volatile or name in _EFFECTS or name.startswith("atomic") or (
                    isinstance(n.func, ast.Name) and name not in PURE_BUILTINS):
                return True
    return False


def reads_memory(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _called(n) == "load" for n in ast.walk(node))


def stored_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


@dataclass
class Values:
    """What each name defined so far holds: its value's text, and whether that value was read from memory."""

    text: dict[str, str] = field(default_factory=dict)
    from_memory: set[str] = field(default_factory=set)
    fresh: itertools.count[int] = field(default_factory=itertools.count)

    def of(self, expr: ast.expr) -> str | None:
        """The text of `expr`'s value, names replaced by the values they hold (None: not readable)."""
        tree = copy.deepcopy(expr)
        marks: dict[str, str] = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and n.id in self.text:
                mark = f"__value{len(marks)}__"
                marks[mark] = self.text[n.id]
                n.id = mark
        out = ast.unparse(tree)
        for mark, text in marks.items():
            out = out.replace(mark, f"({text})")
        try:
            return ast.unparse(parse_expression(out))  # one spelling: redundant parentheses dropped
        except (SyntaxError, ValueError):
            return None

    def holder(self, text: str) -> str | None:
        return next((name for name, t in self.text.items() if t == text), None)

    def assign(self, name: str, text: str | None, memory: bool) -> None:
        if text is None or len(text) > _MAX_TEXT:
            text = f"__unknown{next(self.fresh)}_{name}__"  # unknown: equal to nothing else
        self.text[name] = text
        self.from_memory.discard(name)
        if memory:
            self.from_memory.add(name)

    def forget_memory(self) -> None:
        for name in list(self.from_memory):
            self.assign(name, None, False)


def redundant(stmts: list[ast.stmt]) -> list[int]:
    """Indices of the assignments ``v = e`` in `stmts` where `v` already holds the value of `e`."""
    values = Values()
    out: list[int] = []
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            name = s.targets[0].id
            if writes_memory(s.value):
                values.forget_memory()
                values.assign(name, None, False)
                continue
            text = values.of(s.value)
            if text is not None and values.text.get(name) == text:
                out.append(i)
                continue
            values.assign(name, text, reads_memory(s.value))
        elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and not writes_memory(s.value):
            name = s.target.id
            update = ast.BinOp(ast.Name(id=name, ctx=ast.Load()), s.op, s.value)
            values.assign(name, values.of(update), reads_memory(s.value) or name in values.from_memory)
        else:
            if writes_memory(s):
                values.forget_memory()
            for name in sorted(stored_names(s)):
                values.assign(name, None, False)
    return out


def drop_redundant(stmts: list[ast.stmt]) -> int:
    """Delete the redundant assignments of `stmts` in place (a list left empty gets `pass`); how many."""
    gone = redundant(stmts)
    for i in reversed(gone):
        del stmts[i]
    if not stmts:
        stmts.append(ast.Pass())
    return len(gone)
