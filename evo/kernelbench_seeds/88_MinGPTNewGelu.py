# kernelbench problem: 39f345011370a1e2
"""minGPT's tanh GELU, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), elementwise in 1-D blocks (one program per BLOCK values)."""

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _op(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = 0.5 * x * (1.0 + libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    tl.store(y_ptr + offs, y, mask=m)


PARAMS = {"BLOCK": 128, "num_warps": 1}
SPACE = {"BLOCK": [128, 256, 512, 1024, 2048, 4096], "num_warps": [1, 2, 4, 8]}


def launch(x, y, *, BLOCK, num_warps):
    n = x.numel()
    _op[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=num_warps)
