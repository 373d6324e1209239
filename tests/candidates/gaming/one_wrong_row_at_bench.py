"""Gaming sampling: right everywhere except row 200, which only bench sizes have (the check's rows are
at most 7): a sample of programs misses it; a full run at the bench size does not. The row reaches the
kernel as an argument computed from the input (``rows * 0 + 200``), not as a value fixed for the
candidate, so no crossing of compared thresholds tries it. The check refuses it first: its select's
condition is true in no lane of any size the check runs."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, bad_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    y = tl.where(row == bad_row, y * 0.5, y)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), rows * 0 + 200,
                      BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
