"""Wrong: partial sums go into the second half of ``torch.empty`` scratch, of which launch zeroed only the
first: the atomic adds read memory nothing wrote (a fill counts for the elements it covers, not for
its buffer)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _partials(x_ptr, part_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(part_ptr + pid, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


@triton.jit
def _total(part_ptr, out_ptr, programs, PBLOCK: tl.constexpr):
    p = tl.arange(0, PBLOCK)
    tl.store(out_ptr, tl.sum(tl.load(part_ptr + p, mask=p < programs, other=0.0), axis=0))


PARAMS = {"BLOCK": 1024, "num_warps": 4}


def launch(x, out, *, BLOCK, num_warps):
    n = x.numel()
    programs = triton.cdiv(n, BLOCK)
    part = torch.empty(2 * programs, dtype=torch.float32, device=x.device)
    part.as_strided((programs,), (1,), 0).zero_()
    second = part.as_strided((programs,), (1,), programs)
    _partials[(programs,)](x, second, n, BLOCK=BLOCK, num_warps=num_warps)
    _total[(1,)](second, out, programs, PBLOCK=triton.next_power_of_2(programs), num_warps=num_warps)
