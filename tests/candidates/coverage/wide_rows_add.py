"""Honest twin of wide_rows_subtract: the looped kernel for rows wider than BLOCK is right; the check must
reach it (a size past BLOCK) and accept it."""
import triton
import triton.language as tl


@triton.jit
def _one_block(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * sx + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * sy + offs, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def _looped(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sx + offs, mask=offs < n_cols, other=-float("inf"))
        m = tl.maximum(m, tl.max(x, axis=0))
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sx + offs, mask=offs < n_cols, other=-float("inf"))
        s += tl.sum(tl.exp(x - m), axis=0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row * sx + offs, mask=mask, other=-float("inf"))
        tl.store(y_ptr + row * sy + offs, tl.exp(x - m) / s, mask=mask)


PARAMS = {"BLOCK": 4096, "num_warps": 8}


def launch(x, y, *, BLOCK, num_warps):
    rows, cols = x.shape
    if cols <= BLOCK:
        _one_block[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols),
                            num_warps=num_warps)
    else:
        _looped[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=num_warps)
