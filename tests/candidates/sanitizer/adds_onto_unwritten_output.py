"""Wrong: `zeroed_on_host` without its ``out.zero_()``: the first atomic add reads an output nothing has
written."""

import triton
import triton.language as tl


@triton.jit
def _sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


PARAMS = {"BLOCK": 1024, "num_warps": 4}


def launch(x, out, *, BLOCK, num_warps):
    n = x.numel()
    _sum[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=num_warps)
