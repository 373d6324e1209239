"""Wrong on a GPU: launch makes its scratch with ``torch.Tensor(n)``, a constructor the run-time guard does
not see: host memory (a GPU kernel cannot read it) that the check does not poison."""

import torch
import triton
import triton.language as tl


@triton.jit
def _partials(x_ptr, part_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(part_ptr + pid, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


@triton.jit
def _total(part_ptr, out_ptr, programs, PBLOCK: tl.constexpr):
    p = tl.arange(0, PBLOCK)
    tl.store(out_ptr, tl.sum(tl.load(part_ptr + p, mask=p < programs, other=0.0), axis=0))


PARAMS = {"BLOCK": 1024, "num_warps": 4}


def launch(x, out, *, BLOCK, num_warps):
    n = x.numel()
    programs = triton.cdiv(n, BLOCK)
    part = torch.Tensor(programs)
    _partials[(programs,)](x, part, n, BLOCK=BLOCK, num_warps=num_warps)
    _total[(1,)](part, out, programs, PBLOCK=triton.next_power_of_2(programs), num_warps=num_warps)
