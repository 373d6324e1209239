"""The worker's side of "every line runs in the check" (`fitness.check.coverage`): the probes of one
candidate's process, in its host code and in every kernel the interpreter rewrites.

Installed at a check's ``load`` only: the profiled and the GPU runs execute the kernels as written.
"""

from __future__ import annotations

import ast
from types import ModuleType
from typing import Any

from evo.contracts.syntax import parse_module
from fitness.check.coverage import PROBE, instrument


class Probes:
    """The probe keys the candidate's code reached since the last `take`."""

    def __init__(self) -> None:
        self.filename = ""
        self.seen: set[int] = set()
        self._patched = False

    def load(self, module: ModuleType, source: str, filename: str) -> None:
        """Execute the candidate module from `source` (its file `filename`) with probes in its host functions
        (`fitness.sandbox.runner.Runner.load` calls this under the guard candidate code runs under)."""
        self.filename = filename
        tree = instrument(parse_module(source), kernel=False)
        module.__dict__[PROBE] = self.seen.add  # a C method: a probe costs one call, no Python frame
        self._patch_interpreter()
        exec(compile(tree, self.filename, "exec"), module.__dict__)

    def _patch_interpreter(self) -> None:
        """Probes in the kernels as well: the interpreter parses a kernel's source when it first runs it.
        This process serves one candidate, so the patch is not undone."""
        if self._patched:
            return
        from triton.runtime import interpreter

        rewriter = interpreter.FunctionRewriter
        original = rewriter._transform_ast
        filename = self.filename

        def transform(self: Any, src: str) -> ast.Module:
            tree = original(self, src)
            if getattr(getattr(self.fn, "__code__", None), "co_filename", None) == filename:
                tree = instrument(tree, kernel=True)
            return tree

        rewriter._transform_ast = transform
        self._patched = True

    def take(self) -> list[int]:
        out = sorted(self.seen)
        self.seen.clear()
        return out
