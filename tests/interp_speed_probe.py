"""Probe of `fitness.sandbox.interp_speed`, run by `tests.test_interp_speed` in a subprocess with
``TRITON_INTERPRET=1``: what the interpreter wraps before a launch and a helper call, with Triton's own walk
and with the listed one; how often a launch whose loop calls jit helpers patches the language in full
(``--as-shipped``: that alone, without the install); a kernel calling jit helpers run with the install; a
launch with and without the overflow checks that assert nothing. Prints one JSON line."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import sys
import time
import types
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as interp

from fitness.sandbox import interp_compat, interp_speed


@triton.jit
def halve(x):
    return x * 0.5


@triton.jit
def row_stats(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + row, halve(tl.sum(x, axis=0)) + tl.max(x, axis=0))


@triton.jit
def looped_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = 0.0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += halve(tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))
    tl.store(out_ptr, acc)


def patchings_per_launch(interp: Any) -> tuple[list[int], float]:
    """How often the language was patched in full in each of two launches of `looped_sum` (16 iterations, two
    helper calls each), and the kernel's error."""
    counts: list[int] = []
    patch_core = interp._patch_lang_core

    def counted(*args: Any) -> Any:
        counts[-1] += 1
        return patch_core(*args)

    interp._patch_lang_core = counted
    x, out = torch.randn(1000), torch.empty(1)
    try:
        for _ in range(2):
            counts.append(0)
            looped_sum[(1,)](x, out, 1000, BLOCK=64)
    finally:
        interp._patch_lang_core = patch_core
    return counts, float(abs(out.item() - x.sum().item() * 0.5))


assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"


def changes(interp: Any, fn: Any) -> list[tuple[str, str]]:
    """(owner, name) of every attribute `_patch_lang(fn)` replaces, in order; undone afterwards."""
    scope = interp._patch_lang(fn)
    out = [(getattr(obj, "__name__", type(obj).__name__), name) for obj, name, _ in scope._changes]
    scope.restore()
    return out


def per_call_ms(interp: Any, fn: Any, n: int = 200) -> float:
    start = time.perf_counter()
    for _ in range(n):
        interp._patch_lang(fn).restore()
    return (time.perf_counter() - start) / n * 1e3


@triton.jit
def indexed_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tl.store(y_ptr + row * n + offs, tl.load(x_ptr + row * n + offs, mask=offs < n) * 2.0, mask=offs < n)


def overflow_checks() -> dict[str, Any]:
    """What `without_dead_overflow_checks` changes: the integer casts a launch makes (the 64-bit recomputation
    of each 32-bit index sum), its output, the options afterwards, and options in debug mode left alone."""
    builder = interp.interpreter_builder
    casts = [0]
    original = builder.create_int_cast

    def counted(*args: Any) -> Any:
        casts[0] += 1
        return original(*args)

    x = torch.randn(3, 100)
    outs = []
    counts = []
    options = builder.options
    builder.create_int_cast = counted
    try:
        for off in (False, True, False):
            casts[0] = 0
            y = torch.zeros_like(x)
            with interp_speed.without_dead_overflow_checks() if off else contextlib.nullcontext():
                indexed_copy[(3,)](x, y, 100, BLOCK=32)
                if off:
                    inside = builder.options.sanitize_overflow
            counts.append(casts[0])
            outs.append(y)
    finally:
        del builder.create_int_cast
    restored = builder.options is options
    builder.options = interp.InterpreterOptions(debug=True)
    try:
        with interp_speed.without_dead_overflow_checks():
            debug_kept = builder.options.sanitize_overflow and builder.options.debug
    finally:
        builder.options = options
    return {"casts": counts, "inside": inside, "restored": restored, "debug_kept": debug_kept,
            "same": all(torch.equal(o, x * 2.0) for o in outs)}


def main() -> None:
    interp_compat.install()
    helper, kernel = tl.standard.max.fn, row_stats.fn
    if "--as-shipped" in sys.argv:  # Triton's own helper calls leave patches behind: a process of its own
        counts, error = patchings_per_launch(interp)
        print(json.dumps({"launches": counts, "loop_error": error}))
        return
    before = {"helper": changes(interp, helper), "kernel": changes(interp, kernel)}
    ms_before = per_call_ms(interp, helper)
    installed = interp_speed.install()
    after = {"helper": changes(interp, helper), "kernel": changes(interp, kernel)}
    launches, loop_error = patchings_per_launch(interp)
    ms_after = per_call_ms(interp, helper)
    walked: list[Any] = []  # modules walked in full since the install (none of the listed ones)
    full_walk = inspect.getmembers

    def counted(obj: Any, *rest: Any) -> Any:
        walked.append(obj)
        return full_walk(obj, *rest)

    inspect.getmembers = counted  # type: ignore[assignment]
    changes(interp, helper)
    changes(interp, kernel)
    inspect.getmembers = full_walk

    x = torch.randn(5, 100)
    out = torch.empty(5)
    row_stats[(5,)](x, out, 100, BLOCK=128)
    want = x.sum(1) * 0.5 + x.max(1).values

    # a module the install did not list is walked in full, as Triton walks it
    builtin = tl.core.builtin(lambda *a, _semantic=None: "ran")
    other = types.ModuleType("elsewhere")
    other.op = builtin  # type: ignore[attr-defined]
    scope = interp._LangPatchScope()
    interp._patch_builtin(other, interp.interpreter_builder, scope)
    print(json.dumps({
        "installed": installed, "again": interp_speed.install(), "before": before, "after": after,
        "kernel_error": float(np.abs((out - want).numpy()).max()),
        "walked_in_full": len(walked), "unlisted_wrapped": other.op is not builtin and other.op() == "ran",
        "launches": launches, "loop_error": loop_error, "ms_before": ms_before, "ms_after": ms_after,
        "overflow": overflow_checks(),
    }))


if __name__ == "__main__":
    main()
