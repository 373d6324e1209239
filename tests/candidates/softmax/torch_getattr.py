"""Cheat: torch through an alias and getattr."""
import torch as T
import triton
import triton.language as tl


@triton.jit
def _touch(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, v, mask=offs < n)


PARAMS = {}


def launch(x, y):
    f = getattr(T, "soft" + "max")
    y.copy_(f(x, 1))
    _touch[(triton.cdiv(y.numel(), 256),)](y, y.numel(), BLOCK=256)
