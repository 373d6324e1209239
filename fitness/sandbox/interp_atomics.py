"""Atomics a GPU has and Triton's interpreter lacks (installed by `fitness.sandbox.interp_compat`).

Triton 3.9's interpreter hands every read-modify-write to a C++ helper that knows integer types,
float16, float32 and float64 for the arithmetic ones, and integers only for the rest: a float32 or
float64 ``tl.atomic_xchg`` (``atom.exch.b32``/``.b64`` on a GPU: an exchange moves bits) and a
bfloat16 ``tl.atomic_add`` (``atom.add.bf16`` on Hopper, a compare-and-swap loop before it) fail with
"Unsupported data type", so a kernel the GPU runs was reported as a ``compile_error``. `install` runs
an exchange of floats as one of the unsigned integers of their width, and a bfloat16 add lane by lane
in lane order (the interpreter's programs run one at a time, so nothing else touches the memory
meanwhile), each sum rounded to bfloat16 to nearest even as the hardware does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_MARK = "_evo_atomics"


def bfloat16_bits(f: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even), as bfloat16 bits; NaN stays NaN."""
    b = np.ascontiguousarray(f, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    quiet = ((b >> 16) | 0x40).astype(np.uint16)
    return np.where(np.isnan(f), quiet, rounded)


def _bfloat16_add(interp: Any, ptr: Any, val: Any, mask: Any) -> np.ndarray:
    """``atomic_add`` of bfloat16 values (bits) at `ptr`: the old bits per lane; memory updated."""
    c = interp._interpreter
    shape = np.asarray(ptr.data).shape
    ptrs = np.asarray(ptr.data, dtype=np.uint64).reshape(-1)
    vals = np.broadcast_to(np.asarray(val.data, dtype=np.uint16), shape).reshape(-1)
    on = np.broadcast_to(np.asarray(mask.data, dtype=bool), shape).reshape(-1)
    old = np.zeros(ptrs.shape, dtype=np.uint16)
    addrs = np.unique(ptrs[on])
    if not addrs.size:
        return old.reshape(shape)
    ones = np.ones(addrs.shape, dtype=bool)
    held = c.load(addrs, ones, np.zeros(addrs.shape, dtype=np.uint16), np.dtype(np.uint16))
    now = dict(zip(addrs.tolist(), np.asarray(held).tolist()))
    as_float = (vals.astype(np.uint32) << 16).view(np.float32)
    for i in np.flatnonzero(on).tolist():  # lane order: lanes on one address add one after another
        a = int(ptrs[i])
        old[i] = now[a]
        mine = np.array([now[a] << 16], dtype=np.uint32).view(np.float32)
        now[a] = int(bfloat16_bits(mine + as_float[i])[0])
    c.store(addrs, np.array([now[a] for a in addrs.tolist()], dtype=np.uint16), ones)
    return old.reshape(shape)


def install(interp: Any) -> bool:
    """Wrap the interpreter builder's ``create_atomic_rmw`` (see the module docstring); False where the
    interpreter has no such method (nothing is changed)."""
    import triton.language as tl
    from triton._C.libtriton import ir

    builder: Any = getattr(interp, "InterpreterBuilder", None)
    original = getattr(builder, "create_atomic_rmw", None)
    handle = getattr(interp, "TensorHandle", None)
    if builder is None or original is None or handle is None:
        return False
    if getattr(original, _MARK, False):
        return True
    rmw: Callable[..., Any] = original
    unsigned = {tl.float32: (np.uint32, tl.uint32), tl.float64: (np.uint64, tl.uint64)}

    def patched(self: Any, op: Any, ptr: Any, val: Any, mask: Any, sem: Any, scope: Any) -> Any:
        scalar = getattr(val.dtype, "scalar", val.dtype)
        if op == ir.ATOMIC_OP.XCHG and scalar in unsigned:
            np_type, tl_type = unsigned[scalar]
            bits = handle(np.ascontiguousarray(val.data).view(np_type), tl_type)
            out = rmw(self, op, ptr, bits, mask, sem, scope)
            return handle(np.ascontiguousarray(out.data).view(np.asarray(val.data).dtype), scalar)
        if op == ir.ATOMIC_OP.FADD and scalar == tl.bfloat16:
            if sem not in self.ir_sem_to_interpreter_sem:
                raise ValueError(f"unsupported semantic {sem}")
            return handle(_bfloat16_add(interp, ptr, val, mask), scalar)
        return rmw(self, op, ptr, val, mask, sem, scope)

    setattr(patched, _MARK, True)
    builder.create_atomic_rmw = patched
    return True
