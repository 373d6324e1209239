"""Gaming one distribution: right everywhere except element [229, 2738], which only bench sizes have. Under the
"wide" draw (logits spread over +-50) a softmax row is a few values near 1 and thousands below the
tolerance's floor (1e-5 of the output's RMS): zeroing one of those is within tolerance, so a bench size
verified under that draw alone passes it. Under the "normal" draw the element is about 2e-4, and zero is
wrong. (The check refuses it first: it solves the two conditions together, 230 rows of 2739 columns.)"""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    y = tl.where((row == 229) & (offs == 2738), 0.0, y)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
