"""Honest twin of dot_below_sixteen: the short rows' path is a plain sum, which compiles."""
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
    if BLOCK < 16:  # short rows: the same sum, written apart
        s = tl.sum(e, axis=0)
    else:
        s = tl.sum(e, axis=0)
    tl.store(y_ptr + row * sy + offs, e / s, mask=mask)


PARAMS = {"num_warps": 4}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols),
                      num_warps=num_warps)
