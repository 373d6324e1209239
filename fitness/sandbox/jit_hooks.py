"""Two hooks on Triton's JIT inside an evaluation worker on a GPU: a clock on its compiler, and a
compile-only mode for compiling a candidate ahead of its GPU timing slot.

- `compile_seconds()`: seconds this process spent in Triton's compiler (`JITFunction._do_compile`,
  which compiles one specialization, or loads it from the on-disk cache), once `install_clock()` ran.
  The evaluator asks for it around an evaluation, so the GPU-busy figure of a campaign counts the
  seconds a GPU evaluation spent timing and checking, not compiling.
- `compile_only()`: inside it, every ``kernel[grid](...)`` launch compiles the kernel for its
  arguments (exactly the specialization a real launch would use: same worker code, same buffer
  layout, same device) and returns without running it. The compiled kernel lands in the Triton cache
  the node's workers share, so the GPU worker's launch of the same candidate loads it instead of
  compiling. Nothing a kernel computes is read in this mode: its outputs are garbage by design.

Both patch `triton.runtime.jit.JITFunction` in this process only (the worker's); where a Triton
version lacks the patched method, the hook is absent (`compile_seconds()` stays 0, `compile_only()`
still compiles through `run(warmup=True)`, which every Triton 3 has).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_state = threading.local()
_clock = {"seconds": 0.0, "installed": False}


def compile_seconds() -> float:
    return float(_clock["seconds"])


def install_clock() -> bool:
    """Time Triton's compiler from now on; False where this Triton has no `_do_compile`."""
    if _clock["installed"]:
        return True
    from triton.runtime.jit import JITFunction

    original = getattr(JITFunction, "_do_compile", None)
    if original is None:
        return False

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            _clock["seconds"] = float(_clock["seconds"]) + time.perf_counter() - start

    JITFunction._do_compile = timed
    _clock["installed"] = True
    return True


_run_patched = {"done": False}


def _patch_run() -> None:
    if _run_patched["done"]:
        return
    from triton.runtime.jit import JITFunction

    original = JITFunction.run

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        return original(self, *args, grid=grid, warmup=warmup or compiling_only(), **kwargs)

    JITFunction.run = run
    _run_patched["done"] = True


def compiling_only() -> bool:
    return bool(getattr(_state, "compile_only", False))


@contextmanager
def compile_only() -> Iterator[None]:
    """JIT launches compile and do not run, in this thread, inside the block."""
    _patch_run()
    _state.compile_only = True
    try:
        yield
    finally:
        _state.compile_only = False
