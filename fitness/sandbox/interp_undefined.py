"""Integer operations a GPU leaves undefined are ``unsafe`` in the interpreter, and a float cast to an integer
type is computed as a GPU computes it (installed in every interpreter worker).

Integer division and remainder by zero, and a shift by a negative amount or by at least the operand's width,
are undefined in the LLVM IR Triton compiles a kernel to and in PTX (a division by zero gives "an unspecified,
machine-specific value"; the optimizer may fold a zero it can prove into anything), while the interpreter
computes one number (numpy's 0) and the check would verify that number: ``y * (1 + n_cols // (n_cols * 0))``
is right in the interpreter and zero on a GPU. So such an operation in any lane, masked off or not (arithmetic
runs in every lane: load a divisor with ``other=1``), stops the run as `fitness.sandbox.runner.UnsafeAccess`,
naming the operation.

A float cast to an integer type that cannot hold it (NaN, an infinity, a value out of range) gave numpy's
"integer indefinite" (the smallest integer) here, where a GPU's conversion (``cvt.rzi``) saturates and takes
NaN to 0: the interpreter now does what the GPU does, so the check verifies the GPU's number. (A refusal would
refuse honest kernels too: the masked-off lanes of a softmax's load hold -inf.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fitness.sandbox.runner import UnsafeAccess

_MARK = "_evo_undefined"
_AFTER = ("its result on a GPU is undefined (the interpreter's is a number the check would verify): a masked-off "
          "lane counts, since arithmetic runs in every lane")


def _lanes(mask: np.ndarray) -> str:
    return f"{int(mask.sum())} of {mask.size} lane(s)"


def _by_zero(what: str) -> Callable[[Any, Any], None]:
    def check(lhs: Any, rhs: Any) -> None:
        d = np.asarray(rhs.data)
        if np.issubdtype(d.dtype, np.integer) and d.size and not np.all(d != 0):
            raise UnsafeAccess(f"the kernel takes an integer {what} by zero in {_lanes(d == 0)}: {_AFTER}")
    return check


def _shift(lhs: Any, rhs: Any) -> None:
    a, s = np.asarray(lhs.data), np.asarray(rhs.data)
    if not (np.issubdtype(a.dtype, np.integer) and np.issubdtype(s.dtype, np.integer)) or not s.size:
        return
    bad = (s < 0) | (s >= a.dtype.itemsize * 8)
    if bad.any():
        raise UnsafeAccess(f"the kernel shifts a {a.dtype.itemsize * 8}-bit integer by a negative amount or by its "
                           f"width or more in {_lanes(bad)}: {_AFTER}")


def _saturated(src: Any, dst_type: Any) -> Any:
    """`src` (floats) cast to the integer `dst_type` as a GPU's ``cvt.rzi`` does: toward zero, clamped to the
    type's range, NaN to 0; None where `dst_type` is no integer type the cast concerns."""
    from triton.runtime import interpreter as interp

    x = np.asarray(src.data)
    scalar = getattr(dst_type, "scalar", dst_type)  # a block's element type
    bits = int(getattr(scalar, "primitive_bitwidth", 0) or 0)
    if not np.issubdtype(x.dtype, np.floating) or bits <= 1 or not hasattr(scalar, "is_int_signed"):
        return None
    signed = bool(scalar.is_int_signed())
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    with np.errstate(invalid="ignore"):
        t = np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0, posinf=float(hi), neginf=float(lo))
    out = np.clip(t, lo, hi).astype(interp._get_np_dtype(scalar))
    return interp.TensorHandle(out, scalar)


_CHECKS: dict[str, Callable[[Any, Any], None]] = {
    "create_sdiv": _by_zero("division"), "create_udiv": _by_zero("division"),
    "create_srem": _by_zero("remainder"), "create_urem": _by_zero("remainder"),
    "create_shl": _shift, "create_lshr": _shift, "create_ashr": _shift,
}
_CASTS = ("create_fp_to_si", "create_fp_to_ui")


def _cast(original: Any) -> Callable[..., Any]:
    def patched(self: Any, src: Any, dst_type: Any) -> Any:
        out = _saturated(src, dst_type)
        return original(self, src, dst_type) if out is None else out
    return patched


def _checked(original: Any, check: Callable[[Any, Any], None]) -> Callable[..., Any]:
    def patched(self: Any, a: Any, b: Any) -> Any:
        check(a, b)
        return original(self, a, b)
    return patched


def install() -> bool:
    """Check the running interpreter's integer division, remainder and shifts, and make its float-to-integer
    casts saturate; False where its builder lacks one of them."""
    from triton.runtime import interpreter as interp

    builder: Any = getattr(interp, "InterpreterBuilder", None)
    if builder is None or not all(hasattr(builder, name) for name in (*_CHECKS, *_CASTS)):
        return False
    for name in (*_CHECKS, *_CASTS):
        original = getattr(builder, name)
        if getattr(original, _MARK, False):
            continue
        patched = _cast(original) if name in _CASTS else _checked(original, _CHECKS[name])
        setattr(patched, _MARK, True)
        setattr(builder, name, patched)
    return True
