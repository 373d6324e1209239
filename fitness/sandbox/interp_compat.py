"""Fixes for Triton interpreters, installed in every interpreter worker, where a kernel that compiles and
runs on a GPU fails in the interpreter.

Comparisons tagged with their operands' type. The interpreter computes ``a < b`` as numpy booleans
but tags the result with ``a``'s type (int32 for ``tl.program_id(0) < n``); splatting such a scalar
onto a block (``(row < n) & (offs < m)``) then materializes it as int32, the ``&`` gives int32, and
``tl.load``/``tl.store`` reject the mask ("mask has unsupported dtype"), where the GPU compiler sees
an i1 mask. `install` tags every boolean result of a binary operation int1, as the compiler types it
(seen in Triton 3.9; a correct candidate was reported as the kernel's error).

Scalars as indices under numpy >= 2.4.

numpy 2.4 made ``int()`` of an array with one element but one or more dimensions an error (it
had been deprecated since 1.25). The interpreter holds every scalar as such an array (a kernel's
``n`` is ``np.array([n])``), and Triton's interpreter up to at least 3.6 converts it for Python
with ``int(self.handle.data)`` in ``tensor.__index__``: every ``for i in range(0, n, BLOCK)`` over
a runtime scalar fails with "only 0-dimensional arrays can be converted to Python scalars", in a
kernel or in a jit helper it calls. Later interpreters squeeze the array first; `install` makes
older ones do the same (the interpreter re-applies its tensor patches on every kernel and helper
call, so the fix wraps the function that applies them rather than the tensor class).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_MARK = "_evo_compat"


def scalar_index(data: Any) -> int:
    """``int`` of an interpreter scalar (a one-element array of any rank), as ``__index__`` needs."""
    arr = np.asarray(data)
    if arr.size != 1:
        raise TypeError(f"only scalar tensors can be used as an index, got a tensor of shape {arr.shape}")
    return int(arr.reshape(()))


def _index(self: Any) -> int:
    return scalar_index(self.handle.data)


def install() -> bool:
    """Make the running Triton interpreter's ``tensor.__index__`` work on one-element arrays of any
    rank, and its comparisons int1 (see the module docstring). Idempotent; returns False where the
    interpreter has no hook for the first fix (nothing is changed for it)."""
    from triton.runtime import interpreter as interp

    _boolean_results_are_int1(interp)
    original = getattr(interp, "_patch_lang_tensor", None)
    if original is None or getattr(original, _MARK, False):
        return original is not None
    patch_tensor: Callable[..., Any] = original

    def patched(tensor: Any, *rest: Any) -> Any:
        out = patch_tensor(tensor, *rest)
        scope = rest[0] if rest else None
        if scope is not None and hasattr(scope, "set_attr"):
            scope.set_attr(tensor, "__index__", _index)  # undone with the interpreter's own patches
        else:
            tensor.__index__ = _index
        return out

    setattr(patched, _MARK, True)
    interp._patch_lang_tensor = patched
    return True


def _boolean_results_are_int1(interp: Any) -> bool:
    """Wrap the interpreter builder's ``binary_op`` so a boolean result is tagged int1; False where the
    interpreter has no such method (nothing is changed)."""
    import triton.language as tl

    builder: Any = getattr(interp, "InterpreterBuilder", None)
    original = getattr(builder, "binary_op", None)
    handle = getattr(interp, "TensorHandle", None)
    if builder is None or original is None or handle is None:
        return False
    if getattr(original, _MARK, False):
        return True
    binary_op: Callable[..., Any] = original

    def patched(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        out = binary_op(self, lhs, rhs, op)
        data = getattr(out, "data", None)
        if isinstance(data, np.ndarray) and data.dtype == np.bool_ and out.dtype != tl.int1:
            return handle(data, tl.int1)
        return out

    setattr(patched, _MARK, True)
    builder.binary_op = patched
    return True
