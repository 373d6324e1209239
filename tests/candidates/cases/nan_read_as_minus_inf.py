"""Wrong: a NaN in a row is read as -inf (skipped), so the row comes out finite where torch gives NaN. A row
that also holds +inf is NaN either way, so a check whose rows held random mixes of inf and NaN passed it
whenever each row with a NaN also drew a +inf."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = tl.where(x != x, -float("inf"), x)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
