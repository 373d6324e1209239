# kernelbench problem: a7b6577642cd00b6
import triton
import triton.language as tl


@triton.jit
def _scale(a_ptr, s_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    s = tl.load(s_ptr)
    tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=m) * s, mask=m)


PARAMS = {"BLOCK": 1024}
SPACE = {"BLOCK": [256, 512, 1024, 2048, 4096]}


def launch(A, s, C, *, BLOCK):
    n = A.numel()
    _scale[(triton.cdiv(n, BLOCK),)](A, s, C, n, BLOCK=BLOCK)
