"""Naive sum: a single program walks the whole vector."""

import triton
import triton.language as tl


@triton.jit
def _sum_one_program(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


PARAMS = {"BLOCK": 256, "num_warps": 4}
SPACE = {"BLOCK": [256, 512, 1024, 2048, 4096], "num_warps": [1, 2, 4, 8]}


def launch(x, out, *, BLOCK, num_warps):
    _sum_one_program[(1,)](x, out, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
