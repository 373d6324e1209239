"""Wrong past 5000 columns: the FAST branch's flag is a constexpr computed from the size, so it is not
dead code; the check must reach it."""
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, sx, sy, scale, FAST: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * sx + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    if FAST:
        y = e
    else:
        y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * sy + offs, y * scale, mask=mask)


PARAMS = {"num_warps": 4}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    scale = 1.0
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), scale, FAST=cols > 5000, BLOCK=triton.next_power_of_2(cols),
                      num_warps=num_warps)
