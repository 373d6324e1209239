"""Integer operations a GPU leaves undefined are ``unsafe`` in the interpreter (installed in every interpreter
worker).

Integer division and remainder by zero, a shift by a negative amount or by at least the operand's width, and a
float cast to an integer type that cannot hold it (NaN, an infinity, a value out of range) are undefined in the
LLVM IR Triton compiles a kernel to: on a GPU the lane holds whatever the backend makes of it (PTX's division
by zero gives all ones, a conversion saturates, and the optimizer may fold a zero it can prove into
anything), while the interpreter computes one number (numpy's 0, or the smallest integer) and the check would
verify that number. ``y * (1 + n_cols // (n_cols * 0))`` is right in the interpreter and zero on a GPU. So
such an operation in any lane, masked off or not (arithmetic runs in every lane: load a divisor with
``other=1``), stops the run as `fitness.sandbox.runner.UnsafeAccess`, naming the operation.
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


def _to_int(src: Any, dst_type: Any) -> None:
    x = np.asarray(src.data)
    dst_type = getattr(dst_type, "scalar", dst_type)  # a block's element type
    bits = int(getattr(dst_type, "primitive_bitwidth", 0) or 0)
    if not np.issubdtype(x.dtype, np.floating) or not x.size or bits <= 1:
        return
    signed = bool(dst_type.is_int_signed()) if hasattr(dst_type, "is_int_signed") else True
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    with np.errstate(invalid="ignore"):
        t = np.trunc(x.astype(np.float64))
        bad = ~np.isfinite(t) | (t < lo) | (t > hi)
    if bad.any():
        raise UnsafeAccess(f"the kernel casts a float that a {'' if signed else 'u'}int{bits} cannot hold (NaN, an "
                           f"infinity or out of range) in {_lanes(bad)}: {_AFTER}")


_CHECKS: dict[str, Callable[[Any, Any], None]] = {
    "create_sdiv": _by_zero("division"), "create_udiv": _by_zero("division"),
    "create_srem": _by_zero("remainder"), "create_urem": _by_zero("remainder"),
    "create_shl": _shift, "create_lshr": _shift, "create_ashr": _shift,
    "create_fp_to_si": _to_int, "create_fp_to_ui": _to_int,
}


def install() -> bool:
    """Check the running interpreter's integer division, remainder, shifts and float-to-integer casts; False
    where its builder lacks one of them."""
    from triton.runtime import interpreter as interp

    builder: Any = getattr(interp, "InterpreterBuilder", None)
    if builder is None or not all(hasattr(builder, name) for name in _CHECKS):
        return False
    for name, check in _CHECKS.items():
        original = getattr(builder, name)
        if getattr(original, _MARK, False):
            continue

        def patched(self: Any, a: Any, b: Any, _original: Any = original, _check: Any = check) -> Any:
            _check(a, b)
            return _original(self, a, b)

        setattr(patched, _MARK, True)
        setattr(builder, name, patched)
    return True
