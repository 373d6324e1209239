"""Honest twin of `ticket_relaxed_publish`: the same atomics with Triton's default ``sem="acq_rel"`` and a
barrier before the ticket, so every partial's update is ordered before the read of the
program with the last ticket: ``ok``."""

import torch
import triton
import triton.language as tl


@triton.jit
def _sum(x_ptr, part_ptr, count_ptr, out_ptr, n, PROGRAMS: tl.constexpr, BLOCK: tl.constexpr,
         PBLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(part_ptr + pid, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))
    tl.debug_barrier()
    ticket = tl.atomic_add(count_ptr, 1)
    if ticket == PROGRAMS - 1:
        p = tl.arange(0, PBLOCK)
        parts = tl.atomic_add(part_ptr + p, tl.zeros((PBLOCK,), dtype=tl.float32), mask=p < PROGRAMS)
        tl.store(out_ptr, tl.sum(tl.where(p < PROGRAMS, parts, 0.0), axis=0))


PARAMS = {"BLOCK": 1024, "num_warps": 4}


def launch(x, out, *, BLOCK, num_warps):
    n = x.numel()
    programs = triton.cdiv(n, BLOCK)
    part = torch.zeros(programs, dtype=torch.float32, device=x.device)
    count = torch.zeros(1, dtype=torch.int32, device=x.device)
    _sum[(programs,)](x, part, count, out, n, PROGRAMS=programs, BLOCK=BLOCK,
                      PBLOCK=triton.next_power_of_2(programs), num_warps=num_warps)
