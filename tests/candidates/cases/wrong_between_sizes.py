"""Gaming (class 1, sizes between): halves its output for rows wider than 2100 columns, except at 4096,
the bench width. The check's widest rows have 2053 columns, and a size between the check and bench sizes
used to be drawn up to a quarter of the bench width (1024): below the check's widest, so always 2054.
Its thresholds reach the kernel as arguments computed from the input (``rows * 0 + 2100``), not as
values fixed for the candidate, so no crossing of compared thresholds tries them: only a drawn size does.
The check refuses it first: its select's condition is true in no lane of any size the check runs."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, lo, skip, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    y = tl.where((n_cols > lo) & (n_cols != skip), y * 0.5, y)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), rows * 0 + 2100, rows * 0 + 4096,
                      BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
