"""Wrong on a GPU: every program adds its chunk into the result with a plain load and store (no
atomics). Right in the interpreter, which runs programs one after another."""

import triton
import triton.language as tl


@triton.jit
def _sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    part = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    if pid == 0:
        tl.store(out_ptr, part)
    else:
        tl.store(out_ptr, tl.load(out_ptr) + part)


PARAMS = {"BLOCK": 1024, "num_warps": 4}


def launch(x, out, *, BLOCK, num_warps):
    n = x.numel()
    _sum[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=num_warps)
