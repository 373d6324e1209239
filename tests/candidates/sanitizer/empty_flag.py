"""Wrong outside the check: launch allocates a flag with ``torch.empty`` and the kernel, where the flag
reads 0 (what recycled GPU memory often holds), adds up only the first half of the vector. The check
poisons such scratch (an extreme integer, never 0), so every check run takes the full path."""

import torch
import triton
import triton.language as tl


@triton.jit
def _sum_one_program(x_ptr, out_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    stop = tl.where(tl.load(flag_ptr) == 0, n // 2, n)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < stop, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


PARAMS = {"BLOCK": 256, "num_warps": 4}


def launch(x, out, *, BLOCK, num_warps):
    flag = torch.empty(1, dtype=torch.int32, device=x.device)
    _sum_one_program[(1,)](x, out, flag, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
