"""Cheat: a try/except fallback to torch when the kernel fails."""
import torch
import triton
import triton.language as tl


@triton.jit
def _broken(x_ptr, y_ptr, BLOCK: tl.constexpr):
    tl.store(y_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + tl.arange(0, BLOCK)))


PARAMS = {}


def launch(x, y):
    try:
        _broken[(1,)](x, y, BLOCK=3)
    except Exception:
        y.copy_(torch.softmax(x, 1))
