"""Honest: every program adds its chunk to the result atomically, onto a result that launch zeroed first
(``out.zero_()``): the adds read written memory."""

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
    out.zero_()
    _sum[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=num_warps)
