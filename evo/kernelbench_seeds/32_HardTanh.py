# kernelbench problem: 8731f7c9758f1baa
"""HardTanh, x clamped to [-1, 1]; a NaN stays NaN, elementwise in 1-D blocks (one program per BLOCK values)."""

import triton
import triton.language as tl


@triton.jit
def _op(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.where(x < -1.0, -1.0, x)
    y = tl.where(y > 1.0, 1.0, y)
    tl.store(y_ptr + offs, y, mask=m)


PARAMS = {"BLOCK": 128, "num_warps": 1}
SPACE = {"BLOCK": [128, 256, 512, 1024, 2048, 4096], "num_warps": [1, 2, 4, 8]}


def launch(x, y, *, BLOCK, num_warps):
    n = x.numel()
    _op[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=num_warps)
