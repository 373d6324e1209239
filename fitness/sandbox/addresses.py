"""Kernels may not read an address as a number, nor make one from a number (installed in every
interpreter worker).

Triton lets a kernel cast a pointer to an integer (``x_ptr.to(tl.int64)``, ``tl.cast(p, tl.int64,
bitcast=True)``) and back (``tl.cast(i, x_ptr.dtype)``). In the interpreter the integer is the host
address of the buffer, on a GPU a device address, and the two differ in ways a kernel can test (a CUDA
buffer is 512-byte aligned, a host one is not; the high bits differ): a kernel could take its right path
only where it is checked. No kernel needs the number (alignment is Triton's to specialize, or
``tl.multiple_of``'s to promise), so the interpreter's pointer-to-integer and integer-to-pointer
conversions raise `ForbiddenOperation`, which the worker reports as a contract violation.
"""

from __future__ import annotations

from typing import Any, NoReturn

from fitness.sandbox.torch_guard import ForbiddenOperation

_MARK = "_evo_addresses"


def _ptr_to_int(self: Any, *args: Any) -> NoReturn:
    raise ForbiddenOperation("the kernel converts a pointer to an integer: an address differs between the "
                             "interpreter and a GPU, so a kernel may not read one")


def _int_to_ptr(self: Any, *args: Any) -> NoReturn:
    raise ForbiddenOperation("the kernel converts an integer to a pointer: a kernel may address only the "
                             "buffers it is given, through their pointers")


def install() -> bool:
    """Refuse the running interpreter's pointer/integer conversions; False where its builder has none."""
    from triton.runtime import interpreter as interp

    builder: Any = getattr(interp, "InterpreterBuilder", None)
    if builder is None or not hasattr(builder, "create_ptr_to_int") or not hasattr(builder, "create_int_to_ptr"):
        return False
    if getattr(builder.create_ptr_to_int, _MARK, False):
        return True
    for fn in (_ptr_to_int, _int_to_ptr):
        setattr(fn, _MARK, True)
    builder.create_ptr_to_int = _ptr_to_int
    builder.create_int_to_ptr = _int_to_ptr
    return True
