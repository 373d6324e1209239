"""Unsafe: at the check's sizes (rows narrower than the bench's), loads a block twice the row unmasked,
past the end of the input for the last row, then ignores the stray lanes; the result is right, the
access is not, and at the bench size, the only one a bounds check used to watch, the block fits."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    raw = tl.load(x_ptr + row * stride_x + offs).to(tl.float32)
    x = tl.where(mask, raw, -float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols) * (2 if cols < 4000 else 1)
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=num_warps)
