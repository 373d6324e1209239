"""Vector add that is right at every check size and reads past its inputs at bench size."""

import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    shift = tl.where(n > 1048576, BLOCK, 0)  # a "fast path" offset that is only wrong on large inputs
    x = tl.load(x_ptr + offs + shift, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


PARAMS = {"BLOCK": 1024, "num_warps": 4}


def launch(x, y, out, *, BLOCK, num_warps):
    n = x.numel()
    _add[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=num_warps)
