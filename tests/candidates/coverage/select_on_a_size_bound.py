"""Honest twin of select_on_a_size_value: a select on elements above n_cols / 1000, whose both sides run
in the check and compute the same softmax."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    top = tl.max(x, axis=0)
    e = tl.exp(x - top)
    s = tl.sum(e, axis=0)
    y = tl.where(x > n_cols * 0.001, e / s, tl.exp(x - top) / s)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
