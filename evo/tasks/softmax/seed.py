"""Naive softmax: one program per row, three passes over the row in small chunks."""

import triton
import triton.language as tl


@triton.jit
def _softmax_three_pass(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    # pass 1: the row maximum
    m = -float("inf")
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    # pass 2: the sum of exponentials
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        s += tl.sum(tl.exp(x - m), axis=0)
    # pass 3: normalise and store
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) / s
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"BLOCK": 128, "num_warps": 4}
SPACE = {"BLOCK": [64, 128, 256, 512, 1024, 2048, 4096], "num_warps": [1, 2, 4, 8, 16]}


def launch(x, y, *, BLOCK, num_warps):
    rows, cols = x.shape
    _softmax_three_pass[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=num_warps)
