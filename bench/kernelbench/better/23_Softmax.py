"""Softmax over dim 1 of a (batch, dim) tensor: one program per row, two passes over it instead of three (an
online softmax: each lane keeps its running max and its sum of exp(x - max), rescaled when the max grows;
the lanes are combined at the end of the pass), then exp(x - max) / sum."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
        new_m = tl.maximum(m, x)
        # a lane that has seen only -inf adds nothing (its sum stays 0); a NaN or +inf makes its sum NaN, as in torch
        grown = tl.where(m == -float("inf"), 0.0, tl.exp(m - new_m))
        s = s * grown + tl.where(x == -float("inf"), 0.0, tl.exp(x - new_m))
        m = new_m
    row_max = tl.max(m, 0)
    total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.exp(m - row_max)), 0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
        tl.store(y_ptr + row * n_cols + offs, tl.exp(x - row_max) / total, mask=offs < n_cols)


PARAMS = {"BLOCK": 2048, "num_warps": 8}
SPACE = {"BLOCK": [1024, 2048, 4096], "num_warps": [4, 8]}


def launch(x, y, *, BLOCK, num_warps):
    _softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=num_warps)
