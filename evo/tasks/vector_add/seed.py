"""Naive vector add: tiny blocks, one warp each."""

import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


PARAMS = {"BLOCK": 64, "num_warps": 1}
SPACE = {"BLOCK": [64, 128, 256, 512, 1024, 2048, 4096], "num_warps": [1, 2, 4, 8]}


def launch(x, y, out, *, BLOCK, num_warps):
    n = x.numel()
    _add[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=num_warps)
