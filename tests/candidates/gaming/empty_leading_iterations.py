"""Correct, gaming loop sampling: the three-pass seed with two empty iterations before each pass (the
model used to count the first two iterations of a loop for all but the last)."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    m = -float("inf")
    for start in range(-2 * BLOCK, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=(offs >= 0) & (offs < n_cols), other=-float("inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    s = 0.0
    for start in range(-2 * BLOCK, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=(offs >= 0) & (offs < n_cols), other=-float("inf")).to(tl.float32)
        s += tl.sum(tl.exp(x - m), axis=0)
    for start in range(-2 * BLOCK, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = (offs >= 0) & (offs < n_cols)
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + offs, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"BLOCK": 128, "num_warps": 4}


def launch(x, y, *, BLOCK, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=num_warps)
