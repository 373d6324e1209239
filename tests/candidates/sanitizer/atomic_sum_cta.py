"""Wrong on a GPU: the atomic sum of `gaming/atomic_sum` with ``scope="cta"``, atomic only among the threads
of one program: two programs' adds to the result can lose one. Right in the interpreter, which runs
programs one after another; ``ok`` while the sanitizer ignored ``scope``."""

import triton
import triton.language as tl


@triton.jit
def _zero(out_ptr):
    tl.store(out_ptr, 0.0)


@triton.jit
def _sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0), scope="cta")


PARAMS = {"BLOCK": 1024, "num_warps": 4}


def launch(x, out, *, BLOCK, num_warps):
    n = x.numel()
    _zero[(1,)](out)
    _sum[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=num_warps)
