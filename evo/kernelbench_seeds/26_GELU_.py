# kernelbench problem: 0408c40b9be031e6
# kernelbench problem: f6af8f7462480683
"""Exact GELU, 0.5 x (1 + erf(x / sqrt 2)), elementwise in 1-D blocks, with libdevice's erf."""

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _gelu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = 0.5 * x * (1.0 + libdevice.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=m)


PARAMS = {"BLOCK": 1024}
SPACE = {"BLOCK": [256, 512, 1024, 2048, 4096]}


def launch(x, y, *, BLOCK):
    n = x.numel()
    _gelu[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
