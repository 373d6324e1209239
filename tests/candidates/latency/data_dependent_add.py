"""Vector add whose load addresses are computed from loaded data (always offset 0 here)."""

import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    j = (y * 0.0).to(tl.int32)
    x = tl.load(x_ptr + offs + j, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


PARAMS = {"BLOCK": 1024, "num_warps": 4}


def launch(x, y, out, *, BLOCK, num_warps):
    n = x.numel()
    _add[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=num_warps)
