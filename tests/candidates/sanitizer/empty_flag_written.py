"""Honest twin of `empty_flag`: a first launch writes the flag, so the kernel reads what it wrote (and adds
up the whole vector: the flag is 1, the stop n)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _sum_one_program(x_ptr, out_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    stop = n * tl.load(flag_ptr)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < stop, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


@triton.jit
def _mark(flag_ptr):
    tl.store(flag_ptr, 1)


PARAMS = {"BLOCK": 256, "num_warps": 4}


def launch(x, out, *, BLOCK, num_warps):
    flag = torch.empty(1, dtype=torch.int32, device=x.device)
    _mark[(1,)](flag)
    _sum_one_program[(1,)](x, out, flag, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
