# kernelbench problem: 0a5c3e8b5f439f63
"""x divided by its Frobenius norm (over every element): one program sums the squares of the whole
tensor into a scratch value, then programs of BLOCK elements divide by its square root."""

import torch
import triton
import triton.language as tl


@triton.jit
def _sum_squares(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        acc += x * x
    tl.store(out_ptr, tl.sum(acc, 0))


@triton.jit
def _divide(x_ptr, total_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    norm = tl.sqrt(tl.load(total_ptr))
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m, other=0.0) / norm, mask=m)


PARAMS = {"BLOCK": 256}
SPACE = {"BLOCK": [256, 512, 1024, 2048, 4096]}


def launch(x, y, *, BLOCK):
    n = x.numel()
    total = torch.empty((1,), device=x.device, dtype=torch.float32)
    _sum_squares[(1,)](x, total, n, BLOCK=BLOCK)
    _divide[(triton.cdiv(n, BLOCK),)](x, total, y, n, BLOCK=BLOCK)
