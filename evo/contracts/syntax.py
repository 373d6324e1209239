"""Python source to an AST, safely from several threads: `ast.parse` behind one lock per process.

CPython 3.11's AST constructor counts its recursion depth in state every thread shares, so two threads
converting an AST at once (one switched out in the middle, by a finalizer the garbage collector ran) can
end one of them with ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905).
A local campaign runs its islands (STOKE's rewrites, the LLM's replies) and its evaluators (lint, the
check's coverage) as threads of one process: every parse of this project goes through here, and a parse
that still meets the error (a library's own parse beside it) is tried once more.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_LOCK = threading.Lock()
_MISMATCH = "recursion depth mismatch"


def parse_module(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)`; a SyntaxError is raised as by `ast.parse`."""
    return _parse(lambda: ast.parse(source, filename=filename))


def parse_expression(source: str) -> ast.Expression:
    """`ast.parse(source, mode="eval")`."""
    return _parse(lambda: ast.parse(source, mode="eval"))


def _parse(parse: Callable[[], T]) -> T:
    for attempt in range(2):
        with _LOCK:
            try:
                return parse()
            except SystemError as e:
                if _MISMATCH not in str(e) or attempt:
                    raise
    raise AssertionError("unreachable")
