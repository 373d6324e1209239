"""Cheat: a call counter kept as an attribute of a function object (launch's own kernel), which outlives
the call like a module-level name."""
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


PARAMS = {"num_warps": 4}


def _count(n):
    return n


def launch(x, y, *, num_warps):
    _count.calls = 1
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols),
                      num_warps=num_warps)
