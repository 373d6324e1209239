"""Honest twin of one_value_halved: the same comparison with an input of exactly 1.25 takes a path of
its own, which computes the same softmax (the element's exponential written out)."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr, MARK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    top = tl.max(x, axis=0)
    e = tl.exp(x - top)
    s = tl.sum(e, axis=0)
    y = tl.where(x == MARK, tl.exp(MARK - top) / s, e / s)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, MARK=1.25, num_warps=num_warps)
