"""Naive row moments: one program per row, the sum in one pass over the row, the sum of squares in another."""

import triton
import triton.language as tl


@triton.jit
def _row_moments(x_ptr, out_ptr, n_cols, stride, out_stride, out_col, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    total = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0)
        total += tl.sum(x, axis=0)
    squares = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0)
        squares += tl.sum(x * x, axis=0)
    tl.store(out_ptr + row * out_stride, total)
    tl.store(out_ptr + row * out_stride + out_col, squares)


PARAMS = {"BLOCK": 128, "num_warps": 4}
SPACE = {"BLOCK": [128, 256, 512, 1024, 2048, 4096, 8192], "num_warps": [1, 2, 4, 8, 16]}


def launch(x, out, *, BLOCK, num_warps):
    rows, cols = x.shape
    _row_moments[(rows,)](x, out, cols, x.stride(0), out.stride(0), out.stride(1), BLOCK=BLOCK, num_warps=num_warps)
