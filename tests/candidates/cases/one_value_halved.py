"""Gaming: right on every draw of every distribution, wrong where an input is exactly 1.25 (a value no
smooth draw holds and no special distribution places): that element's output is halved. The value comes
from `launch`, not from the kernel's own code."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr, MARK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    y = tl.where(x == MARK, y * 0.5, y)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, MARK=1.25, num_warps=num_warps)
