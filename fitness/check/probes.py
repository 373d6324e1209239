"""The worker's side of "every line runs in the check" (`fitness.check.coverage`): the probes of one
candidate's process, in its host code and in every kernel the interpreter rewrites.

Installed at a check's ``load`` only: the profiled and the GPU runs execute the kernels as written.
"""

from __future__ import annotations

import ast
from types import ModuleType
from typing import Any

import numpy as np

from evo.contracts.syntax import parse_module
from fitness.check.coverage import CLIPPED, COMPARED, PROBE, instrument

MAX_THRESHOLDS = 4096  # distinct numbers recorded per run (one per program where a row's own value is compared)


def _data(value: Any, numbers: bool = False) -> np.ndarray | None:
    """The lanes of an interpreted tensor (None for a compile-time value; with `numbers`, a Python number or
    a constexpr's as one lane)."""
    data = getattr(getattr(value, "handle", None), "data", None)
    if isinstance(data, np.ndarray):
        return data
    if numbers:
        number = getattr(value, "value", value)
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return np.array([float(number)])
    return None


def _floats(value: Any) -> bool:
    """`value` is a tensor of floats or a Python float (or a constexpr of one)."""
    data = _data(value)
    return data.dtype.kind == "f" if data is not None else isinstance(getattr(value, "value", value), float)


class Probes:
    """The probe keys the candidate's code reached since the last `take`."""

    def __init__(self) -> None:
        self.filename = ""
        self.seen: set[int] = set()
        self.thresholds: dict[float, int] = {}  # a number a comparison's side held for every lane -> how often
        self._patched = False

    def load(self, module: ModuleType, source: str, filename: str) -> None:
        """Execute the candidate module from `source` (its file `filename`) with probes in its host functions
        (`fitness.sandbox.runner.Runner.load` calls this under the guard candidate code runs under)."""
        self.filename = filename
        tree = instrument(parse_module(source), kernel=False)
        module.__dict__[PROBE] = self.seen.add  # a C method: a probe costs one call, no Python frame
        module.__dict__[COMPARED] = self.compared
        module.__dict__[CLIPPED] = self.clipped
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

    def compared(self, true: int, false: int, value: Any, *sides: Any) -> Any:
        """`value`, a kernel's comparison, with the outcomes it holds recorded: true in some lane (`true`), false
        in some lane (`false`). A comparison of compile-time values (a Python bool) has both: the compiler
        keeps the one outcome, and the other is dead code. Where one of its `sides` is one number for every
        lane and the other is a tensor of floats (``x == n_cols * 0.001``, ``tl.max(x, axis=0) == n_cols * 0.05``),
        that number is recorded: the check places it in the inputs of a later case at the same size, at
        elements and as rows' maxima and minima (`fitness.check.data_values`). A number a row's own data
        gives is recorded once per program; one made of a size, for every program, comes first."""
        data = _data(value)
        if data is None:
            self.seen.update((true, false))
        elif data.size:
            if true not in self.seen and data.any():
                self.seen.add(true)
            if false not in self.seen and not data.all():
                self.seen.add(false)
        if len(sides) == 2 and len(self.thresholds) < MAX_THRESHOLDS:
            for one, other in ((_data(sides[0], True), _data(sides[1])), (_data(sides[1], True), _data(sides[0]))):
                if one is not None and other is not None and one.size == 1 and other.dtype.kind == "f":
                    number = float(one.reshape(-1)[0])
                    if np.isfinite(number):
                        self.thresholds[number] = self.thresholds.get(number, 0) + 1
        return value

    def clipped(self, true: int, false: int, value: Any, a: Any, b: Any) -> Any:
        """`compared` for a clip's choice (`value`: whether its first argument is the smaller) where either
        argument holds floats; between integers (indices, lengths) both outcomes count as run."""
        if not any(_floats(v) for v in (a, b)):
            self.seen.update((true, false))
            return value
        return self.compared(true, false, value, a, b)

    def take_thresholds(self) -> list[float]:
        """The numbers recorded since the last call, those met by the most lanes' comparisons first."""
        out = sorted(self.thresholds, key=lambda v: -self.thresholds[v])
        self.thresholds.clear()
        return out

    def take(self) -> list[int]:
        out = sorted(self.seen)
        self.seen.clear()
        return out
