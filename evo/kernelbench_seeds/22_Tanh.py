# kernelbench problem: acbf1980dc8b2244
# kernelbench problem: 3a5bb1af7f8f274e
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _tanh(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(y_ptr + offs, libdevice.tanh(x), mask=m)


PARAMS = {"BLOCK": 1024}
SPACE = {"BLOCK": [256, 512, 1024, 2048, 4096]}


def launch(x, y, *, BLOCK):
    n = x.numel()
    _tanh[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
