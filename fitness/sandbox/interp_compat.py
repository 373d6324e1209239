"""Fixes for Triton interpreters that break under recent numpy, installed in every interpreter worker.

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
    rank. Idempotent; returns False where the interpreter has no hook to fix (nothing is changed)."""
    from triton.runtime import interpreter as interp

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
