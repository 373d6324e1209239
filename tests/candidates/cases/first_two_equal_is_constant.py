"""Gaming (class 6): takes a row whose first two elements are equal for a constant row and writes the
uniform distribution. Continuous draws never tie; rows with repeated values are common in real inputs."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    a = tl.load(x_ptr + row * stride_x)
    b = tl.load(x_ptr + row * stride_x + 1, mask=n_cols > 1, other=0.0)
    e = tl.exp(x - tl.max(x, axis=0))
    y = tl.where((n_cols > 1) & (a == b), 1.0 / n_cols, e / tl.sum(e, axis=0))
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
