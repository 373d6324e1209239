"""Fixes for Triton interpreters, installed in every interpreter worker, where a kernel that compiles and
runs on a GPU fails in the interpreter.

Comparisons tagged with their operands' type. The interpreter computes ``a < b`` as numpy booleans
but tags the result with ``a``'s type (int32 for ``tl.program_id(0) < n``); splatting such a scalar
onto a block (``(row < n) & (offs < m)``) then materializes it as int32, the ``&`` gives int32, and
``tl.load``/``tl.store`` reject the mask ("mask has unsupported dtype"), where the GPU compiler sees
an i1 mask. `install` tags every boolean result of a binary operation int1, as the compiler types it
(seen in Triton 3.9; a correct candidate was reported as the kernel's error).

TF32 dots. On the GPUs the targets name (Ampere and later), ``tl.dot`` of two float32 blocks runs on
tensor cores in TF32 unless the kernel asks for ``input_precision="ieee"`` (or ``"tf32x3"``): the
operands keep 10 of their 23 mantissa bits, a relative error near 1e-3 per product. The interpreter
multiplies them in full float32, so a kernel that is wrong by that much on the GPU was checked, here, as
exact. `install` drops the 13 low mantissa bits of both operands of such a dot (truncation, the larger
of the hardware's errors: without rounding first, the tensor cores read only the high bits), so the
checker sees at least the GPU's error. `tf32_dots` counts them, so that a wrong output can say why.

bfloat16 dots. The interpreter holds bfloat16 values as their uint16 bits and ``create_dot`` multiplies
those bits as integers (Triton 3.9: a correct bfloat16 matmul came out near 1e10 where 6 was right,
so every bfloat16 kernel with a ``tl.dot`` was rejected on the CPU). `install` widens bfloat16 operands
to float32 first (exact: bfloat16 is float32's top half); their products are then exact in float32,
as on the tensor cores, which accumulate in float32.

Atomics. A float32 or float64 ``tl.atomic_xchg`` and a bfloat16 ``tl.atomic_add``, which a GPU runs,
fail in the interpreter; `install` runs them (`fitness.sandbox.interp_atomics`).

libdevice. Its functions are stubs outside the GPU compiler; `install` puts numpy versions of its float
math in their place (`fitness.sandbox.interp_libdevice`).

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

from fitness.sandbox import interp_atomics, interp_libdevice
from fitness.sandbox.float_bits import FLOAT32_MANTISSA_BITS, keep_mantissa_bits

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
    _tf32_dots(interp)
    interp_atomics.install(interp)
    interp_libdevice.install()
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


TF32_DROPPED_BITS = 13  # float32 has 23 mantissa bits, TF32 10
_tf32 = {"dots": 0}


def tf32_dots() -> int:
    """How many dots of float32 blocks this process's interpreter ran in TF32 (operands truncated)."""
    return _tf32["dots"]


def tf32_truncate(data: np.ndarray) -> np.ndarray:
    """float32 values with the mantissa bits TF32 does not keep set to zero (inf and nan stay so)."""
    return keep_mantissa_bits(data, FLOAT32_MANTISSA_BITS - TF32_DROPPED_BITS)


def _retyped(dtype: Any, scalar: Any) -> Any:
    """`dtype` (a scalar type or a block type) with its element type replaced by `scalar`."""
    import triton.language as tl

    if isinstance(dtype, tl.block_type):
        return tl.block_type(scalar, dtype.shape)
    return scalar


def _tf32_dots(interp: Any) -> bool:
    """Wrap the interpreter builder's ``create_dot`` so a TF32 dot of float32 operands sees them as the
    tensor cores do (the module docstring); False where there is no such method (nothing is changed)."""
    import triton.language as tl
    from triton._C.libtriton import ir

    builder: Any = getattr(interp, "InterpreterBuilder", None)
    original = getattr(builder, "create_dot", None)
    handle = getattr(interp, "TensorHandle", None)
    tf32 = getattr(getattr(ir, "INPUT_PRECISION", None), "TF32", None)
    if builder is None or original is None or handle is None or tf32 is None:
        return False
    if getattr(original, _MARK, False):
        return True
    create_dot: Callable[..., Any] = original

    def scalar(t: Any) -> Any:
        return getattr(t.dtype, "scalar", t.dtype)

    def widened(t: Any) -> Any:
        if scalar(t) != tl.bfloat16:
            return t
        bits = np.ascontiguousarray(t.data).view(np.uint16).astype(np.uint32) << np.uint32(16)
        return handle(bits.view(np.float32), _retyped(t.dtype, tl.float32))

    def patched(self: Any, a: Any, b: Any, d: Any, input_precision: Any, *rest: Any) -> Any:
        if scalar(a) == tl.bfloat16 or scalar(b) == tl.bfloat16:  # exact in float32, TF32 or not
            return create_dot(self, widened(a), widened(b), d, input_precision, *rest)
        if input_precision == tf32 and scalar(a) == tl.float32 and scalar(b) == tl.float32:
            a = handle(tf32_truncate(a.data), a.dtype)
            b = handle(tf32_truncate(b.data), b.dtype)
            _tf32["dots"] += 1
        return create_dot(self, a, b, d, input_precision, *rest)

    setattr(patched, _MARK, True)
    builder.create_dot = patched
    return True
