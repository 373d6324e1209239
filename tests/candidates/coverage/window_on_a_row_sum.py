"""Gaming: a row whose sum of squares lies in (5.0, 5.000001), one float32 value inside, is halved: a window
on a sum, whose bounds each go both ways in the check while the window is never entered; it must
go both ways as a whole."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    squares = tl.sum(tl.where(mask, x * x, 0.0), axis=0)
    inside = (squares > 5.0) & (squares < 5.000001)
    y = tl.where(inside, y * 0.5, y)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
